"""The API's resources and request bodies as pydantic models (SPEC §6).

The same models serialize responses and generate the OpenAPI document, so the document cannot
drift from what handlers send.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from workload_domain.agent.spec import MAX_SCRIPT_TURNS, MODEL_PATTERN
from workload_domain.definition import QUEUE_PATTERN, WORKFLOW_ID_PATTERN
from workload_domain.events import EventType
from workload_domain.statuses import AttemptStatus, RunStatus, TaskStatus
from workload_domain.workers import (
    ACTION_NAME_PATTERN,
    ERROR_CODE_PATTERN,
    MAX_CLAIM_ACTIONS,
    MAX_CLAIM_ATTEMPTS,
    MAX_CLAIM_WAIT_SECONDS,
    WORKER_ID_PATTERN,
)

__all__ = [
    "Attempt",
    "ClaimItem",
    "ClaimRequest",
    "ClaimResponse",
    "Cluster",
    "ClusterMember",
    "CompleteRequest",
    "ErrorIn",
    "ErrorObject",
    "Event",
    "FailRequest",
    "Health",
    "HeartbeatRequest",
    "Lease",
    "Page",
    "ProblemDetails",
    "QueueItem",
    "Queues",
    "Ready",
    "ReplicaShare",
    "Run",
    "ServiceStatus",
    "StartRunRequest",
    "TaskRun",
    "Version",
    "VersionSummary",
    "Worker",
    "Workflow",
]

T = TypeVar("T")
JsonObject = dict[str, Any]
DEFINITION_MARKER = "x-workload-definition"
_FENCING_NOTE = (
    "the claim's lease_token; any other string (empty, too long, another attempt's) is "
    "answered 409 lease_lost, reason unknown (SPEC §10)"
)
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


class ToolCallReport(Attempt):
    """The answer to a worker's report of an agent's tool call: the call as an attempt."""

    kind: str = Field(description='"tool_call"')
    task_key: str
    sequence: int
    tool_call_id: str | None


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


class Approval(_Out):
    """A person's approval of one tool call of an agent, bound to its exact arguments (§11)."""

    approval_id: str
    run_id: str
    task_key: str
    tool: str
    tool_call_id: str | None
    arguments: JsonObject
    arguments_digest: str = Field(description='"sha256:" + hex of the canonical JSON arguments')
    status: str = Field(description='"pending", "approved", "rejected", "expired" or "canceled"')
    requested_at: datetime
    expires_at: datetime
    decided_by: str | None = Field(description="the deciding principal (never its token)")
    decided_at: datetime | None
    comment: str | None


class DecisionRequest(BaseModel):
    """A decision on a pending approval, for exactly the arguments it names."""

    model_config = ConfigDict(strict=True, extra="forbid")

    decision: Literal["approve", "reject"]
    arguments_digest: str = Field(max_length=80)
    comment: str | None = Field(default=None, max_length=4096)


class Draft(_Out):
    """A workflow written by a model from a prompt, waiting for a person's approval (§11)."""

    draft_id: str
    status: str = Field(description='"generating", "ready", "invalid", "approved" or "rejected"')
    prompt: str
    model: str
    workflow_id: str | None
    definition: JsonObject | None = Field(description="the normalized definition (ready)")
    definition_hash: str | None
    problems: list[JsonObject] = Field(
        description='every problem of every answer: {"answer", "path", "message"}'
    )
    usage: Usage
    created_by: str
    created_at: datetime
    updated_at: datetime
    version: int | None = Field(description="once approved: the version it became")


# The turns are checked by the use case (each problem at its /script/i); the document says
# what it accepts: objects with exactly one string "content".
_SCRIPT_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {
            "type": "array",
            "maxItems": MAX_SCRIPT_TURNS,
            "items": {
                "type": "object",
                "properties": {"content": {"type": "string"}},
                "required": ["content"],
                "additionalProperties": False,
            },
        },
        {"type": "null"},
    ]
}


class CreateDraftRequest(BaseModel):
    """The body of POST /drafts."""

    model_config = ConfigDict(strict=True, extra="forbid")

    prompt: str = Field(min_length=1, max_length=100_000)
    workflow_id: str | None = Field(default=None, pattern=WORKFLOW_ID_PATTERN)
    model: str = Field(default="mock", pattern=MODEL_PATTERN)
    script: Annotated[list[JsonObject] | None, WithJsonSchema(_SCRIPT_SCHEMA)] = Field(
        default=None,
        max_length=MAX_SCRIPT_TURNS,
        description='mock model only: turns {"content": "…"} (the runtime reads at most 4)',
    )


class ApproveDraftRequest(BaseModel):
    """The body of POST /drafts/{draft_id}/approve."""

    model_config = ConfigDict(strict=True, extra="forbid")

    definition_hash: str = Field(max_length=80)


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


