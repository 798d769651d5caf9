"""The API's resources as pydantic models (SPEC §6), owned by the SDK itself.

Field names are the API's contract. Every model allows extra fields, so a newer server that adds
a field does not break an older client (the extra value is kept: ``model.model_extra``).
Timestamps are parsed into timezone-aware :class:`~datetime.datetime` objects.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AppliedVersion",
    "Approval",
    "Attempt",
    "AttemptStatus",
    "ClaimedAttempt",
    "Cluster",
    "ClusterMember",
    "Draft",
    "DraftProblem",
    "ErrorObject",
    "Event",
    "Lease",
    "Page",
    "ProblemItem",
    "QueueStats",
    "ReplicaShare",
    "Run",
    "RunStatus",
    "ServiceStatus",
    "Step",
    "TaskRun",
    "TaskStatus",
    "Usage",
    "Version",
    "VersionSummary",
    "WorkerInfo",
    "WorkerStatus",
    "Workflow",
]

T = TypeVar("T")
JsonObject = dict[str, Any]


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


class _Resource(BaseModel):
    """Base of every resource: immutable, tolerant of fields added by newer servers."""

    model_config = ConfigDict(extra="allow", frozen=True)


class ErrorObject(_Resource):
    """Why a task or an attempt failed."""

    code: str
    message: str
    retryable: bool


class ProblemItem(_Resource):
    """One validation problem of a rejected request: where (a JSON Pointer) and what."""

    path: str
    message: str


class Workflow(_Resource):
    """A workflow: the id under which immutable versions are created."""

    workflow_id: str
    latest_version: int
    description: str
    created_at: datetime
    updated_at: datetime


class VersionSummary(_Resource):
    """A version without its definition, as listed."""

    workflow_id: str
    version: int
    definition_hash: str
    task_count: int
    created_at: datetime


class Version(VersionSummary):
    """A version with its normalized definition (every default explicit)."""

    definition: JsonObject


class AppliedVersion(Version):
    """What ``client.workflows.apply`` answers: the workflow's latest version after the apply.

    ``created`` is True when the apply created it (201: the workflow was new, or its latest
    version had another definition), False when the latest version had this definition already
    (200: nothing was written).
    """

    created: bool

    @classmethod
    def of(cls, version: Version, *, created: bool) -> AppliedVersion:
        """The version, and whether the apply created it."""
        return cls.model_validate({**version.model_dump(), "created": created})


class Usage(_Resource):
    """What agent steps used (SPEC §11): calls made, and tokens as the model reported them.

    On a task: over all its attempts. On a run: the sum over its agent tasks (zeros without
    any).
    """

    model_calls: int
    tool_calls: int
    input_tokens: int
    output_tokens: int


class Run(_Resource):
    """A run of one workflow version.

    ``revision`` grows by one per committed state change; pass it back as
    ``client.runs.cancel(run.run_id, if_revision=run.revision)`` to act only on the state you
    saw (a stale revision raises :class:`~workload_sdk.PreconditionFailed`).
    """

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
    task_counts: dict[TaskStatus, int] = Field(default_factory=dict)
    usage: Usage | None = None
    """What its agent tasks used; None from servers older than agents."""
    output: JsonObject | None = None
    """The run's result once it has succeeded: ``{task_key: output}`` of its sink tasks (those
    no other task depends on); None before, for a run that did not succeed, and from servers
    older than results."""

    @property
    def is_terminal(self) -> bool:
        """Whether the run has finished (succeeded, failed or canceled)."""
        return self.status.is_terminal


class TaskRun(_Resource):
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
    usage: Usage | None = None
    """What an agent task used over all its attempts (zeros for other tasks); None from
    servers older than agents."""


class Attempt(_Resource):
    """One attempt at executing a task (numbered from 1).

    The fields after ``error`` describe remote attempts (SPEC §10): which worker claimed the
    attempt and until when its lease runs. They are None for attempts run in the coordinator,
    and absent (None) from servers older than workers.
    """

    attempt: int
    status: AttemptStatus
    started_at: datetime
    finished_at: datetime | None
    output: JsonObject | None
    error: ErrorObject | None
    attempt_id: str | None = None
    queue: str | None = None
    worker_id: str | None = None
    claimed_at: datetime | None = None
    lease_expires_at: datetime | None = None
    progress: JsonObject | None = None
    executed_by: str | None = None
    """The ``replica_id`` of the service process that ran an in-process attempt (SPEC §16);
    None for a remote one (see ``worker_id``), and from servers older than replicas."""


class Event(_Resource):
    """One entry of a run's history, such as ``run.created`` or ``attempt.failed``.

    ``type`` is a plain string so that event types added by newer servers parse too.
    """

    sequence: int
    type: str
    occurred_at: datetime
    task_key: str | None
    attempt: int | None
    data: JsonObject


class Step(_Resource):
    """One step of an agent attempt's journal (SPEC §11): a model call or a tool call.

    Steps are numbered by ``sequence`` within an attempt. ``kind`` (``"model_call"`` or
    ``"tool_call"``) and ``status`` (``"running"``, ``"succeeded"`` or ``"failed"``) are plain
    strings so that values added by newer servers still parse.

    A model call's ``request`` holds the model and the messages added since the previous call,
    its ``response`` the answer (``content``, ``tool_calls``, ``finish_reason``) and ``usage``
    its tokens (``input_tokens``, ``output_tokens``). A tool call's ``request`` holds the
    ``tool``, its ``action`` and the ``arguments``; its ``response`` is ``{"output": …}`` or
    ``{"error": …}``, and ``worker_id`` names the worker that ran it (None in-process).
    """

    step_id: str
    attempt: int
    sequence: int
    kind: str
    status: str
    request: JsonObject
    request_hash: str
    response: JsonObject | None
    usage: JsonObject | None
    tool_call_id: str | None
    started_at: datetime
    finished_at: datetime | None
    worker_id: str | None = None


class Approval(_Resource):
    """A person's decision on one tool call of an agent, bound to its exact arguments (§11).

    ``arguments_digest`` is ``"sha256:"`` + the hex digest of the arguments' canonical JSON:
    a decision names it, so it applies only to the arguments that were shown. ``status``
    (``"pending"``, ``"approved"``, ``"rejected"``, ``"expired"`` or ``"canceled"``) is a
    plain string so that statuses added by newer servers still parse. ``decided_by`` is a
    stable principal id such as ``operator:3f9a1c0b2d4e``, never a token.
    """

    approval_id: str
    run_id: str
    task_key: str
    tool: str
    tool_call_id: str | None
    arguments: JsonObject
    arguments_digest: str
    status: str
    requested_at: datetime
    expires_at: datetime
    decided_by: str | None
    decided_at: datetime | None
    comment: str | None

    @property
    def is_pending(self) -> bool:
        """Whether the approval still waits for a decision."""
        return self.status == "pending"


class DraftProblem(_Resource):
    """One problem of one of the model's answers to a draft: which answer, where, what."""

    answer: int
    path: str
    message: str


