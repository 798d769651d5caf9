"""The state an in-memory store holds, its checks, and how values are copied in and out."""

from __future__ import annotations

import copy
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TypeVar

from workload_domain.cursors import CursorCodec
from workload_domain.errors import RunNotFound, StoreIntegrityError
from workload_domain.idempotency import IdempotencyClaim, Outcome
from workload_domain.model import (
    AttemptRecord,
    EventRecord,
    RunRecord,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.ports import Clock
from workload_domain.statuses import AttemptStatus, TaskStatus
from workload_domain.workers import WorkerRecord
from workload_engine.clock import SystemClock

__all__ = ["MemoryState", "RunData", "check_rows", "copied", "is_canonical_uuid"]

T = TypeVar("T")


def copied(value: T) -> T:
    """A deep copy: callers can never alias stored state."""
    return copy.deepcopy(value)


@dataclass
class RunData:
    """A run and everything that belongs to it."""

    run: RunRecord
    tasks: dict[str, TaskRecord]
    attempts: dict[tuple[str, int], AttemptRecord] = field(default_factory=dict)
    events: list[EventRecord] = field(default_factory=list)


class MemoryState:
    """The tables of an in-memory store (the base of its parts)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._codec = CursorCodec(secrets.token_bytes(32))
        self._secrets: dict[str, bytes] = {}
        self._workflows: dict[str, WorkflowRecord] = {}
        self._versions: dict[tuple[str, int], VersionRecord] = {}
        self._runs: dict[str, RunData] = {}
        self._outcomes: dict[tuple[str, str], tuple[IdempotencyClaim, Outcome, datetime]] = {}
        self._attempt_ids: dict[str, tuple[str, tuple[str, int]]] = {}
        """attempt id → (run id, (task key, attempt number))."""
        self._tokens: dict[str, str] = {}
        """attempt id → the digest of its lease token."""
        self._workers: dict[str, WorkerRecord] = {}
        self._queues: set[str] = set()
        self.commits = 0
        """How many run commits succeeded (for tests that interrupt at a commit point)."""

    def _store_attempt(self, run_id: str, data: RunData, attempt: AttemptRecord) -> None:
        """Insert or update an attempt as a commit does: never its lease fields (§10)."""
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

    def _run(self, run_id: str) -> RunData:
        try:
            return self._runs[run_id]
        except KeyError:
            raise RunNotFound(run_id) from None


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
