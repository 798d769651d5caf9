"""Records ⇄ rows: query parameters from records, records from rows.

Columns are named like the records' fields, so a row becomes a record by keyword; only the
values PostgreSQL holds differently are converted (uuid run ids, status strings, JSONB).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any

from psycopg.types.json import Jsonb

from workload_domain.agent.journal import StepKind, StepRecord, StepStatus
from workload_domain.approvals import ApprovalRecord, ApprovalStatus
from workload_domain.errors import RunNotFound, StoreIntegrityError
from workload_domain.events import EventType
from workload_domain.records import (
    AttemptRecord,
    EventRecord,
    RunRecord,
    TaskError,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.statuses import AttemptStatus, RunStatus, TaskStatus
from workload_domain.usage import Usage
from workload_store_postgres._json import dumps

__all__ = [
    "approval",
    "approval_params",
    "attempt",
    "attempt_params",
    "attempt_rows",
    "event",
    "event_params",
    "event_rows",
    "maybe_uuid",
    "run",
    "run_params",
    "run_uuid",
    "step",
    "step_params",
    "task",
    "task_params",
    "task_rows",
    "version",
    "version_params",
    "workflow",
    "workflow_params",
]

Row = dict[str, Any]
_CANONICAL_LENGTH = 36
"""``xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``: the only spelling of a UUID a run id may have."""


_NAMES: dict[type, tuple[str, ...]] = {}


def _params(record: Any) -> dict[str, Any]:
    kind = type(record)
    names = _NAMES.get(kind)
    if names is None:
        names = _NAMES[kind] = tuple(f.name for f in fields(record))
    return {name: getattr(record, name) for name in names}


def _json(value: Mapping[str, Any] | None) -> Jsonb | None:
    return None if value is None else Jsonb(value)


def _error(value: Any) -> TaskError | None:
    return None if value is None else TaskError.from_json(value)


def maybe_uuid(run_id: str) -> uuid.UUID | None:
    """The UUID a run id spells, only in its canonical form (one id, one spelling)."""
    if not isinstance(run_id, str) or len(run_id) != _CANONICAL_LENGTH:
        return None  # only canonical-length strings are converted (and kept: see below)
    return _canonical_uuid(run_id)


@functools.lru_cache(maxsize=4096)
def _canonical_uuid(run_id: str) -> uuid.UUID | None:
    """``maybe_uuid`` of a string, kept for the ids in use.

    A run's id is converted at its creation, at each of its commits and reads, an attempt's
    at its start and its end: about eight conversions a one-task run. One (``UUID()``, then
    ``str()`` to check the spelling) is ≈ 20,000 instructions, a hit of this cache ≈ 2,000
    (callgrind). Only strings of the canonical length reach it, so what it keeps is bounded
    (≈ 1 MB at most).
    """
    try:
        parsed = uuid.UUID(run_id)
    except ValueError:
        return None
    return parsed if str(parsed) == run_id else None


def run_uuid(run_id: str) -> uuid.UUID:
    """A run id as a UUID; any other string names no run (``RunNotFound``)."""
    parsed = maybe_uuid(run_id)
    if parsed is None:
        raise RunNotFound(run_id)
    return parsed


# -- parameters ------------------------------------------------------------------------------


def workflow_params(w: WorkflowRecord) -> dict[str, Any]:
    """Parameters of a workflow row."""
    return _params(w)


def version_params(v: VersionRecord) -> dict[str, Any]:
    """Parameters of a version row."""
    return {**_params(v), "definition": Jsonb(v.definition)}


def run_params(r: RunRecord) -> dict[str, Any]:
    """Parameters of a run row."""
    return {
        **_params(r),
        "run_id": run_uuid(r.run_id),
        "status": r.status.value,
        "input": Jsonb(r.input),
        "output": _json(r.output),
    }


def task_params(run_id: uuid.UUID, t: TaskRecord) -> dict[str, Any]:
    """Parameters of a task row."""
    return {
        **_params(t),
        "run_id": run_id,
        "status": t.status.value,
        "depends_on": list(t.depends_on),
        "output": _json(t.output),
        "error": _json(t.error.to_json() if t.error else None),
    }


def attempt_params(run_id: uuid.UUID, a: AttemptRecord) -> dict[str, Any]:
    """Parameters of an attempt row."""
    attempt_id = maybe_uuid(a.attempt_id)
    if attempt_id is None:
        raise StoreIntegrityError(
            f"an attempt has a canonical UUID as its id, not {a.attempt_id!r}"
        )
    return {
        **_params(a),
        "run_id": run_id,
        "attempt_id": attempt_id,
        "status": a.status.value,
        "output": _json(a.output),
        "error": _json(a.error.to_json() if a.error else None),
        "progress": _json(a.progress),
    }


def event_params(run_id: uuid.UUID, e: EventRecord, epoch: int | None) -> dict[str, Any]:
    """Parameters of an event row; ``epoch``: its writer's coordinator epoch (if fenced)."""
    return {
        **_params(e),
        "run_id": run_id,
        "type": e.type.value,
        "data": Jsonb(e.data),
        "epoch": epoch,
    }


