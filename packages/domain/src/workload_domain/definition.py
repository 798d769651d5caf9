"""The workflow definition as users write it (SPEC §3): strict pydantic models.

Strict means no coercion (``"3"`` is not ``3``, ``true`` is not ``1``) and no unknown fields.
Bounds that only make sense together (``max_backoff_seconds >= initial_backoff_seconds``) and
everything about the task graph are checked by :mod:`workload_domain.compiler`, which reports
every problem at once.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from workload_domain.errors import Problem
from workload_domain.jsonvalues import pointer

__all__ = [
    "DEFAULT_HEARTBEAT_TIMEOUT_SECONDS",
    "DEFAULT_QUEUE",
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_ACTION_LENGTH",
    "MAX_ATTEMPTS",
    "MAX_BACKOFF_SECONDS",
    "MAX_DESCRIPTION_LENGTH",
    "MAX_HEARTBEAT_TIMEOUT_SECONDS",
    "MAX_TASKS",
    "MAX_TIMEOUT_SECONDS",
    "QUEUE_PATTERN",
    "STRICT",
    "TASK_KEY_PATTERN",
    "VERSION_NUMBER_PATTERN",
    "WORKFLOW_ID_PATTERN",
    "RetryPolicy",
    "TaskSpec",
    "WorkflowDefinition",
    "seconds_field",
    "validation_problems",
]

WORKFLOW_ID_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"
TASK_KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"
QUEUE_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"
VERSION_NUMBER_PATTERN = r"^[1-9][0-9]{0,8}$"
"""A version number as a path spells it: ASCII digits, one spelling per version (no sign, no
leading 0; ``str.isdigit`` would take "²", which ``int`` refuses)."""
DEFAULT_QUEUE = "default"
DEFAULT_HEARTBEAT_TIMEOUT_SECONDS = 30
MAX_HEARTBEAT_TIMEOUT_SECONDS = 3600
MAX_TASKS = 1000
MAX_ACTION_LENGTH = 128
MAX_DESCRIPTION_LENGTH = 4096
DEFAULT_TIMEOUT_SECONDS = 300
MAX_TIMEOUT_SECONDS = 86400
MAX_ATTEMPTS = 100
MAX_BACKOFF_SECONDS = 604800
"""Backoff values are capped at 7 days so that every retry time is a representable instant."""

STRICT = ConfigDict(strict=True, extra="forbid", frozen=True)
"""The config of every model of what users write (definitions, agent specs, draft requests):
no coercion, no unknown field, immutable."""

WorkflowId = Annotated[str, StringConstraints(pattern=WORKFLOW_ID_PATTERN)]
TaskKey = Annotated[str, StringConstraints(pattern=TASK_KEY_PATTERN)]
QueueName = Annotated[str, StringConstraints(pattern=QUEUE_PATTERN)]


def seconds_field(default: float | None, maximum: float) -> Any:
    """A duration field: more than zero seconds, at most ``maximum``, finite (``default``)."""
    return Field(default=default, gt=0, le=maximum, allow_inf_nan=False)


class RetryPolicy(BaseModel):
    """How often a task is attempted and how long to wait between attempts."""

    model_config = STRICT

    max_attempts: int = Field(default=1, ge=1, le=MAX_ATTEMPTS)
    initial_backoff_seconds: float = Field(
        default=1, ge=0, le=MAX_BACKOFF_SECONDS, allow_inf_nan=False
    )
    backoff_multiplier: float = Field(default=2, ge=1, le=1000, allow_inf_nan=False)
    max_backoff_seconds: float = Field(
        default=60, ge=0, le=MAX_BACKOFF_SECONDS, allow_inf_nan=False
    )


class TaskSpec(BaseModel):
    """One task of a workflow: what to execute and when it may start."""

    model_config = STRICT

    key: TaskKey
    action: str = Field(min_length=1, max_length=MAX_ACTION_LENGTH)
    input: dict[str, Any] = Field(default_factory=dict)
    depends_on: list[str] = Field(default_factory=list)
    timeout_seconds: float = seconds_field(DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    queue: QueueName = DEFAULT_QUEUE
    """Where a remote attempt waits for a worker (SPEC §10)."""
    heartbeat_timeout_seconds: float = seconds_field(
        DEFAULT_HEARTBEAT_TIMEOUT_SECONDS, MAX_HEARTBEAT_TIMEOUT_SECONDS
    )
    """The lease length of a remote attempt: a worker heartbeats within it or loses it."""
    schedule_to_start_timeout_seconds: float | None = seconds_field(None, MAX_TIMEOUT_SECONDS)
    """How long a remote attempt may wait in its queue (None: forever)."""


class WorkflowDefinition(BaseModel):
    """A workflow: an id, an optional description and a DAG of tasks."""

    model_config = STRICT

    id: WorkflowId
    description: str = Field(default="", max_length=MAX_DESCRIPTION_LENGTH)
    tasks: list[TaskSpec] = Field(min_length=1, max_length=MAX_TASKS)


def validation_problems(exc: ValidationError, at: tuple[str | int, ...] = ()) -> list[Problem]:
    """The problems pydantic found in an input, at their JSON Pointers below ``at``.

    Two of pydantic's words are said as the API says them: ``unknown field`` (an extra field)
    and ``field required``.
    """
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        loc = tuple(p for p in error["loc"] if isinstance(p, str | int))
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown field"
        elif error["type"] == "missing":
            message = "field required"
        problems.append(Problem(pointer((*at, *loc)), message))
    return problems
