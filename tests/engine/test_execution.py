"""Engine scenarios of SPEC §4, executed deterministically on the fake clock."""

from __future__ import annotations

from datetime import timedelta

import anyio
import pytest

from tests.engine.harness import CountingExecutor, Harness, mock, workflow
from workload_domain.records import ExecutorRequest, ExecutorResult
from workload_engine.clock import wait_until_idle
from workload_engine.mock_executor import MockExecutor

pytestmark = pytest.mark.anyio

DIAMOND = workflow(
    mock("a", sleep_ms=10),
    mock("b", ["a"], sleep_ms=30),
    mock("c", ["a"], sleep_ms=20),
    mock("d", ["b", "c"], output={"done": True}),
)


async def test_diamond_runs_in_dependency_order() -> None:
    h = Harness()
    view = await h.run(DIAMOND)

    assert view.status == "succeeded"
    assert view.task_statuses() == dict.fromkeys("abcd", "succeeded")
    started = {e.task_key: e.occurred_at for e in view.events if e.type == "attempt.started"}
    finished = {e.task_key: e.occurred_at for e in view.events if e.type == "task.succeeded"}
    t0 = h.clock.now() - timedelta(milliseconds=40)  # a: 10ms, then b: 30ms; d instant
    assert started["a"] == t0
    assert started["b"] == started["c"] == t0 + timedelta(milliseconds=10)
    assert finished["c"] == t0 + timedelta(milliseconds=30)
    assert started["d"] == finished["b"] == t0 + timedelta(milliseconds=40)
    assert view.tasks["d"].output == {"done": True}
    assert view.event_types()[:3] == ["run.created", "run.started", "attempt.started"]
    assert view.event_types()[-1] == "run.succeeded"
    assert view.snapshot.run.started_at == t0
    assert view.snapshot.run.finished_at == h.clock.now()


async def test_independent_tasks_run_in_parallel_within_the_global_limit() -> None:
    clock_harness = Harness()
    counting = CountingExecutor(MockExecutor(clock_harness.clock))
    h = Harness(clock=clock_harness.clock, executor=counting, max_concurrent_attempts=3)
    tasks = [mock(f"t{i}", sleep_ms=1000) for i in range(8)]
    start = h.clock.now()
    view = await h.run(workflow(*tasks))

    assert view.status == "succeeded"
    assert counting.peak == 3
    # 8 one-second tasks, 3 at a time: 3 waves.
    assert h.clock.now() - start == timedelta(seconds=3)
    # At no point do the persisted attempts show more than 3 running at once.
    running = 0
    for event in view.events:
        running += {"attempt.started": 1, "attempt.succeeded": -1}.get(event.type, 0)
        assert running <= 3


async def test_concurrency_limit_is_global_across_runs() -> None:
    base = Harness()
    counting = CountingExecutor(MockExecutor(base.clock))
    h = Harness(clock=base.clock, executor=counting, max_concurrent_attempts=2)
    runs = [
        await h.create(workflow(mock("x", sleep_ms=100), mock("y", sleep_ms=100))) for _ in range(3)
    ]
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.clock.autojump)
            async with anyio.create_task_group() as runs_group:
                for run_id in runs:
                    runs_group.start_soon(h.engine.execute, run_id)
            tg.cancel_scope.cancel()
    assert counting.peak == 2
    for run_id in runs:
        assert (await h.view(run_id)).status == "succeeded"


async def test_retry_waits_exact_backoff_times() -> None:
    h = Harness()
    retry = {
        "max_attempts": 5,
        "initial_backoff_seconds": 2,
        "backoff_multiplier": 3,
        "max_backoff_seconds": 10,
    }
    start = h.clock.now()
    view = await h.run(workflow(mock("flaky", fail_first=4, retry=retry)))

    assert view.status == "succeeded"
    attempts = view.attempts["flaky"]
    assert [a.status.value for a in attempts] == ["failed"] * 4 + ["succeeded"]
    # Backoff after attempt n: min(2 * 3^(n-1), 10) -> 2, 6, 10, 10.
    assert [a.started_at - start for a in attempts] == [
        timedelta(seconds=s) for s in (0, 2, 8, 18, 28)
    ]
    waits = [e for e in view.events if e.type == "task.waiting_retry"]
    assert [e.data["next_attempt_at"] for e in waits] == [
        (start + timedelta(seconds=s)).isoformat() for s in (2, 8, 18, 28)
    ]
    assert all(a.error is not None and a.error.code == "mock_failure" for a in attempts[:4])
    assert view.tasks["flaky"].attempt_count == 5
    assert view.tasks["flaky"].error is None


