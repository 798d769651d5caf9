"""Settling remote attempts (SPEC §10): concurrent reports on one run, and runs that stay busy.

Reports on one run take turns (``RunLocks``): many at once are each committed on the first try,
never answered a revision conflict. A settle that meets a newer revision on every try raises
``RunBusy`` (503 ``unavailable``, which a worker retries), and the lease reaper passes over it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from tests.engine.harness import Harness
from workload_domain.errors import LeaseLost, RevisionConflict, RunBusy
from workload_domain.idempotency import IdempotencyRecord, Replayed
from workload_domain.leases import token_digest
from workload_domain.records import AttemptRecord, RunCommit
from workload_domain.statuses import AttemptStatus, RunStatus, TaskStatus
from workload_domain.workers import Claim, ClaimedAttempt
from workload_engine.clock import FakeClock
from workload_engine.memory import InMemoryStore
from workload_engine.planner import AttemptOutcome, plan
from workload_engine.remote import Decide, RemoteAttempts, RunLocks

pytestmark = pytest.mark.anyio


class ContendedStore(InMemoryStore):
    """Counts the commits refused as stale; while ``stale`` is set, refuses every commit."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.conflicts = 0
        self.stale = False

    async def commit(
        self, commit: RunCommit, idempotency: IdempotencyRecord | None = None
    ) -> Replayed | None:
        await anyio.lowlevel.checkpoint()  # another writer may go first, as over a socket
        if self.stale:
            self.conflicts += 1
            raise RevisionConflict(commit.run.run_id, commit.expected_revision)
        try:
            return await super().commit(commit, idempotency)
        except RevisionConflict:
            self.conflicts += 1
            raise


async def claimed_run(h: Harness, n: int) -> tuple[str, list[ClaimedAttempt]]:
    """A run of ``n`` parallel remote tasks, each attempt queued (as its runner would) and
    claimed by a worker."""
    tasks = [{"key": f"t{i:02}", "action": "resize"} for i in range(n)]
    run_id = await h.create({"id": "fan", "tasks": tasks})
    snapshot = await h.store.load_run(run_id)
    workflow = await h.engine.definitions.get(snapshot.run.workflow_id, snapshot.run.version)
    decided = plan(snapshot, workflow, now=h.clock.now(), local_actions=h.engine.local_actions)
    assert decided.commit is not None
    await h.store.commit(decided.commit)
    digests = tuple(token_digest(f"token-{i}") for i in range(n))
    claim = Claim("w1", ("default",), ("resize",), n, digests)
    items = list(await h.store.claim(claim, h.clock.now()))
    assert len(items) == n
    return run_id, items


def succeeded(attempt: AttemptRecord, now: Any) -> AttemptOutcome:
    output = {"key": attempt.task_key}
    return AttemptOutcome(
        attempt.task_key, attempt.attempt, AttemptStatus.SUCCEEDED, now, output=output
    )


async def test_concurrent_settles_of_one_run_all_commit_on_the_first_try() -> None:
    clock = FakeClock()
    store = ContendedStore(clock)
    h = Harness(store=store, clock=clock)
    remote = RemoteAttempts(store, h.engine)
    n = 40
    run_id, items = await claimed_run(h, n)
    settled: list[Any] = []
    before = store.commits

    async def report(item: ClaimedAttempt) -> None:
        settled.append(await remote.settle(run_id, item.task_key, item.attempt, succeeded))

    async with anyio.create_task_group() as tg:
        for item in items:
            tg.start_soon(report, item)
    assert all(s is not None for s in settled)
    assert len(settled) == n
    assert store.conflicts == 0  # taking turns, no report met another
    assert store.commits - before < n  # whoever had the turn committed those waiting with it
    assert len(remote.locks) == 0  # nothing is kept for a run nobody settles
    snapshot = await store.load_run(run_id)
    assert snapshot.run.status is RunStatus.SUCCEEDED
    assert {t.status for t in snapshot.tasks} == {TaskStatus.SUCCEEDED}


async def test_a_refusal_or_a_duplicate_in_a_turn_leaves_the_others_recorded() -> None:
    clock = FakeClock()
    store = ContendedStore(clock)
    h = Harness(store=store, clock=clock)
    remote = RemoteAttempts(store, h.engine)
    run_id, items = await claimed_run(h, 4)
    refused, duplicated = items[0], items[1]

    def refuse(attempt: AttemptRecord, now: Any) -> AttemptOutcome:
        raise LeaseLost("unknown", "not this attempt's token")

    answers: dict[int, Any] = {}

    async def report(i: int, item: ClaimedAttempt, decide: Decide) -> None:
        try:
            answers[i] = await remote.settle(run_id, item.task_key, item.attempt, decide)
        except LeaseLost as exc:
            answers[i] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(report, 0, refused, refuse)
        tg.start_soon(report, 1, duplicated, succeeded)
        tg.start_soon(report, 2, duplicated, succeeded)  # the same report, concurrently
        tg.start_soon(report, 3, items[2], succeeded)
        tg.start_soon(report, 4, items[3], succeeded)
    assert isinstance(answers[0], LeaseLost)
    # One of the duplicates recorded the outcome; the other found the attempt ended.
    assert sorted(answers[i] is None for i in (1, 2)) == [False, True]
    assert answers[3] is not None
    assert answers[4] is not None
    tasks = {t.task_key: t.status for t in (await store.load_run(run_id)).tasks}
    assert tasks == {
        refused.task_key: TaskStatus.RUNNING,
        duplicated.task_key: TaskStatus.SUCCEEDED,
        items[2].task_key: TaskStatus.SUCCEEDED,
        items[3].task_key: TaskStatus.SUCCEEDED,
    }
    assert len(remote.locks) == 0


