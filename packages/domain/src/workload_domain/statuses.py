"""Statuses of runs, task runs and attempts, and the transitions the rules allow, as data.

Every writer goes through :func:`check_transition`; a transition missing from these tables is a
bug in the writer (:class:`~workload_domain.errors.IllegalTransition`), never a state to store.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import TypeVar

from workload_domain.errors import IllegalTransition

__all__ = [
    "ATTEMPT_TRANSITIONS",
    "RUN_TRANSITIONS",
    "TASK_TRANSITIONS",
    "AttemptStatus",
    "RunStatus",
    "TaskStatus",
    "check_transition",
]


class RunStatus(enum.StrEnum):
    """Status of a workflow run."""

    PENDING = "pending"
    RUNNING = "running"
    WAITING_RETRY = "waiting_retry"
    WAITING_APPROVAL = "waiting_approval"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"

    @property
    def is_terminal(self) -> bool:
        """Whether the run can never change again."""
        return self in _TERMINAL_RUN


class TaskStatus(enum.StrEnum):
    """Status of one task inside a run."""

    PENDING = "pending"
    RUNNING = "running"
    WAITING_RETRY = "waiting_retry"
    WAITING_APPROVAL = "waiting_approval"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"
    SKIPPED = "skipped"

    @property
    def is_terminal(self) -> bool:
        """Whether the task can never change again."""
        return self in _TERMINAL_TASK


class AttemptStatus(enum.StrEnum):
    """Status of one attempt at executing a task (``queued`` only for remote actions, §10)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELED = "canceled"
    INTERRUPTED = "interrupted"

    @property
    def is_terminal(self) -> bool:
        """Whether the attempt has ended."""
        return self not in _LIVE_ATTEMPT

    @property
    def is_live(self) -> bool:
        """Whether the attempt has not ended yet (queued or running)."""
        return self in _LIVE_ATTEMPT


_LIVE_ATTEMPT = frozenset({AttemptStatus.QUEUED, AttemptStatus.RUNNING})
_TERMINAL_RUN = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELED})
_TERMINAL_TASK = frozenset(
    {TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.CANCELED, TaskStatus.SKIPPED}
)

R, T, A = RunStatus, TaskStatus, AttemptStatus

RUN_TRANSITIONS: Mapping[RunStatus, frozenset[RunStatus]] = MappingProxyType(
    {
        R.PENDING: frozenset({R.RUNNING, R.CANCELED}),
        R.RUNNING: frozenset(
            {R.WAITING_RETRY, R.WAITING_APPROVAL, R.SUCCEEDED, R.FAILED, R.CANCELED}
        ),
        R.WAITING_RETRY: frozenset({R.RUNNING, R.WAITING_APPROVAL, R.CANCELED}),
        # Nothing runs, and a task waits for a person (§11): it takes precedence over a retry.
        R.WAITING_APPROVAL: frozenset({R.RUNNING, R.WAITING_RETRY, R.CANCELED}),
        R.SUCCEEDED: frozenset(),
        R.FAILED: frozenset(),
        R.CANCELED: frozenset(),
    }
)
"""Allowed run transitions. A waiting run always starts (or resumes) an attempt before it can
end, unless it is canceled."""

TASK_TRANSITIONS: Mapping[TaskStatus, frozenset[TaskStatus]] = MappingProxyType(
    {
        T.PENDING: frozenset({T.RUNNING, T.SKIPPED, T.CANCELED}),
        T.RUNNING: frozenset(
            {T.WAITING_RETRY, T.WAITING_APPROVAL, T.SUCCEEDED, T.FAILED, T.CANCELED}
        ),
        T.WAITING_RETRY: frozenset({T.RUNNING, T.CANCELED}),
        # An agent's attempt paused on a tool approval (§11) resumes once it is decided.
        T.WAITING_APPROVAL: frozenset({T.RUNNING, T.CANCELED}),
        T.SUCCEEDED: frozenset(),
        T.FAILED: frozenset(),
        T.CANCELED: frozenset(),
        T.SKIPPED: frozenset(),
    }
)
"""Allowed task transitions. ``skipped`` only comes from ``pending``: a task downstream of a
failed one never started."""

ATTEMPT_TRANSITIONS: Mapping[AttemptStatus, frozenset[AttemptStatus]] = MappingProxyType(
    {
        # A queued (remote) attempt is claimed, canceled, or fails its schedule-to-start timeout.
        A.QUEUED: frozenset({A.RUNNING, A.CANCELED, A.FAILED}),
        A.RUNNING: frozenset({A.SUCCEEDED, A.FAILED, A.TIMED_OUT, A.CANCELED, A.INTERRUPTED}),
        A.SUCCEEDED: frozenset(),
        A.FAILED: frozenset(),
        A.TIMED_OUT: frozenset(),
        A.CANCELED: frozenset(),
        A.INTERRUPTED: frozenset(),
    }
)
"""Allowed attempt transitions: an attempt (queued, then) runs, and ends once."""

_S = TypeVar("_S", RunStatus, TaskStatus, AttemptStatus)


def check_transition(current: _S, target: _S) -> _S:
    """Return ``target`` if the rules allow ``current -> target``.

    Raises:
        IllegalTransition: the tables do not list the transition.
    """
    allowed: frozenset[RunStatus] | frozenset[TaskStatus] | frozenset[AttemptStatus]
    if isinstance(current, RunStatus):
        entity, allowed = "run", RUN_TRANSITIONS[current]
    elif isinstance(current, TaskStatus):
        entity, allowed = "task", TASK_TRANSITIONS[current]
    else:
        entity, allowed = "attempt", ATTEMPT_TRANSITIONS[current]
    if target not in allowed:
        raise IllegalTransition(entity, current.value, target.value)
    return target