class _In(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


WorkerName = Annotated[str, Field(pattern=WORKER_ID_PATTERN)]
QueueName = Annotated[str, Field(pattern=QUEUE_PATTERN)]
ActionName = Annotated[str, Field(pattern=ACTION_NAME_PATTERN)]


class ClaimRequest(_In):
    """What a worker asks for: attempts of these queues and actions."""

    queues: list[QueueName] = Field(min_length=1, max_length=100)
    actions: list[ActionName] = Field(
        min_length=1,
        max_length=MAX_CLAIM_ACTIONS,
        description="1-256 action names, each 1-128 of A-Z a-z 0-9 . _ : - (ADR 0023)",
    )
    max_attempts: int = Field(default=1, ge=1, le=MAX_CLAIM_ATTEMPTS)
    wait_seconds: float = Field(default=20, ge=0, le=MAX_CLAIM_WAIT_SECONDS, allow_inf_nan=False)


class ClaimItem(_Out):
    """An attempt handed to a worker, with its lease and everything it needs to run."""

    kind: str = Field(description='"task" (a task\'s attempt) or "tool_call" (an agent\'s tool)')
    attempt_id: str
    lease_token: str
    lease_expires_at: datetime
    timeout_at: datetime
    heartbeat_timeout_seconds: float
    run_id: str
    workflow_id: str
    version: int
    task_key: str
    attempt: int
    queue: str
    action: str
    input: JsonObject
    run_input: JsonObject
    upstream: JsonObject
    traceparent: str | None
    tool_call_id: str | None = Field(description="tool calls: the model's id of the call")
    tool: str | None = Field(description="tool calls: the tool's name")
    arguments: JsonObject | None = Field(description="tool calls: the arguments (= input)")


class ClaimResponse(_Out):
    """The attempts a claim handed out (empty only after waiting the full wait_seconds)."""

    attempts: list[ClaimItem]


class HeartbeatRequest(_In):
    """A worker keeps its lease (and may report progress)."""

    lease_token: str = Field(description=_FENCING_NOTE)
    progress: JsonObject | None = None


class Lease(_Out):
    """The renewed lease."""

    lease_expires_at: datetime


class CompleteRequest(_In):
    """A worker reports success with the attempt's output."""

    lease_token: str = Field(description=_FENCING_NOTE)
    output: JsonObject


class ErrorIn(_In):
    """Why an attempt failed, as a worker reports it."""

    code: str = Field(
        pattern=ERROR_CODE_PATTERN, description="1-128 of A-Z a-z 0-9 . _ : - (ADR 0023)"
    )
    message: str = Field(max_length=4096)
    retryable: bool = True


class FailRequest(_In):
    """A worker reports failure."""

    lease_token: str = Field(description=_FENCING_NOTE)
    error: ErrorIn


class Worker(_Out):
    """A worker as last seen."""

    worker_id: str
    queues: list[str]
    actions: list[str]
    first_seen_at: datetime
    last_seen_at: datetime
    in_flight: int
    status: str = Field(description='"active" (seen recently) or "gone"')


class QueueItem(_Out):
    """A queue's work."""

    queue: str
    queued: int
    running: int
    oldest_queued_age_seconds: float | None


class Queues(_Out):
    """Every queue with work or history (not paged)."""

    items: list[QueueItem]


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
    reason: str | None = Field(
        default=None,
        description="lease_lost only: expired, canceled, finished, timed_out or unknown",
    )


class Health(_Out):
    """Liveness."""

    status: str


_ROLE = (
    '"leader" (this process holds the coordinator lock), "standby", or "replica" (one of the '
    "replicas that all execute, SPEC §16)"
)


class Ready(_Out):
    """Readiness (SPEC §12, §16): whether this process serves, and what it is."""

    status: str = Field(description='"ready", or why not: starting, stopping, failed')
    role: str = Field(description=_ROLE)
    epoch: int | None = Field(
        default=None,
        description="a leader's or a standby's coordinator epoch (SPEC §14); null without one",
    )
    replica_id: str | None = Field(default=None, description="a replica's id (SPEC §16)")
    shards_owned: int | None = Field(
        default=None, description="how many shards a replica owns now (SPEC §16)"
    )


class ClusterMember(_Out):
    """A live replica and the shards it owns (SPEC §16)."""

    replica_id: str
    shards: list[int]
    started_at: datetime
    last_seen_at: datetime


class Cluster(_Out):
    """The live replicas and their shards (``GET /api/v1/cluster``, SPEC §16).

    A coordinator leading alone (§7, §14) is the one member, owning every shard.
    """

    shards_total: int = Field(description="the database's number of shards (fixed)")
    replicas: list[ClusterMember]


class ReplicaShare(_Out):
    """A live replica and how many shards it owns."""

    replica_id: str
    shards_owned: int


class ServiceStatus(_Out):
    """The service at a glance (``workload status``)."""

    status: str = Field(description='"ready", or why not: starting, stopping, failed')
    role: str = Field(description=_ROLE)
    epoch: int | None = Field(description="the coordinator epoch (SPEC §14); null without one")
    replica_id: str | None = Field(description="this process's replica id, if a replica")
    runs_active: int = Field(description="runs not yet terminal")
    workers_active: int = Field(
        description="workers seen within the last 90 seconds, or holding work"
    )
    approvals_pending: int = Field(description="approvals waiting for a decision")
    queues: list[QueueItem]
    shards_total: int = Field(description="the database's number of shards (SPEC §16)")
    replicas: list[ReplicaShare] = Field(
        description="the live replicas (or the coordinator leading alone), by id"
    )
