"""The statuses of runs, tasks and attempts (SPEC §4), as string enums."""

from __future__ import annotations

import enum

__all__ = [
    "AttemptStatus",
    "RunStatus",
    "TaskStatus",
]


class RunStatus(enum.StrEnum):
    """Status of a run: ``pending`` → ``running`` ⇄ (``waiting_…``) → a terminal status."""

    PENDING = "pending"
    RUNNING = "running"
    WAITING_RETRY = "waiting_retry"
    WAITING_APPROVAL = "waiting_approval"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"

    @property
    def is_terminal(self) -> bool:
        """Whether a run in this status can never change again."""
        return self in {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELED}


class TaskStatus(enum.StrEnum):
    """Status of one task of a run (``pending`` waits on its dependencies)."""

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
        """Whether a task in this status can never change again."""
        return self in {
            TaskStatus.SUCCEEDED,
            TaskStatus.FAILED,
            TaskStatus.CANCELED,
            TaskStatus.SKIPPED,
        }


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
        """Whether the attempt has finished."""
        return self not in {AttemptStatus.QUEUED, AttemptStatus.RUNNING}
