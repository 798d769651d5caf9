"""The API's resources and request bodies as pydantic models (SPEC §6).

The same models serialize responses and generate the OpenAPI document, so the document cannot
drift from what handlers send.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from workload_domain.events import EventType
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
]

T = TypeVar("T")
JsonObject = dict[str, Any]
DEFINITION_MARKER = "x-workload-definition"
DefinitionDocument = Annotated[
    dict[str, Any], WithJsonSchema({"type": "object", DEFINITION_MARKER: True})
]
"""A normalized definition; the OpenAPI document points it at the WorkflowDefinition schema."""


class _Out(BaseModel):
    # Resources are read from the domain's records by attribute (see resources.py).
    model_config = ConfigDict(frozen=True, from_attributes=True)


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
