"""The worker protocol's models: claims, leases, workers and queues (SPEC §10)."""

from __future__ import annotations

import enum
from datetime import datetime

from pydantic import Field

from workload_sdk.models._common import JsonObject, _Resource

__all__ = [
    "Claim",
    "ClaimedAttempt",
    "Lease",
    "QueueList",
    "QueueStats",
    "WorkerInfo",
    "WorkerStatus",
]


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
