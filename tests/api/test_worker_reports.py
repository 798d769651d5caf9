"""A worker's report on a run whose cancel was committed first is refused (SPEC §10 fencing).

Since a cancel ends remote attempts in its own commit, a report can only meet such a run when
an older server recorded the cancel alone (it left the remote attempts to the runner): the
report's outcome is then not recorded, and the worker is told 409 ``lease_lost``, ``canceled``
— never 200 with an attempt it did not end that way.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.engine.harness import Harness
from tests.engine.test_remote import RenewingStore, claimed_run
from workload_api.usecases.workers import WorkerUseCases
from workload_domain.errors import LeaseLost
from workload_domain.events import EventType
from workload_domain.statuses import AttemptStatus
from workload_engine._working_run import WorkingRun
from workload_engine.clock import FakeClock
from workload_engine.remote import RemoteAttempts
from workload_engine.signals import WorkSignal

pytestmark = pytest.mark.anyio


async def test_a_report_after_a_recorded_cancel_is_refused_as_canceled() -> None:
    h = Harness()
    run_id, (item,) = await claimed_run(h, 1)
    # An older server's cancel: the request recorded, the remote attempt left running.
    working = WorkingRun(await h.store.load_run(run_id), h.clock.now())
    working.set_run(cancel_requested=True)
    working.emit(EventType.RUN_CANCEL_REQUESTED)
    commit, _ = working.result()
    assert commit is not None
    await h.store.commit(commit)
    workers = WorkerUseCases(
        h.store, remote=RemoteAttempts(h.store, h.engine), signal=WorkSignal(), clock=h.clock
    )
    body = {"lease_token": "token-0", "output": {"done": True}}
    with pytest.raises(LeaseLost) as refused:
        await workers.complete(item.attempt_id, body)
    assert refused.value.reason == "canceled"
    found = await h.store.find_attempt(item.attempt_id)
    assert found is not None
    assert found.attempt.status is AttemptStatus.CANCELED  # the run converged, output dropped
    assert found.attempt.output is None


async def test_a_report_meeting_a_lease_renewed_after_its_read_is_recorded() -> None:
    # The report read the lease run out; a heartbeat that found it held (its time, just before
    # the end) committed right after that read, without a revision. The stored lease decides:
    # the report is recorded, not refused as expired (ADR 0048).
    clock = FakeClock()
    store = RenewingStore(clock)
    h = Harness(store=store, clock=clock)
    _, (item,) = await claimed_run(h, 1)
    lease = item.heartbeat_timeout_seconds
    store.renew = (item.attempt_id, "token-0", clock.now() + timedelta(seconds=lease - 0.5))
    clock.advance(lease)
    workers = WorkerUseCases(
        store, remote=RemoteAttempts(store, h.engine), signal=WorkSignal(), clock=clock
    )
    body = {"lease_token": "token-0", "output": {"done": True}}
    answer = await workers.complete(item.attempt_id, body)
    assert store.renewed is not None
    assert (answer["status"], answer["output"]) == ("succeeded", {"done": True})
    # Without a renewal, a report past the lease is refused as expired.
    _, (late,) = await claimed_run(h, 1)
    clock.advance(lease)
    with pytest.raises(LeaseLost) as refused:
        await workers.complete(late.attempt_id, body)
    assert refused.value.reason == "expired"
