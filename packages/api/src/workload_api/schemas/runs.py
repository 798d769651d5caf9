"""The run resources: runs, their tasks, attempts, steps and events (SPEC §6, §11)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from workload_api.schemas._common import ErrorObject, JsonObject, _Out
from workload_domain.events import EventType
from workload_domain.statuses import AttemptStatus, RunStatus, TaskStatus

__all__ = [
    "Attempt",
    "Event",
    "Run",
    "StartRunRequest",
    "Step",
    "TaskRun",
    "Usage",
]


class Usage(_Out):
    """What agent steps used (SPEC §11): calls made, tokens reported by the model."""

    model_calls: int
    tool_calls: int
    input_tokens: int
    output_tokens: int


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
    usage: Usage = Field(description="the sum over the run's agent tasks (zeros without any)")
    output: JsonObject | None = Field(
        description="the run's result: null until it has succeeded, then {task_key: output} of "
        "its sink tasks (those no other task depends on)"
    )


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
    usage: Usage = Field(description="what an agent task's steps used, over all its attempts")


class Attempt(_Out):
    """One attempt at executing a task (a remote one carries its queue and lease)."""

    attempt: int
    status: AttemptStatus
    started_at: datetime
    finished_at: datetime | None
    output: JsonObject | None
    error: ErrorObject | None
    attempt_id: str
    queue: str
    worker_id: str | None
    claimed_at: datetime | None
    lease_expires_at: datetime | None
    progress: JsonObject | None
    executed_by: str | None = Field(
        description="the replica_id of the service process that ran an in-process attempt "
        "(SPEC §16); null for a remote one (see worker_id)"
    )


class Step(_Out):
    """One step of an agent attempt's journal: a model call or a tool call (SPEC §11)."""

    step_id: str
    attempt: int
    sequence: int
    kind: str = Field(description='"model_call" or "tool_call"')
    status: str = Field(description='"running", "succeeded" or "failed"')
    request: JsonObject
    request_hash: str
    response: JsonObject | None
    usage: JsonObject | None
    tool_call_id: str | None
    started_at: datetime
    finished_at: datetime | None
    worker_id: str | None = Field(description="the worker holding a remote tool call")


class Event(_Out):
    """One entry of a run's history."""

    sequence: int
    type: EventType
    occurred_at: datetime
    task_key: str | None
    attempt: int | None
    data: JsonObject


class StartRunRequest(BaseModel):
    """The optional body of a run start."""

    model_config = ConfigDict(strict=True, extra="forbid")

    input: JsonObject = Field(default_factory=dict)
