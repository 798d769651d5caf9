"""What every part of the in-memory store shares: its tables, their checks, copies in and out."""

from __future__ import annotations

import copy
import secrets
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from workload_domain.agent.journal import StepRecord, StepStatus
from workload_domain.agent.loop import tool_error
from workload_domain.approvals import ApprovalRecord, ApprovalStatus
from workload_domain.console_sessions import ConsoleSession
from workload_domain.cursors import CursorCodec
from workload_domain.drafts import DraftRecord
from workload_domain.errors import RunNotFound, StoreIntegrityError
from workload_domain.idempotency import (
    IdempotencyClaim,
    IdempotencyRecord,
    Outcome,
    PendingRecord,
    Replayed,
    same_request,
)
from workload_domain.jsonvalues import JsonObject
from workload_domain.leases import LeaseLostReason
from workload_domain.ports import Clock
from workload_domain.records import (
    AttemptRecord,
    EventRecord,
    RunRecord,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.shards import DEFAULT_SHARDS
from workload_domain.statuses import AttemptStatus, TaskStatus
from workload_domain.telemetry import NO_TELEMETRY, Telemetry
from workload_domain.usage import Usage
from workload_domain.workers import WorkerRecord

__all__ = ["MemoryState", "RunData", "check_rows", "copied", "is_canonical_uuid", "renew_lease"]

T = TypeVar("T")
Leased = TypeVar("Leased", AttemptRecord, StepRecord)


def _wall_clock() -> datetime:
    """The time when no ``Clock`` is injected (the store never waits, so ``now`` is enough)."""
    return datetime.now(UTC)


def copied(value: T) -> T:
    """A deep copy: callers can never alias stored state."""
    return copy.deepcopy(value)


def renew_lease(
    held: Leased, now: datetime, progress: JsonObject | None
) -> tuple[Leased, datetime] | None:
    """A running remote attempt or tool call with its lease renewed from ``now``, and until when.

    ``progress`` replaces the stored one unless None. None (nothing to write) when the lease is
    not held any more: expired, past the start-to-close timeout, or without a heartbeat timeout.
    The caller checks the token and that ``held`` is running.
    """
    if (
        held.lease_expires_at is None
        or held.lease_expires_at <= now
        or (held.timeout_at is not None and held.timeout_at <= now)
        or held.heartbeat_timeout_seconds is None
    ):
        return None
    expires = now + timedelta(seconds=held.heartbeat_timeout_seconds)
    kept = copied(progress) if progress is not None else held.progress
    return replace(held, lease_expires_at=expires, progress=kept), expires


@dataclass
class RunData:
    """A run and everything that belongs to it."""

    run: RunRecord
    tasks: dict[str, TaskRecord]
    attempts: dict[tuple[str, int], AttemptRecord] = field(default_factory=dict)
    events: list[EventRecord] = field(default_factory=list)


class MemoryState:
    """The tables of an in-memory store (the base of its parts)."""

    def __init__(
        self,
        clock: Clock | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
        shards_total: int = DEFAULT_SHARDS,
    ) -> None:
        self.shards_total = shards_total
        """How runs are split into shards (SPEC §16; one process executes them all here)."""
        self._now: Callable[[], datetime] = _wall_clock if clock is None else clock.now
        """The time written into idempotency records (injected, as the PostgreSQL store's)."""
        self._telemetry = telemetry
        """Told of the remote tool calls a commit closed (as the PostgreSQL store tells it)."""
        self._codec = CursorCodec(secrets.token_bytes(32))
        self._secrets: dict[str, bytes] = {}
        self._console_sessions: dict[str, ConsoleSession] = {}
        """session id → the console session (ADR 0022)."""
        self._workflows: dict[str, WorkflowRecord] = {}
        self._versions: dict[tuple[str, int], VersionRecord] = {}
        self._runs: dict[str, RunData] = {}
        self._outcomes: dict[tuple[str, str], tuple[IdempotencyClaim, Outcome, datetime]] = {}
        self._attempt_ids: dict[str, tuple[str, tuple[str, int]]] = {}
        """attempt id → (run id, (task key, attempt number))."""
        self._tokens: dict[str, str] = {}
        """attempt id → the digest of its lease token."""
        self._journals: dict[tuple[str, str, int], dict[int, StepRecord]] = {}
        """(run id, task key, attempt) → its steps by sequence."""
        self._step_ids: dict[str, tuple[tuple[str, str, int], int]] = {}
        """step id → (its journal's key, its sequence)."""
        self._step_tokens: dict[str, str] = {}
        """step id → the digest of its lease token (remote tool calls)."""
        self._approvals: dict[str, ApprovalRecord] = {}
        self._drafts: dict[str, DraftRecord] = {}
        self._workers: dict[str, WorkerRecord] = {}
        self._queues: set[str] = set()
        self.commits = 0
        """How many run commits succeeded (for tests that interrupt at a commit point)."""

    def _store_attempt(
        self, run_id: str, data: RunData, attempt: AttemptRecord
    ) -> list[StepRecord]:
        """Insert or update an attempt as a commit does: never its lease fields (§10).

        The remote tool calls its end closed, if it ended.
        """
        key = (attempt.task_key, attempt.attempt)
        stored = data.attempts.get(key)
        if stored is not None:
            attempt = replace(
                attempt,
                worker_id=stored.worker_id,
                claimed_at=stored.claimed_at,
                lease_expires_at=stored.lease_expires_at,
                timeout_at=stored.timeout_at,
                progress=stored.progress,
            )
        data.attempts[key] = copied(attempt)
        self._attempt_ids[attempt.attempt_id] = (run_id, key)
        if attempt.status is AttemptStatus.QUEUED:
            self._queues.add(attempt.queue)
        if not attempt.status.is_live:
            return self._close_steps(run_id, data, attempt)
        return []

    def _store_approval(self, approval: ApprovalRecord) -> None:
        """Ask for an approval, or decide one that is pending (as ``upsert_approval``)."""
        stored = self._approvals.get(approval.approval_id)
        if stored is None or stored.status is ApprovalStatus.PENDING:
            self._approvals[approval.approval_id] = copied(approval)

    def _live_approvals(self, run_id: str, data: RunData) -> tuple[ApprovalRecord, ...]:
        live = {key for key, a in data.attempts.items() if a.status.is_live}
        return tuple(
            copied(a)
            for a in self._approvals.values()
            if a.run_id == run_id and (a.task_key, a.attempt) in live
        )

    def _close_steps(self, run_id: str, data: RunData, attempt: AttemptRecord) -> list[StepRecord]:
        """An attempt ended: its running steps end ``failed`` (their workers learn it).

        The remote tool calls among them, as ended.
        """
        closed: list[StepRecord] = []
        journal = self._journals.get((run_id, attempt.task_key, attempt.attempt), {})
        # What the tool call's worker is told at its next report: why its attempt ended.
        reason = _CLOSED_BY.get(attempt.status, LeaseLostReason.FINISHED)
        for sequence, step in list(journal.items()):
            if step.status is StepStatus.RUNNING:
                ended = replace(
                    step,
                    status=StepStatus.FAILED,
                    finished_at=attempt.finished_at,
                    response=tool_error(f"the attempt ended ({attempt.status.value})"),
                    lease_end=reason.value,
                )
                journal[sequence] = ended
                self._add_usage(data, step.task_key, ended.usage_added())
                if ended.remote:
                    closed.append(copied(ended))
        return closed

    def _add_usage(self, data: RunData, task_key: str, usage: Usage) -> None:
        task = data.tasks[task_key]
        data.tasks[task_key] = replace(task, usage=task.usage + usage)
        data.run = replace(data.run, usage=data.run.usage + usage)

    def _replayed(self, record: IdempotencyRecord | PendingRecord[Any] | None) -> Replayed | None:
        if record is None:
            return None
        claim = record.claim
        stored = self._outcomes.get((claim.principal, claim.key))
        if stored is None:
            return None
        same_request(stored[0], claim)
        return Replayed(copied(stored[1]))

    def _remember(self, record: IdempotencyRecord | None) -> None:
        if record is not None:
            claim = record.claim
            self._outcomes[(claim.principal, claim.key)] = (
                claim,
                copied(record.outcome),
                self._now(),
            )

    def _run(self, run_id: str) -> RunData:
        try:
            return self._runs[run_id]
        except KeyError:
            raise RunNotFound(run_id) from None


_CLOSED_BY = {
    AttemptStatus.CANCELED: LeaseLostReason.CANCELED,
    AttemptStatus.TIMED_OUT: LeaseLostReason.TIMED_OUT,
}


def is_canonical_uuid(value: str) -> bool:
    """Whether ``value`` is a UUID in its canonical spelling (as run ids are)."""
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def check_rows(
    run: RunRecord, tasks: Sequence[TaskRecord], attempts: Sequence[AttemptRecord]
) -> None:
    """The CHECK constraints of the PostgreSQL schema, so this store refuses what it refuses."""
    if run.status.is_terminal != (run.finished_at is not None):
        raise StoreIntegrityError("a run has finished_at exactly when it is terminal")
    for task in tasks:
        if (task.status is TaskStatus.WAITING_RETRY) != (task.next_attempt_at is not None):
            raise StoreIntegrityError("a task has next_attempt_at exactly when waiting to retry")
        if not 0 <= task.attempt_count <= task.max_attempts:
            raise StoreIntegrityError("attempt_count must be within 0..max_attempts")
    for attempt in attempts:
        if attempt.status.is_live != (attempt.finished_at is None):
            raise StoreIntegrityError("an attempt has finished_at exactly when it ended")
        if not is_canonical_uuid(attempt.attempt_id):
            raise StoreIntegrityError("an attempt has a canonical UUID as its id")
