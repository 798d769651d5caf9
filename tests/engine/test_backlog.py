"""A backlog of runs (ADR 0017): queued and parked runs hold no runner, and all of them finish.

With one attempt slot and many runs, every run but the executing one waits for a slot. Such a
run is *parked* (its id in the engine's FIFO, no task, no snapshot) and resumed with the next
free slot; at start-up the recovered runs are *queued* (their ids) and start a few at a time.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import anyio
import pytest

from tests.engine.harness import Harness, mock, workflow
from workload_domain.ports import Executor
from workload_domain.records import ExecutorRequest, ExecutorResult, RunSnapshot
from workload_domain.statuses import RunStatus
from workload_engine.clock import FakeClock, wait_until_idle
from workload_engine.engine import DEFAULT_STARTUP_CONCURRENCY
from workload_engine.mock_executor import MockExecutor
from workload_engine.runner import RunRunner
from workload_engine.runs import request_cancel

pytestmark = pytest.mark.anyio

SLOW = workflow(mock("a", sleep_ms=1000))


class RunOrder:
    """Wraps an executor; records the run of every attempt in the order they started."""

    actions = frozenset({"mock"})

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.started: list[str] = []
        self.current = 0
        self.peak = 0

    async def execute(self, request: ExecutorRequest) -> ExecutorResult:
        self.started.append(request.run_id)
        self.current += 1
        self.peak = max(self.peak, self.current)
        try:
            return await self.inner.execute(request)
        finally:
            self.current -= 1


def harness(slots: int, restart: Harness | None = None) -> tuple[Harness, RunOrder]:
    """A new engine with ``slots`` attempt slots (over ``restart``'s store and clock, if given)."""
    clock = FakeClock() if restart is None else restart.clock
    order = RunOrder(MockExecutor(clock))
    store = None if restart is None else restart.store
    return Harness(store=store, clock=clock, executor=order, max_concurrent_attempts=slots), order


async def test_runs_waiting_for_a_slot_hold_no_runner_and_run_in_order() -> None:
    h, order = harness(slots=1)
    runs = [await h.create(SLOW) for _ in range(200)]
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        tasks_before = len(asyncio.all_tasks())
        for run_id in runs:
            h.engine.submit(run_id)
        await wait_until_idle()
        # One run executes; the 199 others wait for the slot as ids, not as runners.
        assert h.engine.backlog.running == 1
        assert h.engine.backlog.parked == 199
        assert h.engine.backlog.queued == 0
        assert h.engine.active_runs == 200
        assert all(h.engine.owns(run_id) for run_id in runs)
        # The executing run's runner, attempt, execution and deadline; the slot dispatcher.
        assert len(asyncio.all_tasks()) - tasks_before <= 5
        # A run already owned is not submitted twice.
        h.engine.submit(runs[-1])
        assert h.engine.backlog.parked == 199
        tg.start_soon(h.clock.autojump)
        with anyio.fail_after(30):
            for run_id in runs:
                await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    # Each run executed exactly once, one at a time, in the order it was submitted (FIFO).
    assert order.started == runs
    assert order.peak == 1
    for run_id in runs:
        view = await h.view(run_id)
        assert view.status == "succeeded"
        # Parking is not a recovery: the events are those of a run that never waited.
        assert view.event_types() == [
            "run.created",
            "run.started",
            "attempt.started",
            "attempt.succeeded",
            "task.succeeded",
            "run.succeeded",
        ]


async def test_a_parked_run_can_be_canceled_while_it_waits() -> None:
    h, order = harness(slots=1)
    first, waiting, canceled = [await h.create(SLOW) for _ in range(3)]
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        for run_id in (first, waiting, canceled):
            h.engine.submit(run_id)
        await wait_until_idle()
        assert h.engine.backlog.parked == 2
        result = await request_cancel(h.store, h.clock, canceled)
        assert result.run.status is RunStatus.CANCELED  # no attempt of its own was running
        h.engine.notify(canceled)
        with anyio.fail_after(5):
            await h.engine.wait_finished(canceled)  # without waiting for the slot
        assert not h.engine.owns(canceled)
        assert h.engine.backlog.parked == 1
        assert (await h.view(first)).status == "running"
        tg.start_soon(h.clock.autojump)
        with anyio.fail_after(10):
            await h.engine.wait_finished(waiting)
        tg.cancel_scope.cancel()
    assert order.started == [first, waiting]
    assert (await h.view(first)).status == "succeeded"
    assert (await h.view(waiting)).status == "succeeded"
    view = await h.view(canceled)
    assert view.status == "canceled"
    assert view.attempts["a"] == []


async def test_a_cancel_heard_while_a_runner_parks_is_not_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The window between a runner choosing to park and its engine parking the run."""
    h, order = harness(slots=1)
    first, canceled = [await h.create(SLOW) for _ in range(2)]
    original = RunRunner.run
    told: list[str] = []

    async def run_then_told(runner: RunRunner) -> RunSnapshot:
        final = await original(runner)
        if runner.run_id == canceled and runner.parked is not None and not told:
            # Still the engine's runner for the run: what a cancel request does now.
            told.append(canceled)
            assert (await request_cancel(h.store, h.clock, canceled)).run.status is (
                RunStatus.CANCELED
            )
            h.engine.notify(canceled)
        return final

    monkeypatch.setattr(RunRunner, "run", run_then_told)
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        h.engine.submit(first)
        await wait_until_idle()
        h.engine.submit(canceled)
        with anyio.fail_after(5):
            await h.engine.wait_finished(canceled)  # the slot is still taken by the first run
        assert told == [canceled]
        assert not h.engine.owns(canceled)
        assert h.engine.backlog.parked == 0
        tg.start_soon(h.clock.autojump)
        with anyio.fail_after(10):
            await h.engine.wait_finished(first)
        tg.cancel_scope.cancel()
    assert order.started == [first]
    assert (await h.view(canceled)).status == "canceled"


async def test_a_parked_run_with_a_retry_timer_and_a_slot_waiter_converge() -> None:
    """Runs that wait for a retry time keep their runner; they share the slot with parked runs."""
    h, order = harness(slots=1)
    flaky = await h.create(
        workflow(
            mock("a", fail_first=1, retry={"max_attempts": 2, "initial_backoff_seconds": 5}),
            workflow_id="flaky",
        )
    )
    slow = [await h.create(SLOW) for _ in range(3)]
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        for run_id in (flaky, *slow):
            h.engine.submit(run_id)
        tg.start_soon(h.clock.autojump)
        with anyio.fail_after(30):
            for run_id in (flaky, *slow):
                await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    assert order.peak == 1
    assert Counter(order.started) == Counter({flaky: 2, **dict.fromkeys(slow, 1)})
    view = await h.view(flaky)
    assert view.status == "succeeded"
    assert view.attempt_statuses("a") == ["failed", "succeeded"]
    for run_id in slow:
        assert (await h.view(run_id)).status == "succeeded"


async def test_a_stop_interrupts_parked_runs_and_a_restart_finishes_them() -> None:
    h, order = harness(slots=1)
    retried = workflow(mock("a", sleep_ms=1000, retry={"max_attempts": 2}))
    runs = [await h.create(retried) for _ in range(5)]
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        for run_id in runs:
            h.engine.submit(run_id)
        await wait_until_idle()
        assert h.engine.backlog.parked == 4
        tg.cancel_scope.cancel()  # a stop: nothing is written for the parked runs
    assert h.engine.active_runs == 0
    assert order.started == runs[:1]
    with anyio.fail_after(1):
        await h.engine.wait_finished(runs[-1])  # nothing left to wait for
    for run_id in runs:
        view = await h.view(run_id)
        assert view.status == "running"
        assert "canceled" not in view.all_statuses()

    restarted, after = harness(slots=1, restart=h)
    async with anyio.create_task_group() as tg:
        await tg.start(restarted.engine.run)
        assert await restarted.engine.recover() == 5
        tg.start_soon(h.clock.autojump)
        with anyio.fail_after(10):
            for run_id in runs:
                await restarted.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    assert sorted(after.started) == sorted(runs)
    interrupted = runs[0]  # its attempt was running at the stop: interrupted, then retried
    assert (await h.view(interrupted)).attempt_statuses("a") == ["interrupted", "succeeded"]
    for run_id in runs:
        assert (await h.view(run_id)).status == "succeeded"


async def test_recovery_of_a_large_backlog_queues_ids_and_finishes_every_run_once() -> None:
    h, _ = harness(slots=4)
    runs = [await h.create(workflow(mock("a", sleep_ms=100))) for _ in range(500)]
    restarted, order = harness(slots=4, restart=h)
    async with anyio.create_task_group() as tg:
        await tg.start(restarted.engine.run)
        tasks_before = len(asyncio.all_tasks())
        assert await restarted.engine.recover(page_size=64) == 500
        # Recovered: every run is owned, almost all of them as queued ids, not runners.
        backlog = restarted.engine.backlog
        assert sum(backlog) == 500
        assert backlog.running <= 8 + 4  # the runs starting, and those given a slot
        assert all(restarted.engine.owns(run_id) for run_id in runs)
        # At most 4 tasks a runner (it, an attempt, the attempt's execution and deadline).
        assert len(asyncio.all_tasks()) - tasks_before <= 4 * backlog.running + 1
        tg.start_soon(h.clock.autojump)
        with anyio.fail_after(60):
            for run_id in runs:
                await restarted.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    assert sorted(order.started) == sorted(runs)  # each exactly once
    assert order.peak <= 4
    for run_id in runs:
        view = await h.view(run_id)
        assert view.status == "succeeded"
        assert view.attempt_statuses("a") == ["succeeded"]
    assert await h.store.list_unfinished_runs(None, 10) == []


async def test_recovery_waits_for_leftover_runs_a_replica_had_already_queued() -> None:
    """A leftover run (its attempt left running by a stop) that an announcement queued before
    recovery listed it is started by recovery, which waits for its first commit: once recovery
    returned, no attempt the stop left reads as running."""
    h, _ = harness(slots=40)
    runs = [await h.create(workflow(mock("a", sleep_ms=1000))) for _ in range(40)]
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        for run_id in runs:
            h.engine.submit(run_id)
        await wait_until_idle()
        tg.cancel_scope.cancel()  # a stop: every attempt is left running
    for run_id in runs:
        assert (await h.view(run_id)).attempt_statuses("a") == ["running"]

    restarted, order = harness(slots=40, restart=h)
    async with anyio.create_task_group() as tg:
        await tg.start(restarted.engine.run)
        # Announced by a replica and heard before recovery lists them, newest first: the 8
        # admitted at once are the runs recovery lists last, and the others wait as queued ids.
        for run_id in reversed(runs):
            restarted.engine.submit(run_id)
        assert restarted.engine.backlog.queued == 32
        # Each leftover's first commit failed its run (one attempt, interrupted): by the time
        # recovery lists the unfinished runs, there are none.
        assert await restarted.engine.recover() == 0
        for run_id in runs:
            assert (await h.view(run_id)).attempt_statuses("a") == ["interrupted"], run_id
        tg.start_soon(h.clock.autojump)
        with anyio.fail_after(30):
            for run_id in runs:
                await restarted.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    assert order.started == []  # one attempt each (SPEC §4): the interrupted one counts
    for run_id in runs:
        view = await h.view(run_id)
        assert view.status == "failed"
        assert view.attempt_statuses("a") == ["interrupted"]


async def test_runs_created_here_start_with_their_snapshots_many_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each create hands its run's snapshot over: 64 such runners start together, and the queue
    # behind them keeps the next 64 snapshots, so none of these runs reads itself back.
    h, order = harness(slots=256)
    runs = [await h.create(workflow(mock("a", sleep_ms=10))) for _ in range(128)]
    snapshots = {run_id: await h.store.load_run(run_id) for run_id in runs}
    reads: list[str] = []
    load_run = h.store.load_run

    async def counted(run_id: str) -> RunSnapshot:
        reads.append(run_id)
        return await load_run(run_id)

    monkeypatch.setattr(h.store, "load_run", counted)
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        for run_id in runs:
            h.engine.submit(run_id, snapshots[run_id])
        assert h.engine.backlog.queued == 64
        tg.start_soon(h.clock.autojump)
        with anyio.fail_after(30):
            for run_id in runs:
                await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    assert reads == []
    assert sorted(order.started) == sorted(runs)
    for run_id in runs:
        assert (await h.view(run_id)).status == "succeeded"


async def test_a_runner_given_its_snapshot_takes_no_start_up_turn() -> None:
    # The start-up turns bound the runners that read their run (a recovery's); one that was
    # handed its snapshot reads nothing and starts while every turn is taken.
    h, _ = harness(slots=8)
    runs = [await h.create(workflow(mock("a", sleep_ms=10))) for _ in range(3)]
    reader = await h.create(workflow(mock("a", sleep_ms=10)))
    h.engine.startup = anyio.CapacityLimiter(1)
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        await h.engine.startup.acquire()  # every turn taken
        tg.start_soon(h.clock.autojump)
        for run_id in runs:
            h.engine.submit(run_id, await h.store.load_run(run_id))
        h.engine.submit(reader)
        with anyio.fail_after(30):  # a hang guard, not a speed check
            for run_id in runs:
                await h.engine.wait_finished(run_id)
        assert (await h.view(reader)).status == "pending"  # waits for its turn
        h.engine.startup.release()
        with anyio.fail_after(30):
            await h.engine.wait_finished(reader)
        tg.cancel_scope.cancel()
    for run_id in [*runs, reader]:
        assert (await h.view(run_id)).status == "succeeded"


async def test_a_run_created_during_a_backlog_waits_behind_it() -> None:
    h, _ = harness(slots=4)
    backlog = [await h.create(workflow(mock("a", sleep_ms=100))) for _ in range(100)]
    restarted, order = harness(slots=4, restart=h)
    async with anyio.create_task_group() as tg:
        await tg.start(restarted.engine.run)
        assert await restarted.engine.recover(page_size=64) == 100
        queued = restarted.engine.backlog.queued
        assert queued > 0
        late = await h.create(workflow(mock("a", sleep_ms=100)))
        restarted.engine.submit(late, await h.store.load_run(late))
        # Queued behind the recovered runs, not started ahead of them (ADR 0017's order).
        assert restarted.engine.backlog.queued == queued + 1
        tg.start_soon(h.clock.autojump)
        with anyio.fail_after(60):
            for run_id in [*backlog, late]:
                await restarted.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    assert sorted(order.started) == sorted([*backlog, late])
    # Four slots, and the runners still starting when it was admitted: it starts after the rest.
    assert order.started.index(late) >= len(backlog) - 4 - DEFAULT_STARTUP_CONCURRENCY
