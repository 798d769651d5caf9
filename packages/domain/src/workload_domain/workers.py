"""Workers and queues (SPEC §10): what a claim asks for and hands out, and what is listed.

A worker is known by the ``worker_id`` it chooses; the store records the queues and actions of
its last claim and when it was first and last seen. It is ``active`` while it was seen within
:data:`WORKER_ACTIVE_WINDOW` (long enough to cover a claim's longest wait) or holds work under
a lease, ``gone`` after.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from workload_domain.jsonvalues import JsonObject

__all__ = [
    "ACTION_NAME_PATTERN",
    "ERROR_CODE_PATTERN",
    "MAX_CLAIM_ACTIONS",
    "MAX_CLAIM_ATTEMPTS",
    "MAX_CLAIM_WAIT_SECONDS",
    "MAX_PROGRESS_BYTES",
    "SEEN_SECONDS",
    "WORKER_ACTIVE_WINDOW",
    "WORKER_ID_PATTERN",
    "WORKER_RETENTION",
    "Activity",
    "Claim",
    "ClaimedAttempt",
    "QueueStats",
    "WorkerRecord",
    "still_claimable",
    "worker_status",
]

WORKER_ID_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"
ACTION_NAME_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
"""An action a claim may name (ADR 0023): a token, never text. A definition's action may be any
1-128 characters (SPEC §3), but only one of these can be served by a worker."""
MAX_CLAIM_ACTIONS = 256
"""The most actions one claim may name (ADR 0023)."""
ERROR_CODE_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
"""An error code a worker may report (ADR 0023): a token, shown as is by every client."""
WORKER_RETENTION = timedelta(days=7)
"""A worker not seen for this long is forgotten (ADR 0023): it leaves ``GET /workers`` and the
actions a draft is told of. Longer than any lease or start-to-close time (at most 24 h)."""
MAX_CLAIM_ATTEMPTS = 100
MAX_CLAIM_WAIT_SECONDS = 50
MAX_PROGRESS_BYTES = 64 * 1024
SEEN_SECONDS = 5.0
"""An idle worker's claims record it at most this often (a claim that finds nothing writes
nothing otherwise): far inside :data:`WORKER_ACTIVE_WINDOW`."""
WORKER_ACTIVE_WINDOW = timedelta(seconds=90)
"""A worker seen within this window is ``active``: a claim waits at most 50 s. (One holding
work is active whenever it was seen: its heartbeats come every ⅓ of a lease, which may be
longer than this.)"""


@dataclass(frozen=True, slots=True)
class Claim:
    """A worker's request for work: which queues and actions, how many attempts at most."""

    worker_id: str
    queues: tuple[str, ...]
    actions: tuple[str, ...]
    max_attempts: int
    token_digests: tuple[str, ...]
    """One digest per attempt it may receive, in order (the tokens themselves go to the
    worker, never to the store)."""
    record_seen: bool = True
    """Record the worker as seen (at most every :data:`SEEN_SECONDS`) even if nothing is
    claimed. False for a long-poll's looks after a wake-up: those write only what they claim."""


@dataclass(frozen=True, slots=True)
class ClaimedAttempt:
    """An attempt a claim handed out, with everything its worker needs to execute it."""

    attempt_id: str
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
    lease_expires_at: datetime
    timeout_at: datetime
    heartbeat_timeout_seconds: float
    token_index: int
    """Which of the claim's ``token_digests`` this attempt's lease is under."""
    kind: str = "task"
    """``task``, or ``tool_call`` for an agent's tool call (SPEC §11)."""
    tool_call_id: str | None = None
    tool: str | None = None
    arguments: JsonObject | None = None
    queued_at: datetime | None = None
    """When the attempt was queued (its ``started_at``): the claim's schedule-to-start time is
    measured from it."""
    traceparent: str | None = None
    """The trace context stored with the run (SPEC §12), or None."""


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """A worker as last seen, and how many attempts it holds now."""

    worker_id: str
    queues: tuple[str, ...]
    actions: tuple[str, ...]
    first_seen_at: datetime
    last_seen_at: datetime
    in_flight: int


@dataclass(frozen=True, slots=True)
class QueueStats:
    """A queue's queued and running (remote) attempts, and its oldest queued attempt."""

    queue: str
    queued: int
    running: int
    oldest_queued_at: datetime | None


@dataclass(frozen=True, slots=True)
class Activity:
    """What the service has going on now, counted by the store (``/metrics``, ``/status``)."""

    runs_active: int
    """Runs not yet terminal (``pending``, ``running``, ``waiting_retry``)."""
    workers_active: int
    """Workers seen within :data:`WORKER_ACTIVE_WINDOW`, or holding work (:func:`worker_status`)."""
    approvals_pending: int
    """Approvals waiting for a decision (SPEC §11)."""
    oldest_approval_requested_at: datetime | None = None
    """When the approval waiting longest was asked for (None: none waits)."""


def worker_status(worker: WorkerRecord, now: datetime) -> str:
    """``active`` or ``gone`` (see :data:`WORKER_ACTIVE_WINDOW`).

    A worker holding work is active however long ago it was seen: it heartbeats every third of
    its heartbeat timeout, which may be longer than the window, and if it died its leases run
    out and it holds nothing.
    """
    if worker.in_flight > 0:
        return "active"
    return "active" if now - worker.last_seen_at <= WORKER_ACTIVE_WINDOW else "gone"


def still_claimable(
    now: datetime, schedule_deadline: datetime | None, deadline: datetime | None = None
) -> bool:
    """Whether queued work may still be handed to a worker at ``now``.

    Not once its ``schedule_to_start_timeout_seconds`` has run out (SPEC §10: it fails
    ``schedule_to_start_timed_out``), nor, for an agent's tool call, once its attempt's deadline
    has passed: the lease reaper ends such work, and a claim in between must not take it.
    """
    if schedule_deadline is not None and schedule_deadline <= now:
        return False
    return deadline is None or deadline > now
