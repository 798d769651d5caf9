"""A worker's report reaching its run's runner: the run read again only when needed (SPEC §16).

The report brings the attempt and the run's position as its reporter read them
(``find_attempt``); the runner takes them for a read of the run when they show nothing else
changed (:func:`~workload_engine._held_reports.caught_up`), and reads the run otherwise.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import anyio
import pytest

from tests.engine.harness import Harness
from tests.engine.test_shards import completed, running
from tests.waiting import await_until
from workload_domain.leases import LeasedAttempt, RunPosition, token_digest
from workload_domain.records import AttemptRecord, RunSnapshot
from workload_domain.statuses import AttemptStatus, RunStatus
from workload_domain.workers import Claim
from workload_engine._held_reports import caught_up
from workload_engine.clock import FakeClock
from workload_engine.engine import Engine
from workload_engine.memory import InMemoryStore
from workload_engine.planner import AttemptOutcome
from workload_engine.remote import RemoteAttempts
from workload_engine.reports import Decide, Report

pytestmark = pytest.mark.anyio


class ReadCountingStore(InMemoryStore):
    """Counts the reads of a whole run."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.loads = 0

    async def load_run(self, run_id: str) -> RunSnapshot:
        self.loads += 1
        return await super().load_run(run_id)


def two_remote_tasks() -> dict[str, Any]:
    return {
        "id": "pair",
        "tasks": [{"key": "a", "action": "resize"}, {"key": "b", "action": "resize"}],
    }


async def claim(h: Harness, n: int = 1) -> list[str]:
    """Claim ``n`` queued attempts (one statement); their attempt ids."""
    digests = tuple(token_digest(f"t{i}") for i in range(n))
    claimed = await h.store.claim(Claim("w1", ("default",), ("resize",), n, digests), h.clock.now())
    return [c.attempt_id for c in claimed]


@dataclass
class Executing:
    """A run of two remote tasks, both queued, its runner executing it."""

    h: Harness
    store: ReadCountingStore
    remote: RemoteAttempts
    run_id: str

    async def claim_and_read(self) -> LeasedAttempt:
        """Claim one queued attempt and read it as a report handler does."""
        (attempt_id,) = await claim(self.h)
        seen = await self.store.find_attempt(attempt_id)
        assert seen is not None
        return seen

    async def report(
        self, seen: LeasedAttempt, decide: Decide = completed, *, with_read: bool = True
    ) -> tuple[AttemptRecord, int]:
        """Settle the attempt ``seen`` as a handler does: the attempt as ended, the runs read."""
        reads = self.store.loads
        with anyio.fail_after(5):
            settled = await self.remote.settle(
                self.run_id, seen.attempt.task_key, 1, decide, seen if with_read else None
            )
        assert settled is not None
        return settled.attempt, self.store.loads - reads


@asynccontextmanager
async def executing() -> AsyncIterator[Executing]:
    clock = FakeClock()
    store = ReadCountingStore(clock)
    h = Harness(store=store, clock=clock)
    run_id = await h.create(two_remote_tasks())
    engine = Engine(store, h.executor, clock)

    async def both_queued() -> bool:
        return len((await store.load_run(run_id)).live_attempts) == 2

    async with running(engine, clock):
        engine.submit(run_id)
        await await_until(both_queued, within=5, message="the two attempts are not queued")
        yield Executing(h, store, RemoteAttempts(store, engine), run_id)
        with anyio.fail_after(5):
            await engine.wait_finished(run_id)
    assert (await h.view(run_id)).status == RunStatus.SUCCEEDED.value


@pytest.mark.parametrize("with_read", [True, False])
async def test_a_report_with_its_reporters_read_needs_no_read_of_the_run(with_read: bool) -> None:
    decided_on: list[AttemptStatus] = []

    def complete(attempt: AttemptRecord, now: Any) -> AttemptOutcome:
        decided_on.append(attempt.status)
        return completed(attempt, now)

    async with executing() as e:
        for _ in range(2):
            seen = await e.claim_and_read()
            ended, reads = await e.report(seen, complete, with_read=with_read)
            assert ended.status is AttemptStatus.SUCCEEDED
            # Committed from the report's read alone; a report without one makes the runner read.
            assert reads == (0 if with_read else 1)
    assert decided_on == [AttemptStatus.RUNNING, AttemptStatus.RUNNING]  # as claimed


async def test_a_report_that_missed_a_change_still_commits_on_the_run_as_stored() -> None:
    # a is claimed and read; then b is claimed (a revision the report did not see): the
    # runner's commit from the report's read meets the newer revision, reads the run again,
    # and leaves b's claim as it is.
    async with executing() as e:
        seen = await e.claim_and_read()
        other = await e.claim_and_read()
        ended, reads = await e.report(seen)
        assert (ended.status, reads) == (AttemptStatus.SUCCEEDED, 1)
        still = await e.store.find_attempt(other.attempt.attempt_id)
        assert still is not None
        assert (still.attempt.status, still.attempt.worker_id) == (AttemptStatus.RUNNING, "w1")
        await e.report(other)


# caught_up, case by case: a snapshot whose attempts a and b are queued at revision 4.

