"""The worker protocol's bodies: claims, leases, reports, workers and queues (SPEC §10)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from workload_api.schemas._common import JsonObject, _In, _Out
from workload_api.schemas.runs import Attempt
from workload_domain.definition import QUEUE_PATTERN
from workload_domain.workers import (
    ACTION_NAME_PATTERN,
    ERROR_CODE_PATTERN,
    MAX_CLAIM_ACTIONS,
    MAX_CLAIM_ATTEMPTS,
    MAX_CLAIM_WAIT_SECONDS,
    WORKER_ID_PATTERN,
)

__all__ = [
    "ActionName",
    "ClaimItem",
    "ClaimRequest",
    "ClaimResponse",
    "CompleteRequest",
    "ErrorIn",
    "FailRequest",
    "HeartbeatRequest",
    "Lease",
    "QueueItem",
    "QueueName",
    "Queues",
    "ToolCallReport",
    "Worker",
    "WorkerName",
]


_FENCING_NOTE = (
    "the claim's lease_token; any other string (empty, too long, another attempt's) is "
    "answered 409 lease_lost, reason unknown (SPEC §10)"
)


class ToolCallReport(Attempt):
    """The answer to a worker's report of an agent's tool call: the call as an attempt."""

    kind: str = Field(description='"tool_call"')
    task_key: str
    sequence: int
    tool_call_id: str | None


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
