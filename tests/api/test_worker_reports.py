"""A worker's report on a run whose cancel was committed first is refused (SPEC §10 fencing).

Since a cancel ends remote attempts in its own commit, a report can only meet such a run when
an older server recorded the cancel alone (it left the remote attempts to the runner): the
report's outcome is then not recorded, and the worker is told 409 ``lease_lost``, ``canceled``
— never 200 with an attempt it did not end that way.
"""

from __future__ import annotations

from datetime import timedelta

import anyio
import pytest

from tests.engine.harness import Harness
from tests.engine.test_agent import agent, call, say, tool, wf, worker_claims
from tests.engine.test_agent import harness as agent_harness
from tests.engine.test_remote import RenewingStore, claimed_run
from workload_api.usecases.workers import WorkerUseCases
from workload_domain.agent.journal import StepStatus
from workload_domain.errors import LeaseLost
from workload_domain.events import EventType
from workload_domain.leases import LeasedAttempt, token_digest
from workload_domain.statuses import AttemptStatus
from workload_engine._working_run import WorkingRun
from workload_engine.clock import FakeClock
from workload_engine.memory import InMemoryStore
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
    store.after = "find_attempt"
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


@pytest.mark.parametrize(
    ("renewed_after", "answered"),
    [("find_tool_call", "succeeded"), ("finish_step", "expired"), (None, "expired")],
    ids=["renewed-after-its-read", "renewed-after-its-refusal", "not-renewed"],
)
async def test_a_tool_call_report_is_judged_on_its_lease_as_stored(
    renewed_after: str | None, answered: str
) -> None:
    # As for a task attempt: the store judges the lease on the step as it writes it. A renewal
    # written after the report's read records it; one written only after the store refused it
    # (or none) leaves it refused as expired, the step running and unchanged.
    clock = FakeClock()
    store = RenewingStore(clock)
    h, _ = agent_harness(store, clock)
    script = [call("search", {"q": "x"}), say("ok")]
    run_id = await h.create(wf(agent(tools=[tool("search", "search")], script=script)))
    workers = WorkerUseCases(
        store, remote=RemoteAttempts(store, h.engine), signal=WorkSignal(), clock=clock
    )
    refused: LeaseLost | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.engine.execute, run_id)
        item, token = await worker_claims(store, clock)
        lease = item.heartbeat_timeout_seconds
        if renewed_after is not None:
            store.after = renewed_after
            store.renew = (item.attempt_id, token, clock.now() + timedelta(seconds=lease - 0.5))
        clock.advance(lease)
        body = {"lease_token": token, "output": {"hits": 3}}
        try:
            answer = await workers.complete(item.attempt_id, body)
        except LeaseLost as exc:
            refused = exc
        tg.cancel_scope.cancel()
    assert (store.renewed is not None) == (renewed_after is not None)
    found = await store.find_tool_call(item.attempt_id)
    assert found is not None
    if answered == "succeeded":
        assert refused is None
        assert (answer["status"], found.step.status) == ("succeeded", StepStatus.SUCCEEDED)
    else:
        assert refused is not None
        assert refused.reason == answered
        assert (found.step.status, found.step.response) == (StepStatus.RUNNING, None)


class StaleReads(InMemoryStore):
    """Answers the next reads of an attempt with the ones in ``stale``, first to last."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.stale: list[LeasedAttempt] = []

    async def find_attempt(self, attempt_id: str) -> LeasedAttempt | None:
        found = await super().find_attempt(attempt_id)
        return self.stale.pop(0) if self.stale else found


async def test_duplicate_reports_that_read_the_lease_before_its_renewal_get_one_answer() -> None:
    # Two identical completes both read the lease before a heartbeat's renewal was written;
    # the first, reading again, is recorded; the second, reading again, finds it recorded and
    # is answered as the first was (SPEC §10: a repeated report answers the same 200).
    clock = FakeClock()
    store = StaleReads(clock)
    h = Harness(store=store, clock=clock)
    _, (item,) = await claimed_run(h, 1)
    before = await store.find_attempt(item.attempt_id)
    assert before is not None
    lease = item.heartbeat_timeout_seconds
    renewal = clock.now() + timedelta(seconds=lease - 0.5)
    assert await store.heartbeat(item.attempt_id, token_digest("token-0"), renewal, None)
    clock.advance(lease)
    workers = WorkerUseCases(
        store, remote=RemoteAttempts(store, h.engine), signal=WorkSignal(), clock=clock
    )
    body = {"lease_token": "token-0", "output": {"done": True}}
    store.stale = [before]
    first = await workers.complete(item.attempt_id, body)
    assert store.stale == []
    store.stale = [before]
    second = await workers.complete(item.attempt_id, body)
    assert store.stale == []
    assert first["status"] == "succeeded"
    assert second == first