NOW = FakeClock().now()


def attempt(key: str, status: AttemptStatus = AttemptStatus.QUEUED) -> AttemptRecord:
    return AttemptRecord(key, 1, status, NOW, queue="default", action="resize")


async def snapshot_of_two_queued() -> RunSnapshot:
    clock = FakeClock()
    h = Harness(clock=clock)
    run_id = await h.create(two_remote_tasks())
    stored = await h.store.load_run(run_id)
    run = replace(stored.run, revision=4, status=RunStatus.RUNNING)
    return replace(stored, run=run, live_attempts=(attempt("a"), attempt("b")), last_sequence=9)


def report(
    snapshot: RunSnapshot,
    key: str,
    status: AttemptStatus,
    revision: int,
    sequence: int,
    *,
    lease: timedelta = timedelta(seconds=30),
) -> Report:
    seen = replace(attempt(key, status), worker_id="w1", lease_expires_at=NOW + lease)
    position = RunPosition(revision, sequence, NOW + timedelta(seconds=1))
    leased = LeasedAttempt(snapshot.run.run_id, seen, "digest", position)
    return Report((key, 1), completed, leased)


async def test_a_claim_seen_is_the_one_change_taken_without_a_read() -> None:
    snapshot = await snapshot_of_two_queued()
    after = caught_up(snapshot, [report(snapshot, "a", AttemptStatus.RUNNING, 5, 10)], NOW)
    assert after is not None
    assert (after.run.revision, after.last_sequence) == (5, 10)
    assert after.run.updated_at == NOW + timedelta(seconds=1)
    a, b = after.live_attempts
    assert (a.status, a.worker_id, b) == (AttemptStatus.RUNNING, "w1", attempt("b"))
    assert after.tasks == snapshot.tasks


async def test_a_lease_renewed_at_the_same_revision_is_taken_without_a_read() -> None:
    snapshot = await snapshot_of_two_queued()
    held = replace(snapshot, live_attempts=(attempt("a", AttemptStatus.RUNNING), attempt("b")))
    renewed = report(held, "a", AttemptStatus.RUNNING, 4, 9, lease=timedelta(hours=1))
    after = caught_up(held, [renewed], NOW)
    assert after is not None
    assert after.run == held.run
    assert after.live_attempts[0].lease_expires_at == NOW + timedelta(hours=1)


@pytest.mark.parametrize(
    ("known", "seen_status", "revision", "sequence"),
    [
        (AttemptStatus.QUEUED, AttemptStatus.RUNNING, 6, 11),  # a claim and something else
        (AttemptStatus.QUEUED, AttemptStatus.RUNNING, 5, 11),  # a claim of a and b together
        (AttemptStatus.QUEUED, AttemptStatus.RUNNING, 6, 10),  # two revisions, one event
        (AttemptStatus.RUNNING, AttemptStatus.RUNNING, 5, 10),  # another commit, not a claim
        (AttemptStatus.QUEUED, AttemptStatus.QUEUED, 5, 10),  # a revision, a not claimed
        (AttemptStatus.QUEUED, AttemptStatus.RUNNING, 4, 9),  # claimed with no revision
        (AttemptStatus.QUEUED, AttemptStatus.RUNNING, 3, 8),  # read before the snapshot
        (AttemptStatus.QUEUED, AttemptStatus.SUCCEEDED, 5, 10),  # ended, not claimed
    ],
)
async def test_anything_else_seen_is_read_again(
    known: AttemptStatus, seen_status: AttemptStatus, revision: int, sequence: int
) -> None:
    snapshot = await snapshot_of_two_queued()
    snapshot = replace(snapshot, live_attempts=(attempt("a", known), attempt("b")))
    seen = report(snapshot, "a", seen_status, revision, sequence)
    assert caught_up(snapshot, [seen], NOW) is None


async def test_a_lease_read_that_has_run_out_is_read_again() -> None:
    # A heartbeat may have renewed it after the report's read: the stored lease decides.
    snapshot = await snapshot_of_two_queued()
    claimed = report(snapshot, "a", AttemptStatus.RUNNING, 5, 10, lease=timedelta(seconds=30))
    assert caught_up(snapshot, [claimed], NOW + timedelta(seconds=29)) is not None
    assert caught_up(snapshot, [claimed], NOW + timedelta(seconds=30)) is None


async def test_reports_that_saw_nothing_or_several_are_read_again() -> None:
    snapshot = await snapshot_of_two_queued()
    claimed = report(snapshot, "a", AttemptStatus.RUNNING, 5, 10)
    assert caught_up(snapshot, [claimed], NOW) is not None
    unseen = Report(("a", 1), completed)
    seen = claimed.seen
    assert seen is not None
    no_position = Report(("a", 1), completed, replace(seen, run=None))
    other_key = Report(("b", 1), completed, seen)
    not_live = Report(("c", 1), completed, replace(seen, attempt=attempt("c")))
    other_run = Report(("a", 1), completed, replace(seen, run_id="another-run"))
    several = [claimed, claimed]
    for reports in ([unseen], [no_position], [other_key], [not_live], [other_run], several, []):
        assert caught_up(snapshot, reports, NOW) is None