# -- many rows in one parameter ---------------------------------------------------------------
# A statement that writes several rows reads them from one JSON array (``jsonb_to_recordset``):
# one statement and one round trip for any number of rows, where ``executemany`` would send one
# statement per row (in a pipeline, with a sync of its own).


def _json_rows(rows: Iterable[Mapping[str, Any]]) -> Jsonb:
    return Jsonb(list(rows), dumps=dumps)


def task_rows(run_id: uuid.UUID, tasks: Iterable[TaskRecord]) -> Jsonb:
    """Task rows as one JSON array (their usage is the store's own to count)."""
    return _json_rows(
        {k: v for k, v in task_params(run_id, t).items() if k != "usage"} for t in tasks
    )


def attempt_rows(run_id: uuid.UUID, attempts: Iterable[AttemptRecord]) -> Jsonb:
    """Attempt rows as one JSON array."""
    return _json_rows(attempt_params(run_id, a) for a in attempts)


def event_rows(run_id: uuid.UUID, events: Iterable[EventRecord], epoch: int | None) -> Jsonb:
    """Event rows as one JSON array; ``epoch``: their writer's coordinator epoch (if fenced)."""
    return _json_rows(event_params(run_id, e, epoch) for e in events)


# -- records ---------------------------------------------------------------------------------


def workflow(row: Row) -> WorkflowRecord:
    """A workflow record from its row."""
    return WorkflowRecord(**row)


def version(row: Row) -> VersionRecord:
    """A version record from its row."""
    return VersionRecord(**row)


_USAGE = ("model_calls", "tool_calls", "input_tokens", "output_tokens")


def _usage(row: Row) -> Usage:
    """The usage columns of a run or task row, taken out of it."""
    return Usage(*(int(row.pop(name, 0)) for name in _USAGE))


def run(row: Row) -> RunRecord:
    """A run record from its row (extra columns such as ``last_sequence`` removed first)."""
    row = dict(row)
    usage = _usage(row)
    return RunRecord(
        **{**row, "run_id": str(row["run_id"]), "status": RunStatus(row["status"])}, usage=usage
    )


def task(row: Row) -> TaskRecord:
    """A task record from its row."""
    row = dict(row)
    usage = _usage(row)
    return TaskRecord(
        **{
            **row,
            "status": TaskStatus(row["status"]),
            "depends_on": tuple(row["depends_on"]),
            "error": _error(row["error"]),
        },
        usage=usage,
    )


def attempt(row: Row) -> AttemptRecord:
    """An attempt record from its row."""
    return AttemptRecord(
        **{
            **row,
            "attempt_id": str(row["attempt_id"]),
            "status": AttemptStatus(row["status"]),
            "error": _error(row["error"]),
        }
    )


def event(row: Row) -> EventRecord:
    """An event record from its row."""
    return EventRecord(**{**row, "type": EventType(row["type"])})


def step_params(s: StepRecord) -> dict[str, Any]:
    """Parameters of an agent step row."""
    return {
        **_params(s),
        "run_id": run_uuid(s.run_id),
        "step_id": uuid.UUID(s.step_id),
        "kind": s.kind.value,
        "status": s.status.value,
        "request": Jsonb(s.request),
        "response": _json(s.response),
        "usage": _json(s.usage),
        "progress": _json(s.progress),
    }


def step(row: Row) -> StepRecord:
    """An agent step record from its row (``step_id`` and the token digest removed)."""
    values = {
        k: v for k, v in row.items() if k not in ("step_id", "lease_token_digest", "notified")
    }
    return StepRecord(
        **{
            **values,
            "run_id": str(row["run_id"]),
            "kind": StepKind(row["kind"]),
            "status": StepStatus(row["status"]),
        }
    )


def approval_params(run_id: uuid.UUID, a: ApprovalRecord) -> dict[str, Any]:
    """Parameters of an approval row."""
    return {
        **_params(a),
        "approval_id": uuid.UUID(a.approval_id),
        "run_id": run_id,
        "arguments": Jsonb(a.arguments),
        "status": a.status.value,
    }


def approval(row: Row) -> ApprovalRecord:
    """An approval record from its row."""
    return ApprovalRecord(
        **{
            **row,
            "approval_id": str(row["approval_id"]),
            "run_id": str(row["run_id"]),
            "status": ApprovalStatus(row["status"]),
        }
    )