class Draft(_Resource):
    """A workflow definition written by a model from a prompt, waiting for a person (§11).

    ``status`` is ``"generating"``, then ``"ready"`` (``definition`` and ``definition_hash``
    set) or ``"invalid"`` (no definition; ``problems`` says why), then ``"approved"``
    (``version`` set) or ``"rejected"``; a plain string so that statuses added by newer
    servers still parse. ``problems`` holds every problem of every answer, numbered by
    ``answer``. Approving names ``definition_hash``, so the version is exactly what was shown.
    """

    draft_id: str
    status: str
    prompt: str
    model: str
    workflow_id: str | None
    definition: JsonObject | None
    definition_hash: str | None
    problems: list[DraftProblem]
    usage: Usage
    created_by: str
    created_at: datetime
    updated_at: datetime
    version: int | None

    @property
    def is_generating(self) -> bool:
        """Whether the model is still writing it (``drafts.wait`` waits for the end)."""
        return self.status == "generating"


class ClaimedAttempt(_Resource):
    """An attempt handed to a worker by a claim, under a lease (a claim item, SPEC §10).

    ``kind`` is ``"task"`` for a task's attempt and ``"tool_call"`` for an agent's tool call
    (which also carries ``tool_call_id``, ``tool`` and ``arguments``; its ``input`` is the
    arguments). It is a plain string so that kinds added by newer servers still parse.

    Present ``lease_token`` with every heartbeat and report of this attempt; it is left out of
    the model's ``repr``.
    """

    kind: str
    attempt_id: str
    lease_token: str = Field(repr=False)
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
    traceparent: str | None = None
    tool_call_id: str | None = None
    tool: str | None = None
    arguments: JsonObject | None = None


class Claim(_Resource):
    """The answer of a claim: the attempts handed out (empty after a wait without work)."""

    attempts: list[ClaimedAttempt]


class Lease(_Resource):
    """The answer of a heartbeat: the lease now runs until ``lease_expires_at``."""

    lease_expires_at: datetime


class WorkerStatus(enum.StrEnum):
    """Whether a worker has been seen lately (``active``) or not (``gone``)."""

    ACTIVE = "active"
    GONE = "gone"


class WorkerInfo(_Resource):
    """A worker the server has seen claim: what it serves and what it holds now."""

    worker_id: str
    queues: list[str]
    actions: list[str]
    first_seen_at: datetime
    last_seen_at: datetime
    in_flight: int
    status: WorkerStatus


class QueueStats(_Resource):
    """One queue's work: attempts waiting, attempts running, and the oldest wait."""

    queue: str
    queued: int
    running: int
    oldest_queued_age_seconds: float | None


class QueueList(_Resource):
    """Every queue with work or history (not paged)."""

    items: list[QueueStats]


class ReplicaShare(_Resource):
    """A live replica and how many shards it owns (in :class:`ServiceStatus`)."""

    replica_id: str
    shards_owned: int


class ServiceStatus(_Resource):
    """The service at a glance (``GET /status``, SPEC §12): what ``workload status`` shows."""

    status: str
    """``ready``, or why not (``starting``, ``stopping``, ``failed``)."""
    role: str
    """``leader`` (the answering process holds the coordinator lock), ``standby``, or
    ``replica`` (one of the replicas that all execute, SPEC §16)."""
    epoch: int | None
    """The coordinator epoch (SPEC §14), or None where epochs do not exist."""
    runs_active: int
    workers_active: int
    approvals_pending: int
    queues: list[QueueStats]
    replica_id: str | None = None
    """The answering process's replica id, if it is a replica (SPEC §16)."""
    shards_total: int | None = None
    """The database's number of shards (None from servers older than replicas)."""
    replicas: list[ReplicaShare] = Field(default_factory=list)
    """The live replicas (or the coordinator leading alone) and how many shards each owns."""


class ClusterMember(_Resource):
    """A live replica and the shards it owns (SPEC §16)."""

    replica_id: str
    shards: list[int]
    started_at: datetime
    last_seen_at: datetime


class Cluster(_Resource):
    """The live replicas and their shards (``GET /cluster``, SPEC §16).

    A coordinator leading alone is the one member, owning every shard.
    """

    shards_total: int
    replicas: list[ClusterMember]


class Page(_Resource, Generic[T]):
    """One page of a listing; pass ``next_cursor`` back as ``cursor`` for the next one."""

    items: list[T]
    next_cursor: str | None
