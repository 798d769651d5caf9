"""The state an in-memory store holds, its checks, and how values are copied in and out."""

from __future__ import annotations

import copy
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
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
        self._workflows: dict[str, WorkflowRecord] = {}
        self._versions: dict[tuple[str, int], VersionRecord] = {}
        self._runs: dict[str, RunData] = {}
        self._outcomes: dict[tuple[str, str], tuple[IdempotencyClaim, Outcome, datetime]] = {}
        self.commits = 0
        """How many run commits succeeded (for tests that interrupt at a commit point)."""

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
        if (attempt.status is AttemptStatus.RUNNING) != (attempt.finished_at is None):
            raise StoreIntegrityError("an attempt has finished_at exactly when it ended")
