"""Event types appended to a run's history (SPEC §4); one commit appends one or more."""

from __future__ import annotations

import enum

__all__ = ["EventType"]


class EventType(enum.StrEnum):
    """The ``type`` of a state event."""

    RUN_CREATED = "run.created"
    RUN_STARTED = "run.started"
    RUN_CANCEL_REQUESTED = "run.cancel_requested"
    RUN_SUCCEEDED = "run.succeeded"
    RUN_FAILED = "run.failed"
    RUN_CANCELED = "run.canceled"
    RUN_RECOVERED = "run.recovered"
    ATTEMPT_QUEUED = "attempt.queued"
    ATTEMPT_STARTED = "attempt.started"
    ATTEMPT_SUCCEEDED = "attempt.succeeded"
    ATTEMPT_FAILED = "attempt.failed"
    ATTEMPT_TIMED_OUT = "attempt.timed_out"
    ATTEMPT_CANCELED = "attempt.canceled"
    ATTEMPT_INTERRUPTED = "attempt.interrupted"
    TASK_WAITING_RETRY = "task.waiting_retry"
    TASK_SUCCEEDED = "task.succeeded"
    TASK_FAILED = "task.failed"
    TASK_SKIPPED = "task.skipped"
    TASK_CANCELED = "task.canceled"
    TASK_WAITING_APPROVAL = "task.waiting_approval"
    APPROVAL_REQUESTED = "approval.requested"
    APPROVAL_APPROVED = "approval.approved"
    APPROVAL_REJECTED = "approval.rejected"
    APPROVAL_EXPIRED = "approval.expired"
    APPROVAL_CANCELED = "approval.canceled"