async def test_run_is_waiting_retry_while_nothing_can_start() -> None:
    h = Harness()
    run_id = await h.create(
        workflow(mock("t", fail_first=1, retry={"max_attempts": 2, "initial_backoff_seconds": 60}))
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.engine.execute, run_id)
        await wait_until_idle()
        view = await h.view(run_id)
        assert view.status == "waiting_retry"
        assert view.tasks["t"].status.value == "waiting_retry"
        assert view.tasks["t"].next_attempt_at == h.clock.now() + timedelta(seconds=60)
        h.clock.advance(59.999)
        await wait_until_idle()
        assert (await h.view(run_id)).status == "waiting_retry"
        h.clock.advance(0.001)
        await wait_until_idle()
    view = await h.view(run_id)
    assert view.status == "succeeded"
    assert view.attempt_statuses("t") == ["failed", "succeeded"]


async def test_exhausted_retries_fail_the_task_skip_downstream_and_keep_independent_branch() -> (
    None
):
    h = Harness()
    view = await h.run(
        workflow(
            mock("root"),
            mock(
                "bad",
                ["root"],
                fail_always=True,
                retry={"max_attempts": 3, "initial_backoff_seconds": 0},
            ),
            mock("after_bad", ["bad"]),
            mock("after_after", ["after_bad"]),
            mock("good", ["root"], sleep_ms=5000),
            mock("after_good", ["good"]),
            mock("join", ["after_bad", "after_good"]),
        )
    )
    assert view.status == "failed"
    assert view.task_statuses() == {
        "root": "succeeded",
        "bad": "failed",
        "after_bad": "skipped",
        "after_after": "skipped",
        "good": "succeeded",
        "after_good": "succeeded",
        "join": "skipped",
    }
    assert view.attempt_statuses("bad") == ["failed", "failed", "failed"]
    assert view.tasks["bad"].error is not None
    assert view.tasks["bad"].error.code == "mock_failure"
    assert view.attempts["after_bad"] == []
    assert view.events[-1].data == {"failed_tasks": ["bad"]}


async def test_non_retryable_failure_fails_at_once() -> None:
    h = Harness()
    view = await h.run(workflow(mock("x", retry={"max_attempts": 5}, bogus=1)))
    assert view.status == "failed"
    assert view.attempt_statuses("x") == ["failed"]
    assert view.tasks["x"].error is not None
    assert view.tasks["x"].error.code == "invalid_input"
    assert view.tasks["x"].error.retryable is False


async def test_timeout_marks_the_attempt_timed_out_and_retries() -> None:
    h = Harness()
    start = h.clock.now()
    view = await h.run(
        workflow(
            mock(
                "slow",
                sleep_ms=10_000,
                timeout_seconds=1.5,
                retry={"max_attempts": 2, "initial_backoff_seconds": 1},
            )
        )
    )
    assert view.status == "failed"
    attempts = view.attempts["slow"]
    assert [a.status.value for a in attempts] == ["timed_out", "timed_out"]
    assert attempts[0].finished_at == start + timedelta(seconds=1.5)
    assert attempts[1].started_at == start + timedelta(seconds=2.5)
    assert all(a.error is not None and a.error.code == "attempt_timed_out" for a in attempts)
    assert all(a.error is not None and a.error.retryable for a in attempts)
    assert "attempt.timed_out" in view.event_types()


async def test_executor_exception_is_a_task_failure_not_a_system_fault() -> None:
    class Exploding:
        actions = frozenset({"mock"})

        async def execute(self, request: ExecutorRequest) -> ExecutorResult:
            raise RuntimeError("boom")

    h = Harness(executor=Exploding())
    view = await h.run(workflow(mock("x", retry={"max_attempts": 2, "initial_backoff_seconds": 0})))
    assert view.status == "failed"
    assert view.attempt_statuses("x") == ["failed", "failed"]
    error = view.tasks["x"].error
    assert error is not None
    assert (error.code, error.retryable) == ("executor_error", True)
    assert "boom" in error.message


async def test_run_input_and_task_input_reach_the_executor() -> None:
    seen: list[ExecutorRequest] = []

    class Recording:
        actions = frozenset({"mock"})

        async def execute(self, request: ExecutorRequest) -> ExecutorResult:
            seen.append(request)
            return await MockExecutor(h.clock).execute(request)

    h = Harness()
    h = Harness(clock=h.clock, executor=Recording())
    run_id = await h.create(workflow(mock("x", output={"k": 1})), {"doc": "a.pdf"})
    view = await h.execute(run_id)
    assert view.tasks["x"].output == {"k": 1}
    assert [(r.run_id, r.task_key, r.attempt, r.action) for r in seen] == [(run_id, "x", 1, "mock")]
    assert seen[0].input == {"output": {"k": 1}}
    assert seen[0].run_input == {"doc": "a.pdf"}
