"""The API's resources and request bodies as pydantic models (SPEC §6).

The same models serialize responses and generate the OpenAPI document, so the document cannot
drift from what handlers send.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from workload_domain.events import EventType
from workload_domain.model import (
    AttemptRecord,
    EventRecord,
    RunRecord,
    TaskError,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.statuses import AttemptStatus, RunStatus, TaskStatus

__all__ = [
    "Attempt",
    "ErrorObject",
    "Event",
    "Health",
    "Page",
    "ProblemDetails",
    "Run",
    "StartRunRequest",
    "TaskRun",
    "Version",
    "VersionSummary",
    "Workflow",
    "attempt_out",
    "event_out",
    "run_out",
    "task_out",
    "version_out",
    "version_summary_out",
    "workflow_out",
]

T = TypeVar("T")
JsonObject = dict[str, Any]
DEFINITION_MARKER = "x-workload-definition"
DefinitionDocument = Annotated[
    dict[str, Any], WithJsonSchema({"type": "object", DEFINITION_MARKER: True})
]
"""A normalized definition; the OpenAPI document points it at the WorkflowDefinition schema."""


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class ErrorObject(_Out):
    """Why an attempt or task failed."""

    code: str
    message: str
    retryable: bool


class Workflow(_Out):
    """A workflow: the id under which immutable versions are created."""

    workflow_id: str
    latest_version: int
    description: str
    created_at: datetime
    updated_at: datetime


class VersionSummary(_Out):
    """A version without its definition (in lists)."""

    workflow_id: str
    version: int
    definition_hash: str
    task_count: int
    created_at: datetime


class Version(VersionSummary):
    """A version with its normalized definition."""

    definition: DefinitionDocument


class Run(_Out):
    """A run of one workflow version."""

    run_id: str
    workflow_id: str
    version: int
    status: RunStatus
    revision: int
    input: JsonObject
    cancel_requested: bool
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    task_counts: dict[TaskStatus, int]


class TaskRun(_Out):
    """One task of a run."""

    task_key: str
    status: TaskStatus
    depends_on: list[str]
    attempt_count: int
    max_attempts: int
    next_attempt_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    output: JsonObject | None
    error: ErrorObject | None


class Attempt(_Out):
    """One attempt at executing a task."""

    attempt: int
    status: AttemptStatus
    started_at: datetime
    finished_at: datetime | None
    output: JsonObject | None
    error: ErrorObject | None


class Event(_Out):
    """One entry of a run's history."""

    sequence: int
    type: EventType
    occurred_at: datetime
    task_key: str | None
    attempt: int | None
    data: JsonObject


class Page(_Out, Generic[T]):
    """One page of a listing; pass ``next_cursor`` back as ``cursor`` for the next one."""

    items: list[T]
    next_cursor: str | None


class StartRunRequest(BaseModel):
    """The optional body of a run start."""

    model_config = ConfigDict(strict=True, extra="forbid")

    input: JsonObject = Field(default_factory=dict)


class ProblemItem(_Out):
    """One validation problem: where (a JSON Pointer) and what."""

    path: str
    message: str


class ProblemDetails(_Out):
    """An RFC 9457 problem document."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    request_id: str
    errors: list[ProblemItem] | None = None


class Health(_Out):
    """Liveness or readiness."""

    status: str


def _error(error: TaskError | None) -> ErrorObject | None:
    return None if error is None else ErrorObject(**error.to_json())


def workflow_out(w: WorkflowRecord) -> Workflow:
    """The workflow resource of a record."""
    return Workflow(
        workflow_id=w.workflow_id,
        latest_version=w.latest_version,
        description=w.description,
        created_at=w.created_at,
        updated_at=w.updated_at,
    )


def version_summary_out(v: VersionRecord) -> VersionSummary:
    """The version summary of a record."""
    return VersionSummary(
        workflow_id=v.workflow_id,
        version=v.version,
        definition_hash=v.definition_hash,
        task_count=v.task_count,
        created_at=v.created_at,
    )


def version_out(v: VersionRecord) -> Version:
    """The full version resource of a record."""
    return Version(**version_summary_out(v).model_dump(), definition=v.definition)


def run_out(r: RunRecord, task_counts: Mapping[str, int]) -> Run:
    """The run resource: the record and how many tasks are in each status."""
    return Run(
        run_id=r.run_id,
        workflow_id=r.workflow_id,
        version=r.version,
        status=r.status,
        revision=r.revision,
        input=r.input,
        cancel_requested=r.cancel_requested,
        created_at=r.created_at,
        updated_at=r.updated_at,
        started_at=r.started_at,
        finished_at=r.finished_at,
        task_counts={s: int(task_counts.get(s.value, 0)) for s in TaskStatus},
    )


def task_out(t: TaskRecord) -> TaskRun:
    """The task run resource of a record."""
    return TaskRun(
        task_key=t.task_key,
        status=t.status,
        depends_on=list(t.depends_on),
        attempt_count=t.attempt_count,
        max_attempts=t.max_attempts,
        next_attempt_at=t.next_attempt_at,
        started_at=t.started_at,
        finished_at=t.finished_at,
        output=t.output,
        error=_error(t.error),
    )


def attempt_out(a: AttemptRecord) -> Attempt:
    """The attempt resource of a record."""
    return Attempt(
        attempt=a.attempt,
        status=a.status,
        started_at=a.started_at,
        finished_at=a.finished_at,
        output=a.output,
        error=_error(a.error),
    )


def event_out(e: EventRecord) -> Event:
    """The event resource of a record."""
    return Event(
        sequence=e.sequence,
        type=e.type,
        occurred_at=e.occurred_at,
        task_key=e.task_key,
        attempt=e.attempt,
        data=e.data,
    )