async def test_a_run_stale_on_every_try_is_busy_and_the_reaper_passes_over_it() -> None:
    clock = FakeClock()
    store = ContendedStore(clock)
    h = Harness(store=store, clock=clock)
    remote = RemoteAttempts(store, h.engine)
    run_id, (item,) = await claimed_run(h, 1)
    store.stale = True
    with pytest.raises(RunBusy) as busy:
        await remote.settle(run_id, item.task_key, item.attempt, succeeded)
    assert (busy.value.code, busy.value.retry_after) == ("unavailable", 1)
    assert not isinstance(busy.value, RevisionConflict)
    (live,) = (await store.load_run(run_id)).live_attempts
    assert live.status is AttemptStatus.RUNNING  # nothing was written
    # The lease runs out while the run stays busy: the reaper goes on, and expires it later.
    clock.advance(item.heartbeat_timeout_seconds + 1)
    assert await remote.expire_due() == 0
    store.stale = False
    assert await remote.expire_due() == 1
    first = (await store.list_attempts(run_id, item.task_key))[0]
    assert (first.status, first.error and first.error.code) == (
        AttemptStatus.INTERRUPTED,
        "lease_expired",
    )
    assert len(remote.locks) == 0


class RenewingStore(InMemoryStore):
    """Renews a lease (a heartbeat timed just before its end) right after the next call that
    ``after`` names: a read of a run (``load_run``), of an attempt or a tool call (``find_*``),
    or a tool call's end (``finish_step``)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.renew: tuple[str, str, Any] | None = None  # attempt or step id, token, time
        self.after = "load_run"
        self.renewed: Any = None

    async def load_run(self, run_id: str) -> Any:
        snapshot = await super().load_run(run_id)
        await self._renew("load_run")
        return snapshot

    async def find_attempt(self, attempt_id: str) -> Any:
        found = await super().find_attempt(attempt_id)
        await self._renew("find_attempt")
        return found

    async def find_tool_call(self, step_id: str) -> Any:
        found = await super().find_tool_call(step_id)
        await self._renew("find_tool_call")
        return found

    async def finish_step(self, step: Any, **fence: Any) -> Any:
        done = await super().finish_step(step, **fence)
        await self._renew("finish_step")
        return done

    async def _renew(self, read: str) -> None:
        if self.renew is not None and read == self.after:
            leased_id, token, at = self.renew
            self.renew = None
            self.renewed = await self.heartbeat(leased_id, token_digest(token), at, None)


async def test_the_reaper_leaves_an_attempt_whose_lease_was_renewed_after_its_read() -> None:
    clock = FakeClock()
    store = RenewingStore(clock)
    h = Harness(store=store, clock=clock)
    remote = RemoteAttempts(store, h.engine)
    run_id, (item,) = await claimed_run(h, 1)
    lease = item.heartbeat_timeout_seconds
    store.renew = (item.attempt_id, "token-0", clock.now() + timedelta(seconds=lease - 0.5))
    clock.advance(lease)
    # Read with its lease run out, renewed before the commit: the commit conflicts, the read
    # again finds the lease held, and nothing ends.
    assert await remote.expire_due() == 0
    assert store.renewed is not None
    (live,) = (await store.load_run(run_id)).live_attempts
    assert (live.status, live.lease_expires_at) == (AttemptStatus.RUNNING, store.renewed)
    clock.advance(lease)
    assert await remote.expire_due() == 1
    (ended,) = await store.list_attempts(run_id, item.task_key)
    assert ended.status is AttemptStatus.INTERRUPTED


async def test_run_locks_serialize_one_run_and_leave_others_free() -> None:
    locks = RunLocks()
    inside = {"a": 0, "b": 0}
    peak = {"a": 0, "b": 0}

    async def hold(run_id: str) -> None:
        async with locks.hold(run_id):
            inside[run_id] += 1
            peak[run_id] = max(peak[run_id], inside[run_id])
            for _ in range(3):
                await anyio.lowlevel.checkpoint()
            inside[run_id] -= 1

    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(hold, "a")
            tg.start_soon(hold, "b")
    assert peak == {"a": 1, "b": 1}
    assert len(locks) == 0

    # A run held does not hold up another; a waiter that gives up is forgotten too.
    release = anyio.Event()
    held = anyio.Event()

    async def keep_a() -> None:
        async with locks.hold("a"):
            held.set()
            await release.wait()

    with anyio.fail_after(10):  # a bound on a hang, not a timing assertion
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_a)
            await held.wait()
            async with locks.hold("b"):
                assert len(locks) == 2
            with anyio.CancelScope() as waiting:
                waiting.cancel()
                async with locks.hold("a"):
                    pytest.fail("entered a held run's lock")  # pragma: no cover
            assert len(locks) == 1
            release.set()
    assert len(locks) == 0
