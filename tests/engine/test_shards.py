"""A replica's engine (SPEC §16): it executes the runs of its shards only, fences its writes with
their epochs, hands a shard over (drained, then interrupted past the grace), and commits the
reports that reach its runners in their own commits."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from tests.engine.harness import Harness, mock, workflow
from tests.waiting import await_until
from workload_domain.fencing import current_fence
from workload_domain.idempotency import IdempotencyRecord, Replayed
from workload_domain.leases import token_digest
from workload_domain.records import (
    AttemptRecord,
    ExecutorRequest,
    ExecutorResult,
    RunCommit,
)
from workload_domain.shards import DEFAULT_SHARDS, ShardFence, shard_of
from workload_domain.statuses import AttemptStatus, RunStatus
from workload_domain.workers import Claim
from workload_engine.clock import FakeClock
from workload_engine.engine import DEFAULT_STARTUP_CONCURRENCY, Engine
from workload_engine.memory import InMemoryStore
from workload_engine.mock_executor import MockExecutor
from workload_engine.ownership import ShardOwnership
from workload_engine.planner import AttemptOutcome
from workload_engine.remote import RemoteAttempts
from workload_engine.reports import Report

pytestmark = pytest.mark.anyio

REPLICA = "replica-7"


class FenceRecordingStore(InMemoryStore):
    """Records, for every commit, the shard fence of the task that made it."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.fences: list[ShardFence | None] = []
        self.commits_made: list[RunCommit] = []

    async def commit(
        self, commit: RunCommit, idempotency: IdempotencyRecord | None = None
    ) -> Replayed | None:
        replayed = await super().commit(commit, idempotency)
        self.fences.append(current_fence())
        self.commits_made.append(commit)
        return replayed


class FenceRecordingExecutor:
    """A mock executor that records the shard fence each attempt executes under."""

    def __init__(self, clock: FakeClock) -> None:
        self.inner = MockExecutor(clock)
        self.actions = self.inner.actions
        self.fences: list[ShardFence | None] = []

    async def execute(self, request: ExecutorRequest) -> ExecutorResult:
        self.fences.append(current_fence())
        return await self.inner.execute(request)


def replica_engine(h: Harness, executor: Any = None) -> tuple[Engine, ShardOwnership]:
    engine = Engine(h.store, executor or h.executor, h.clock, executor_id=REPLICA)
    ownership = ShardOwnership(DEFAULT_SHARDS)
    engine.ownership = ownership
    return engine, ownership


@asynccontextmanager
async def running(engine: Engine, clock: FakeClock, *, jump: bool = True) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tg:
        if jump:
            tg.start_soon(clock.autojump)
        await tg.start(engine.run)
        yield
        tg.cancel_scope.cancel()


async def runs_in_two_shards(h: Harness, definition: dict[str, Any]) -> tuple[str, str]:
    """Two runs of ``definition`` whose shards differ."""
    first = await h.create(definition)
    while True:
        second = await h.create(definition)
        if shard_of(second, DEFAULT_SHARDS) != shard_of(first, DEFAULT_SHARDS):
            return first, second


def shard(run_id: str) -> int:
    return shard_of(run_id, DEFAULT_SHARDS)


async def test_a_replica_executes_the_runs_of_its_shards_only_under_their_fence() -> None:
    clock = FakeClock()
    store = FenceRecordingStore(clock)
    h = Harness(store=store, clock=clock)
    executor = FenceRecordingExecutor(clock)
    engine, ownership = replica_engine(h, executor)
    chain = workflow(mock("a"), mock("b", ["a"]))
    mine, other = await runs_in_two_shards(h, chain)
    fence = ShardFence(shard(mine), 3)
    ownership.hold(fence)
    async with running(engine, clock):
        engine.submit(mine)
        engine.submit(other)  # another replica's: left alone
        assert not engine.owns(other)
        with anyio.fail_after(5):
            await engine.wait_finished(mine)
    assert (await h.view(mine)).status == "succeeded"
    assert (await h.view(other)).status == "pending"
    assert store.fences
    assert set(store.fences) == {fence}
    assert executor.fences == [fence, fence]
    view = await h.view(mine)
    assert {a.executed_by for xs in view.attempts.values() for a in xs} == {REPLICA}


async def test_recovery_and_the_sweep_cover_the_shards_held_only() -> None:
    h = Harness()
    engine, ownership = replica_engine(h)
    mine, other = await runs_in_two_shards(h, workflow(mock("a")))
    async with running(engine, h.clock):
        assert await engine.adopt_unowned() == 0  # no shard yet: nothing of anyone's
        ownership.hold(ShardFence(shard(mine), 1))
        assert await engine.recover(shards=[shard(mine)]) == 1
        with anyio.fail_after(5):
            await engine.wait_finished(mine)
        assert await engine.adopt_unowned() == 0
    assert (await h.view(other)).status == "pending"


