"""Statuses and transition rules (SPEC §4)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import pytest

from workload_domain.errors import ErrorCategory, IllegalTransition
from workload_domain.statuses import (
    ATTEMPT_TRANSITIONS,
    RUN_TRANSITIONS,
    TASK_TRANSITIONS,
    AttemptStatus,
    RunStatus,
    TaskStatus,
    check_transition,
)

R, T, A = RunStatus, TaskStatus, AttemptStatus

# Written from SPEC §4, independently of the tables under test.
SPEC_RUN_EDGES = {
    ("pending", "running"),
    ("pending", "canceled"),  # canceling a pending run cancels it at once
    ("running", "waiting_retry"),
    ("waiting_retry", "running"),
    ("running", "succeeded"),
    ("running", "failed"),
    ("running", "canceled"),
    ("waiting_retry", "canceled"),
    # SPEC §11: a run waits for a person when nothing runs and a task waits for an approval;
    # that takes precedence over waiting for a retry.
    ("running", "waiting_approval"),
    ("waiting_approval", "running"),
    ("waiting_approval", "canceled"),
    ("waiting_retry", "waiting_approval"),
    ("waiting_approval", "waiting_retry"),
}
SPEC_TASK_EDGES = {
    ("pending", "running"),
    ("pending", "skipped"),  # downstream of a failed or skipped task: never started
    ("pending", "canceled"),
    ("running", "waiting_retry"),
    ("waiting_retry", "running"),
    ("running", "succeeded"),
    ("running", "failed"),
    ("running", "canceled"),
    ("waiting_retry", "canceled"),
    # SPEC §11: an agent task pauses on a tool approval and resumes once it is decided.
    ("running", "waiting_approval"),
    ("waiting_approval", "running"),
    ("waiting_approval", "canceled"),
}
SPEC_ATTEMPT_EDGES = {
    # SPEC §10: a queued (remote) attempt is claimed, canceled, or fails schedule-to-start.
    ("queued", "running"),
    ("queued", "canceled"),
    ("queued", "failed"),
    ("running", "succeeded"),
    ("running", "failed"),
    ("running", "timed_out"),
    ("running", "canceled"),
    ("running", "interrupted"),
}


def test_run_status_strings() -> None:
    assert [s.value for s in RunStatus] == [
        "pending",
        "running",
        "waiting_retry",
        "waiting_approval",
        "succeeded",
        "failed",
        "canceled",
    ]


def test_task_status_strings() -> None:
    assert [s.value for s in TaskStatus] == [
        "pending",
        "running",
        "waiting_retry",
        "waiting_approval",
        "succeeded",
        "failed",
        "canceled",
        "skipped",
    ]


def test_attempt_status_strings() -> None:
    assert [s.value for s in AttemptStatus] == [
        "queued",
        "running",
        "succeeded",
        "failed",
        "timed_out",
        "canceled",
        "interrupted",
    ]


def test_statuses_are_strings() -> None:
    assert RunStatus("waiting_retry") is R.WAITING_RETRY
    assert TaskStatus("skipped") is T.SKIPPED
    assert AttemptStatus("timed_out") is A.TIMED_OUT
    assert str(R.WAITING_RETRY) == "waiting_retry"
    assert f"{A.TIMED_OUT}" == "timed_out"
    with pytest.raises(ValueError, match="skipped"):
        RunStatus("skipped")


def test_run_terminal_set() -> None:
    assert {s.value for s in RunStatus if s.is_terminal} == {"succeeded", "failed", "canceled"}


def test_task_terminal_set() -> None:
    assert {s.value for s in TaskStatus if s.is_terminal} == {
        "succeeded",
        "failed",
        "canceled",
        "skipped",
    }


def test_attempt_terminal_set() -> None:
    assert {s.value for s in AttemptStatus if s.is_terminal} == {
        "succeeded",
        "failed",
        "timed_out",
        "canceled",
        "interrupted",
    }
    assert {s.value for s in AttemptStatus if s.is_live} == {"queued", "running"}


def edges(table: Mapping[Any, frozenset[Any]]) -> set[tuple[str, str]]:
    return {(str(a), str(b)) for a, targets in table.items() for b in targets}


@pytest.mark.parametrize(
    ("table", "statuses", "spec"),
    [
        pytest.param(RUN_TRANSITIONS, RunStatus, SPEC_RUN_EDGES, id="run"),
        pytest.param(TASK_TRANSITIONS, TaskStatus, SPEC_TASK_EDGES, id="task"),
        pytest.param(ATTEMPT_TRANSITIONS, AttemptStatus, SPEC_ATTEMPT_EDGES, id="attempt"),
    ],
)
def test_tables_match_the_spec(
    table: Mapping[Any, frozenset[Any]], statuses: Any, spec: set[tuple[str, str]]
) -> None:
    assert set(table) == set(statuses)
    assert edges(table) == spec
    for status in statuses:
        # Terminal statuses have no way out; every other status has one.
        assert bool(table[status]) is (not status.is_terminal)


def test_tables_are_read_only() -> None:
    with pytest.raises(TypeError):
        RUN_TRANSITIONS[R.SUCCEEDED] = frozenset({R.RUNNING})  # type: ignore[index]


ALL_PAIRS = [
    *(
        pytest.param(a, b, (a, b) in SPEC_RUN_EDGES, id=f"run-{a}-{b}")
        for a, b in itertools.product(RunStatus, RunStatus)
    ),
    *(
        pytest.param(a, b, (a, b) in SPEC_TASK_EDGES, id=f"task-{a}-{b}")
        for a, b in itertools.product(TaskStatus, TaskStatus)
    ),
    *(
        pytest.param(a, b, (a, b) in SPEC_ATTEMPT_EDGES, id=f"attempt-{a}-{b}")
        for a, b in itertools.product(AttemptStatus, AttemptStatus)
    ),
]


@pytest.mark.parametrize(("current", "target", "allowed"), ALL_PAIRS)
def test_check_transition_for_every_pair(
    current: Any,
    target: Any,
    allowed: bool,
) -> None:
    if allowed:
        assert check_transition(current, target) is target
        return
    entity = {RunStatus: "run", TaskStatus: "task", AttemptStatus: "attempt"}[type(current)]
    with pytest.raises(IllegalTransition) as info:
        check_transition(current, target)
    error = info.value
    assert (error.entity, error.current, error.target) == (entity, current.value, target.value)
    assert error.category is ErrorCategory.INTERNAL
    assert error.code == "internal"
    assert str(error) == f"illegal {entity} transition {current.value!r} -> {target.value!r}"


def test_pair_count() -> None:
    assert len(ALL_PAIRS) == 7 * 7 + 8 * 8 + 7 * 7


def test_same_status_is_never_a_transition() -> None:
    for status in [*RunStatus, *TaskStatus, *AttemptStatus]:
        with pytest.raises(IllegalTransition):
            check_transition(status, status)
