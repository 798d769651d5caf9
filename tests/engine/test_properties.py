"""Property-based tests: random DAGs with random mock behaviour keep the invariants of SPEC §4."""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.engine.harness import (
    CountingExecutor,
    CrashAfter,
    CrashingStore,
    Harness,
    RecordingStore,
    RunView,
)
from workload_domain.statuses import TaskStatus
from workload_engine.clock import FakeClock
from workload_engine.mock_executor import MockExecutor


@st.composite
def dags(draw: st.DrawFn) -> tuple[dict[str, Any], int]:
    size = draw(st.integers(min_value=1, max_value=30))
    tasks = []
    for i in range(size):
        deps = draw(st.sets(st.integers(0, i - 1), max_size=min(i, 3))) if i else set()
        behaviour: dict[str, Any] = {}
        if draw(st.booleans()):
            behaviour["sleep_ms"] = draw(st.sampled_from([0, 5, 250, 1500, 4000]))
        kind = draw(st.sampled_from(["ok", "ok", "fail_first", "fail_always", "invalid"]))
        if kind == "fail_first":
            behaviour["fail_first"] = draw(st.integers(1, 4))
        elif kind == "fail_always":
            behaviour["fail_always"] = True
        elif kind == "invalid":  # a failure that is not retryable
            behaviour["unknown_field"] = True
        task: dict[str, Any] = {
            "key": f"t{i}",
            "action": "mock",
            "input": behaviour,
            "depends_on": [f"t{d}" for d in sorted(deps)],
            "timeout_seconds": draw(st.sampled_from([1, 2, 300])),
            "retry": {
                "max_attempts": draw(st.integers(1, 4)),
                "initial_backoff_seconds": draw(st.sampled_from([0, 0.5, 3])),
                "backoff_multiplier": draw(st.sampled_from([1, 2])),
                "max_backoff_seconds": 5,
            },
        }
        tasks.append(task)
    limit = draw(st.integers(min_value=1, max_value=8))
    return {"id": "random", "tasks": tasks}, limit


def check_invariants(definition: dict[str, Any], view: RunView) -> None:
    specs = {t["key"]: t for t in definition["tasks"]}
    # Every run terminates, with nothing left running.
    assert view.snapshot.run.status.is_terminal
    assert all(t.status.is_terminal for t in view.tasks.values())
    assert all(a.status.is_terminal for xs in view.attempts.values() for a in xs)
    # Revision: 1 at creation, +1 per commit; events contiguous from 1.
    assert [e.sequence for e in view.events] == list(range(1, len(view.events) + 1))
    assert view.snapshot.last_sequence == len(view.events)
    # No task starts before all its dependencies succeeded.
    succeeded_at: dict[str, Any] = {}
    for event in view.events:
        if event.type == "task.succeeded":
            succeeded_at[event.task_key or ""] = event.sequence
        if event.type == "attempt.started":
            for dep in specs[event.task_key or ""]["depends_on"]:
                assert dep in succeeded_at
                assert succeeded_at[dep] < event.sequence
    # Attempts never exceed max_attempts and are numbered 1..n.
    for key, attempts in view.attempts.items():
        assert len(attempts) <= specs[key]["retry"]["max_attempts"]
        assert [a.attempt for a in attempts] == list(range(1, len(attempts) + 1))
        assert view.tasks[key].attempt_count == len(attempts)
    # Final statuses follow the rules.
    for key, task in view.tasks.items():
        attempts = view.attempts[key]
        deps = specs[key]["depends_on"]
        if task.status is TaskStatus.SUCCEEDED:
            assert attempts
            assert attempts[-1].status.value == "succeeded"
            assert all(view.tasks[d].status is TaskStatus.SUCCEEDED for d in deps)
        elif task.status is TaskStatus.FAILED:
            last = attempts[-1]
            assert last.status.value in {"failed", "timed_out", "interrupted"}
            assert last.error is not None
            exhausted = len(attempts) == specs[key]["retry"]["max_attempts"]
            assert exhausted or not last.error.retryable
        elif task.status is TaskStatus.SKIPPED:
            assert attempts == []
            assert any(
                view.tasks[d].status in {TaskStatus.FAILED, TaskStatus.SKIPPED} for d in deps
            )
        else:
            raise AssertionError(f"unexpected final task status {task.status}")
        if "unknown_field" in specs[key]["input"]:
            assert task.status is not TaskStatus.SUCCEEDED
    statuses = {t.status for t in view.tasks.values()}
    expected = "succeeded" if statuses == {TaskStatus.SUCCEEDED} else "failed"
    assert view.status == expected
    assert "canceled" not in view.all_statuses()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags())
def test_random_dags_keep_the_invariants(case: tuple[dict[str, Any], int]) -> None:
    definition, limit = case

    store = RecordingStore()

    async def scenario() -> tuple[RunView, int]:
        clock = FakeClock()
        counting = CountingExecutor(MockExecutor(clock))
        h = Harness(store=store, clock=clock, executor=counting, max_concurrent_attempts=limit)
        view = await h.run(definition)
        return view, counting.peak

    view, peak = anyio.run(scenario)
    check_invariants(definition, view)
    assert peak <= limit
    # Revision 1 at creation, then exactly +1 per commit, with no gap and no repeat.
    final = view.snapshot.run.revision
    assert store.revision_steps == [(r, r + 1) for r in range(1, final)]
    # Every commit appends at least one event (SPEC §4).
    assert all(n >= 1 for n in store.event_counts), store.event_counts
    assert final - 1 < len(view.events)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags(), st.integers(min_value=1, max_value=40))
def test_random_dags_converge_after_a_crash_at_any_commit(
    case: tuple[dict[str, Any], int], crash_after: int
) -> None:
    definition, limit = case

    async def scenario() -> RunView:
        store = CrashingStore()
        h = Harness(store=store, max_concurrent_attempts=limit)
        run_id = await h.create(definition)
        store.crash_after = store.commits + crash_after
        with contextlib.suppress(CrashAfter):  # a crash point past the run's end: no crash
            await h.execute(run_id)
        return await h.restarted().execute(run_id)

    view = anyio.run(scenario)
    check_invariants(definition, view)
    for attempts in view.attempts.values():
        for attempt in attempts:
            if attempt.status.value == "interrupted":
                assert attempt.error is not None
                assert attempt.error.code == "interrupted"