async def test_a_shard_handed_over_lets_its_attempts_finish_and_starts_nothing_more() -> None:
    h = Harness()
    engine, ownership = replica_engine(h)
    run_id = await h.create(workflow(mock("a", sleep_ms=1000), mock("b", ["a"])))
    ownership.hold(ShardFence(shard(run_id), 1))
    async with running(engine, h.clock, jump=False):
        engine.submit(run_id)
        await await_until(lambda: attempts_of(h, run_id, "a"), within=5)
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.clock.autojump)  # a finishes (fake time) while the shard drains
            with anyio.fail_after(5):
                interrupted = await engine.hand_off(shard(run_id), grace=5)
            tg.cancel_scope.cancel()
        assert interrupted == 0
        assert not engine.owns(run_id)
        engine.submit(run_id)  # no longer this replica's
        assert not engine.owns(run_id)
    view = await h.view(run_id)
    assert view.attempt_statuses("a") == ["succeeded"]  # committed before it was let go
    assert view.attempts["b"] == []  # not started: the taker starts it
    assert view.status == "running"
    assert ownership.serving == ()


async def test_attempts_past_the_hand_off_grace_are_interrupted_writing_nothing() -> None:
    h = Harness()
    engine, ownership = replica_engine(h)
    run_id = await h.create(workflow(mock("a", sleep_ms=600_000)))
    ownership.hold(ShardFence(shard(run_id), 1))
    async with running(engine, h.clock, jump=False):
        engine.submit(run_id)
        await await_until(lambda: attempts_of(h, run_id, "a"), within=5)
        revision = (await h.view(run_id)).snapshot.run.revision
        with anyio.fail_after(5):
            assert await engine.hand_off(shard(run_id), grace=0.1) == 1
        assert not engine.owns(run_id)
    view = await h.view(run_id)
    assert view.attempt_statuses("a") == ["running"]  # interrupted, as by a restart
    assert view.snapshot.run.revision == revision


async def test_queued_runs_of_a_shard_handed_over_are_dropped() -> None:
    h = Harness()
    engine, ownership = replica_engine(h)
    engine.startup = anyio.CapacityLimiter(1)
    ids = [await h.create(workflow(mock("a", sleep_ms=600_000))) for _ in range(12)]
    for run_id in ids:
        ownership.hold(ShardFence(shard(run_id), 1))
    async with running(engine, h.clock, jump=False):
        for run_id in ids:
            engine.submit(run_id)
        target = shard(ids[-1])
        with anyio.fail_after(5):
            await engine.hand_off(target, grace=0.1)
        assert not any(engine.owns(r) for r in ids if shard(r) == target)
        assert all(engine.owns(r) for r in ids if shard(r) != target)


async def test_runners_cancelled_while_waiting_to_start_give_their_place_back() -> None:
    # Runners of a shard handed over are cancelled while they wait for a start-up turn: their
    # places among the runners starting are given back, or a run that must read itself
    # would wait behind them for good.
    h = Harness()
    engine, ownership = replica_engine(h)
    engine.startup = anyio.CapacityLimiter(1)
    definition = workflow(mock("a", sleep_ms=10))
    first = await h.create(definition)
    handed = [first]
    while len(handed) < DEFAULT_STARTUP_CONCURRENCY:
        run_id = await h.create(definition)
        if shard(run_id) == shard(first):
            handed.append(run_id)
    _, other = await runs_in_two_shards(h, definition)
    while shard(other) == shard(first):
        _, other = await runs_in_two_shards(h, definition)
    for run_id in [*handed, other]:
        ownership.hold(ShardFence(shard(run_id), 1))
    async with running(engine, h.clock):
        await engine.startup.acquire()  # every runner that reads its run waits for a turn
        for run_id in handed:
            engine.submit(run_id)
        with anyio.fail_after(5):
            assert await engine.hand_off(shard(first), grace=0.1) == len(handed)
        engine.startup.release()
        engine.submit(other)
        with anyio.fail_after(10):  # a hang guard: the run never starts if places leaked
            await engine.wait_finished(other)
    assert (await h.view(other)).status == "succeeded"


async def remote_then_local(h: Harness) -> str:
    """A run of a remote task ``r`` (a worker claims it), then an in-process one, ``s``."""
    tasks = [
        {"key": "r", "action": "resize"},
        {"key": "s", "action": "mock", "depends_on": ["r"]},
    ]
    return await h.create({"id": "handoff", "tasks": tasks})


