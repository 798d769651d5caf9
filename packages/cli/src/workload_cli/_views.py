"""The columns each listing shows, in every format but JSON (which shows whole resources)."""

from __future__ import annotations

from workload_cli._output import Column, status_style
from workload_sdk import (
    Attempt,
    ErrorObject,
    Event,
    QueueStats,
    Run,
    TaskRun,
    VersionSummary,
    WorkerInfo,
    Workflow,
)

__all__ = [
    "ATTEMPT_COLUMNS",
    "EVENT_COLUMNS",
    "QUEUE_COLUMNS",
    "RUN_COLUMNS",
    "TASK_COLUMNS",
    "VERSION_COLUMNS",
    "WORKER_COLUMNS",
    "WORKFLOW_COLUMNS",
    "error_text",
    "task_counts_text",
]


def error_text(error: ErrorObject | None) -> str | None:
    """``code: message`` of a task or attempt error."""
    return None if error is None else f"{error.code}: {error.message}"


def task_counts_text(run: Run) -> str:
    """The non-zero task counts of a run, e.g. ``succeeded=3 running=1``."""
    return " ".join(f"{status.value}={n}" for status, n in run.task_counts.items() if n)


WORKFLOW_COLUMNS: list[Column[Workflow]] = [
    Column("WORKFLOW", lambda w: w.workflow_id),
    Column("LATEST", lambda w: w.latest_version),
    Column("DESCRIPTION", lambda w: w.description),
    Column("CREATED", lambda w: w.created_at),
    Column("UPDATED", lambda w: w.updated_at),
]

VERSION_COLUMNS: list[Column[VersionSummary]] = [
    Column("VERSION", lambda v: v.version),
    Column("TASKS", lambda v: v.task_count),
    Column("HASH", lambda v: v.definition_hash),
    Column("CREATED", lambda v: v.created_at),
]

RUN_COLUMNS: list[Column[Run]] = [
    Column("RUN", lambda r: r.run_id, no_wrap=True),
    Column("WORKFLOW", lambda r: r.workflow_id),
    Column("VERSION", lambda r: r.version),
    Column("STATUS", lambda r: r.status, lambda r: status_style(r.status)),
    Column("TASKS", task_counts_text),
    Column("CREATED", lambda r: r.created_at),
    Column("FINISHED", lambda r: r.finished_at),
]

TASK_COLUMNS: list[Column[TaskRun]] = [
    Column("TASK", lambda t: t.task_key),
    Column("STATUS", lambda t: t.status, lambda t: status_style(t.status)),
    Column("ATTEMPTS", lambda t: f"{t.attempt_count}/{t.max_attempts}"),
    Column("DEPENDS_ON", lambda t: ",".join(t.depends_on)),
    Column("NEXT_ATTEMPT", lambda t: t.next_attempt_at),
    Column("FINISHED", lambda t: t.finished_at),
    Column("ERROR", lambda t: error_text(t.error)),
]

ATTEMPT_COLUMNS: list[Column[Attempt]] = [
    Column("ATTEMPT", lambda a: a.attempt),
    Column("STATUS", lambda a: a.status, lambda a: status_style(a.status)),
    Column("WORKER", lambda a: a.worker_id),
    Column("STARTED", lambda a: a.started_at),
    Column("FINISHED", lambda a: a.finished_at),
    Column("OUTPUT", lambda a: a.output),
    Column("ERROR", lambda a: error_text(a.error)),
]

EVENT_COLUMNS: list[Column[Event]] = [
    Column("SEQ", lambda e: e.sequence, width=4),
    Column("TIME", lambda e: e.occurred_at, width=19),
    Column("TYPE", lambda e: e.type, width=20),
    Column("TASK", lambda e: e.task_key, width=12),
    Column("ATTEMPT", lambda e: e.attempt),
    Column("DATA", lambda e: e.data or None),
]

WORKER_COLUMNS: list[Column[WorkerInfo]] = [
    Column("WORKER", lambda w: w.worker_id, no_wrap=True),
    Column("STATUS", lambda w: w.status, lambda w: status_style(w.status)),
    Column("IN_FLIGHT", lambda w: w.in_flight),
    Column("QUEUES", lambda w: ",".join(w.queues)),
    Column("ACTIONS", lambda w: ",".join(w.actions)),
    Column("FIRST_SEEN", lambda w: w.first_seen_at),
    Column("LAST_SEEN", lambda w: w.last_seen_at),
]


def _age(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


QUEUE_COLUMNS: list[Column[QueueStats]] = [
    Column("QUEUE", lambda q: q.queue),
    Column("QUEUED", lambda q: q.queued),
    Column("RUNNING", lambda q: q.running),
    Column("OLDEST_QUEUED_S", lambda q: _age(q.oldest_queued_age_seconds)),
]
