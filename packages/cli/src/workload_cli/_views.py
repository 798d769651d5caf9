"""The columns each listing shows, in every format but JSON (which shows whole resources)."""

from __future__ import annotations

import json
from typing import Any

from workload_cli._output import Column, cell, status_style
from workload_sdk import (
    Approval,
    Attempt,
    Draft,
    ErrorObject,
    Event,
    QueueStats,
    Run,
    Step,
    TaskRun,
    Usage,
    VersionSummary,
    WorkerInfo,
    Workflow,
)

__all__ = [
    "APPROVAL_COLUMNS",
    "ATTEMPT_COLUMNS",
    "DRAFT_COLUMNS",
    "EVENT_COLUMNS",
    "QUEUE_COLUMNS",
    "RUN_COLUMNS",
    "STEP_COLUMNS",
    "TASK_COLUMNS",
    "VERSION_COLUMNS",
    "WORKER_COLUMNS",
    "WORKFLOW_COLUMNS",
    "error_text",
    "step_result",
    "task_counts_text",
    "usage_text",
]


def error_text(error: ErrorObject | None) -> str | None:
    """``code: message`` of a task or attempt error."""
    return None if error is None else f"{error.code}: {error.message}"


def task_counts_text(run: Run) -> str:
    """The non-zero task counts of a run, e.g. ``succeeded=3 running=1``."""
    return " ".join(f"{status.value}={n}" for status, n in run.task_counts.items() if n)


def usage_text(usage: Usage | None) -> str:
    """The non-zero counts of a usage, e.g. ``model_calls=2 tool_calls=1 input_tokens=90``."""
    if usage is None:
        return ""
    return " ".join(f"{name}={n}" for name, n in usage.model_dump().items() if n)


_RESULT_CHARS = 60


def _shortened(text: str) -> str:
    return text if len(text) <= _RESULT_CHARS else text[: _RESULT_CHARS - 1] + "…"


def step_result(step: Step) -> str | None:
    """What a step answered, in short: the model's tool calls or text, a tool's output, an error.

    The whole answer is the step's ``response`` (``--output json``).
    """
    response = step.response
    if response is None:
        return None
    error = response.get("error")
    if isinstance(error, dict):  # a model call's failure: the attempt's error object
        text = f"{error.get('code')}: {error.get('message')}"
    elif error is not None:  # a tool call that failed or was refused
        text = f"error: {error}"
    elif step.kind == "model_call":
        calls = [c.get("name") for c in response.get("tool_calls") or () if isinstance(c, dict)]
        text = f"calls {', '.join(map(str, calls))}" if calls else cell(response.get("content"))
    else:
        text = cell(response.get("output"))
    return _shortened(text)


def _step_call(step: Step) -> Any:
    """The tool a tool call names, or the model a model call asks."""
    return step.request.get("tool" if step.kind == "tool_call" else "model")


def _step_tokens(step: Step) -> str | None:
    """``input/output`` tokens of a model call, as the model reported them."""
    if not step.usage:
        return None
    return f"{step.usage.get('input_tokens', 0)}/{step.usage.get('output_tokens', 0)}"


def _step_seconds(step: Step) -> str | None:
    """How long a finished step took, to the millisecond."""
    if step.finished_at is None:
        return None
    return f"{(step.finished_at - step.started_at).total_seconds():.3f}"


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
    Column("EXECUTED_BY", lambda a: a.executed_by),
    Column("STARTED", lambda a: a.started_at),
    Column("FINISHED", lambda a: a.finished_at),
    Column("OUTPUT", lambda a: a.output),
    Column("ERROR", lambda a: error_text(a.error)),
]

STEP_COLUMNS: list[Column[Step]] = [
    Column("ATTEMPT", lambda s: s.attempt, no_wrap=True),
    Column("SEQ", lambda s: s.sequence, no_wrap=True),
    Column("KIND", lambda s: s.kind, no_wrap=True),
    Column("STATUS", lambda s: s.status, lambda s: status_style(s.status), no_wrap=True),
    Column("CALL", _step_call),
    Column("WORKER", lambda s: s.worker_id),
    Column("TOKENS", _step_tokens, no_wrap=True),
    Column("SECONDS", _step_seconds, no_wrap=True),
    Column("RESULT", step_result),
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


def _arguments(approval: Approval) -> str:
    # Escaped like the review of a decision (_review): a model wrote these arguments.
    return _shortened(json.dumps(approval.arguments, separators=(",", ":")))


APPROVAL_COLUMNS: list[Column[Approval]] = [
    Column("APPROVAL", lambda a: a.approval_id, no_wrap=True),
    Column("STATUS", lambda a: a.status, lambda a: status_style(a.status)),
    Column("RUN", lambda a: a.run_id),
    Column("TASK", lambda a: a.task_key),
    Column("TOOL", lambda a: a.tool),
    Column("ARGUMENTS", _arguments),
    Column("REQUESTED", lambda a: a.requested_at),
    Column("EXPIRES", lambda a: a.expires_at),
    Column("DECIDED_BY", lambda a: a.decided_by),
]


def _task_count(draft: Draft) -> int | None:
    tasks = (draft.definition or {}).get("tasks")
    return len(tasks) if isinstance(tasks, list) else None


DRAFT_COLUMNS: list[Column[Draft]] = [
    Column("DRAFT", lambda d: d.draft_id, no_wrap=True),
    Column("STATUS", lambda d: d.status, lambda d: status_style(d.status)),
    Column("WORKFLOW", lambda d: d.workflow_id),
    Column("VERSION", lambda d: d.version),
    Column("MODEL", lambda d: d.model),
    Column("TASKS", _task_count),
    Column("PROBLEMS", lambda d: len(d.problems)),
    Column("CREATED", lambda d: d.created_at),
    Column("PROMPT", lambda d: _shortened(d.prompt)),
]