def completed(attempt: AttemptRecord, now: Any) -> AttemptOutcome:
    return AttemptOutcome(
        attempt.task_key, attempt.attempt, AttemptStatus.SUCCEEDED, now, output={"done": 1}
    )


async def claim_one(h: Harness) -> None:
    async def claimed() -> bool:
        claim = Claim("w1", ("default",), ("resize",), 1, (token_digest("t"),))
        return bool(await h.store.claim(claim, h.clock.now()))

    await await_until(claimed, within=5, message="nothing to claim")


async def attempts_of(h: Harness, run_id: str, task_key: str) -> list[AttemptRecord]:
    return (await h.view(run_id)).attempts[task_key]


async def test_a_report_reaching_the_runner_is_committed_with_what_it_makes_ready() -> None:
    clock = FakeClock()
    store = FenceRecordingStore(clock)
    h = Harness(store=store, clock=clock)
    engine, ownership = replica_engine(h)
    remote = RemoteAttempts(store, engine)
    run_id = await remote_then_local(h)
    fence = ShardFence(shard(run_id), 2)
    ownership.hold(fence)
    async with running(engine, clock):
        engine.submit(run_id)
        await claim_one(h)
        before = len(store.commits_made)
        with anyio.fail_after(5):
            settled = await remote.settle(run_id, "r", 1, completed)
        assert settled is not None
        assert settled.attempt.status is AttemptStatus.SUCCEEDED
        # One commit ended r and started s (in-process): not a settle, then a runner's commit.
        ending = store.commits_made[before]
        assert {(a.task_key, a.status) for a in ending.attempts} == {
            ("r", AttemptStatus.SUCCEEDED),
            ("s", AttemptStatus.RUNNING),
        }
        assert store.fences[before] == fence  # the runner's commit: fenced
        with anyio.fail_after(5):
            await engine.wait_finished(run_id)
    assert (await h.view(run_id)).status == RunStatus.SUCCEEDED.value


async def test_a_runner_decides_each_report_on_the_run_as_stored() -> None:
    h = Harness()
    engine, ownership = replica_engine(h)
    remote = RemoteAttempts(h.store, engine)
    run_id = await remote_then_local(h)
    ownership.hold(ShardFence(shard(run_id), 1))
    refusals: list[str] = []

    def refuse(attempt: AttemptRecord, now: Any) -> AttemptOutcome:
        refusals.append(attempt.status.value)
        raise ValueError("lease lost")

    async with running(engine, h.clock):
        engine.submit(run_id)
        await claim_one(h)
        with anyio.fail_after(5), pytest.raises(ValueError, match="lease lost"):
            await remote.settle(run_id, "r", 1, refuse)
        # Decided on the attempt as claimed (running), not as the runner first saw it (queued).
        assert refusals == ["running"]
        with anyio.fail_after(5):
            assert await remote.settle(run_id, "r", 1, completed) is not None
            assert await remote.settle(run_id, "r", 1, completed) is None  # no longer live


async def test_a_draining_runner_declines_reports_to_their_sender() -> None:
    h = Harness()
    engine, ownership = replica_engine(h)
    run_id = await remote_then_local(h)
    ownership.hold(ShardFence(shard(run_id), 1))
    async with running(engine, h.clock):
        engine.submit(run_id)
        await claim_one(h)
        with anyio.fail_after(5):
            await engine.hand_off(shard(run_id), grace=1)
        report = Report(("r", 1), completed)
        assert not engine.hand_report(run_id, report)  # no runner here any more
    remote = RemoteAttempts(h.store, engine)
    settled = await remote.settle(run_id, "r", 1, completed)  # committed the other way
    assert settled is not None
    assert settled.attempt.status is AttemptStatus.SUCCEEDED


def test_an_ownership_tells_held_serving_and_leaving_shards() -> None:
    ownership = ShardOwnership(8)
    ownership.hold(ShardFence(1, 4))
    ownership.hold(ShardFence(3, 1))
    ownership.leave(3)
    ownership.leave(5)  # not held: nothing to leave
    assert ownership.serving == (1,)
    assert [f.shard for f in ownership.held] == [1, 3]
    run_in = next(r for r in _ids() if shard_of(r, 8) == 3)
    assert not ownership.accepts(run_in)
    assert ownership.fence_for(run_in) == ShardFence(3, 1)  # still fenced while it drains
    ownership.drop(3)
    assert ownership.fence_for(run_in) is None


def _ids() -> Iterator[str]:
    for n in range(1, 10_000):
        yield f"00000000-0000-7000-8000-{n:012d}"
