"""Ports: what the core needs from the outside world, as small Protocols.

Adapters: the engine package ships ``InMemoryStore``, ``FakeClock``, ``SystemClock`` and
``MockExecutor``; the PostgreSQL package ships the database ``Store`` and ``CoordinatorLock``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from workload_domain.cursors import Page
from workload_domain.idempotency import IdempotencyClaim, IdempotencyRecord, Outcome, Replayed
from workload_domain.jsonvalues import JsonObject
from workload_domain.leases import LeasedAttempt
from workload_domain.model import (
    AttemptRecord,
    EventRecord,
    ExecutorRequest,
    ExecutorResult,
    NewRun,
    RunCommit,
    RunRecord,
    RunSnapshot,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.statuses import RunStatus
from workload_domain.workers import Claim, ClaimedAttempt, QueueStats, WorkerRecord

__all__ = [
    "Clock",
    "CoordinatorLock",
    "ExecutionStore",
    "Executor",
    "IdempotencyStore",
    "Resource",
    "RunReads",
    "SecretStore",
    "Store",
    "WorkerStore",
    "WorkflowStore",
]


class Clock(Protocol):
    """Time: the current instant, and waiting until an instant."""

    def now(self) -> datetime:
        """Return the current time, timezone-aware UTC."""
        ...

    async def sleep_until(self, deadline: datetime) -> None:
        """Return once ``deadline`` has passed (at once if it already has); cancellable."""
        ...


class Executor(Protocol):
    """Executes one attempt of a task. Cancellation (anyio) must stop it promptly.

    An executor runs in the coordinator's process; the actions it executes are *local*. Every
    other action is *remote*: its attempts wait in a queue for a worker (SPEC §10).
    """

    @property
    def actions(self) -> frozenset[str]:
        """The actions this executor executes."""
        ...

    async def execute(self, request: ExecutorRequest) -> ExecutorResult:
        """Execute the attempt and report its outcome; failures are results, not exceptions."""
        ...


class Resource(Protocol):
    """Something with connections to open before use and to close after (a lifecycle)."""

    async def open(self) -> None:
        """Connect and check that the resource can be used; raise ``SystemFault`` if not."""
        ...

    async def close(self) -> None:
        """Release every connection (idempotent)."""
        ...


class CoordinatorLock(Protocol):
    """The lock that makes one process the only coordinator of a database."""

    async def acquire(self) -> bool:
        """Try to take the lock at once; ``False`` if another coordinator holds it."""
        ...

    async def check(self) -> None:
        """Prove the lock is still held; raise :class:`~workload_domain.errors.LockLost`."""
        ...

    async def release(self) -> None:
        """Give the lock up (idempotent)."""
        ...


class WorkflowStore(Protocol):
    """Workflows and their immutable versions."""

    async def create_workflow(
        self,
        workflow: WorkflowRecord,
        version: VersionRecord,
        idempotency: IdempotencyRecord | None = None,
    ) -> VersionRecord | Replayed:
        """Create a workflow and its version 1; ``WorkflowExists`` if the id is taken."""
        ...

    async def create_version(
        self,
        version: VersionRecord,
        description: str,
        idempotency: IdempotencyRecord | None = None,
    ) -> VersionRecord | Replayed:
        """Add ``version`` as the workflow's next one and set its description.

        Raises:
            WorkflowNotFound: there is no such workflow.
            VersionTaken: ``version.version`` is not ``latest + 1`` (another version was
                created meanwhile); nothing was written.
        """
        ...

    async def get_workflow(self, workflow_id: str) -> WorkflowRecord:
        """Return a workflow; ``WorkflowNotFound`` if absent."""
        ...

    async def get_version(self, workflow_id: str, version: int) -> VersionRecord:
        """Return a version; ``WorkflowNotFound`` or ``VersionNotFound`` if absent."""
        ...

    async def page_workflows(self, cursor: str | None, limit: int) -> Page[WorkflowRecord]:
        """Workflows in ``(created_at, workflow_id)`` order."""
        ...

    async def page_versions(
        self, workflow_id: str, cursor: str | None, limit: int
    ) -> Page[VersionRecord]:
        """A workflow's versions by number; ``WorkflowNotFound`` if absent."""
        ...


class ExecutionStore(Protocol):
    """What executing runs needs: create, load and commit runs; find unfinished ones."""

    async def get_version(self, workflow_id: str, version: int) -> VersionRecord:
        """Return a version; ``WorkflowNotFound`` or ``VersionNotFound`` if absent."""
        ...

    async def create_run(
        self, new_run: NewRun, idempotency: IdempotencyRecord | None = None
    ) -> RunRecord | Replayed:
        """Write the run, its tasks, its first events (and the idempotency record) atomically."""
        ...

    async def load_run(self, run_id: str) -> RunSnapshot:
        """Read a run, its tasks and running attempts consistently; ``RunNotFound``."""
        ...

    async def commit(
        self, commit: RunCommit, idempotency: IdempotencyRecord | None = None
    ) -> Replayed | None:
        """Apply ``commit`` atomically; ``RevisionConflict`` (nothing written) if stale."""
        ...

    async def list_unfinished_runs(self, after: str | None, limit: int) -> Sequence[str]:
        """Return ids of non-terminal runs in id order, after ``after``, at most ``limit``."""
        ...

    async def runs_with_running_attempts(self, actions: Collection[str]) -> Sequence[str]:
        """Ids of runs with an attempt of one of ``actions`` still ``running``.

        Asked at start-up with the in-process actions: those attempts were left by a stopped
        coordinator (remote ones keep their leases across a restart).
        """
        ...


class IdempotencyStore(Protocol):
    """Outcomes of idempotent writes, scoped to a principal."""

    async def find_outcome(self, claim: IdempotencyClaim) -> Outcome | None:
        """The stored outcome for this claim's key, if any.

        Raises ``IdempotencyKeyReused`` if the key was used for another request.
        """
        ...

    async def save_outcome(self, record: IdempotencyRecord) -> Replayed | None:
        """Record the outcome of a request that wrote nothing else.

        Returns the stored outcome instead when the key was already used for this request;
        raises ``IdempotencyKeyReused`` when it was used for another.
        """
        ...

    async def purge_outcomes(self, older_than: datetime) -> int:
        """Delete records created before ``older_than``; return how many."""
        ...


class RunReads(Protocol):
    """Reads of a run's state and history, in the orders of the API."""

    async def get_run(self, run_id: str) -> RunRecord:
        """Return the run row; ``RunNotFound`` if absent."""
        ...

    async def get_run_with_counts(self, run_id: str) -> tuple[RunRecord, Mapping[str, int]]:
        """The run row and its task counts by status, in one read; ``RunNotFound``."""
        ...

    async def get_task(self, run_id: str, task_key: str) -> TaskRecord:
        """Return one task; ``RunNotFound`` / ``TaskNotFound``."""
        ...

    async def task_counts(self, run_ids: Sequence[str]) -> Mapping[str, Mapping[str, int]]:
        """For each run id, how many of its tasks are in each status (absent: zero)."""
        ...

    async def list_tasks(self, run_id: str) -> Sequence[TaskRecord]:
        """Return the run's tasks in definition order; ``RunNotFound`` if absent."""
        ...

    async def list_attempts(self, run_id: str, task_key: str) -> Sequence[AttemptRecord]:
        """Return a task's attempts by number; ``RunNotFound`` / ``TaskNotFound``."""
        ...

    async def list_events(
        self, run_id: str, after_sequence: int = 0, limit: int | None = None
    ) -> Sequence[EventRecord]:
        """Return events with ``sequence > after_sequence`` in order; ``RunNotFound``."""
        ...

    async def count_active_runs(self, workflow_id: str | None) -> Mapping[str, int]:
        """How many unfinished runs are in each status (absent: none), optionally of a workflow.

        Bounded by the unfinished runs, whatever the history (the console's live counts).
        """
        ...

    async def list_run_attempts(self, run_id: str, limit: int) -> Sequence[AttemptRecord]:
        """Every attempt of every task of a run, by ``(task_key, attempt)``, at most ``limit``.

        ``RunNotFound`` if absent. (The web console's timeline: one read, not one per task.)
        """
        ...

    async def page_runs(
        self,
        workflow_id: str | None,
        status: RunStatus | None,
        cursor: str | None,
        limit: int,
    ) -> Page[RunRecord]:
        """Runs in ``(created_at, run_id)`` order, optionally filtered."""
        ...

    async def page_tasks(self, run_id: str, cursor: str | None, limit: int) -> Page[TaskRecord]:
        """A run's tasks in definition order; ``RunNotFound``."""
        ...

    async def page_attempts(
        self, run_id: str, task_key: str, cursor: str | None, limit: int
    ) -> Page[AttemptRecord]:
        """A task's attempts by number; ``RunNotFound`` / ``TaskNotFound``."""
        ...

    async def page_events(self, run_id: str, cursor: str | None, limit: int) -> Page[EventRecord]:
        """A run's events by sequence; ``RunNotFound``."""
        ...


class WorkerStore(Protocol):
    """Remote attempts (SPEC §10): claims under leases, heartbeats, expiry; workers, queues.

    Claims and heartbeats are written by the store itself, atomically, because they must hold
    under concurrent claimers (``FOR UPDATE SKIP LOCKED``); outcomes of remote attempts are
    ordinary revision-checked commits.
    """

    async def claim(self, claim: Claim, now: datetime) -> Sequence[ClaimedAttempt]:
        """Hand out up to ``len(claim.token_digests)`` queued attempts, oldest first.

        Each becomes ``running`` under its lease (``attempt.started``, one commit per run:
        revision + 1); the worker is recorded as seen. Never hands an attempt to two claimers.
        """
        ...

    async def find_attempt(self, attempt_id: str) -> LeasedAttempt | None:
        """An attempt by id, with its run and its lease token's digest (None: unknown)."""
        ...

    async def heartbeat(
        self, attempt_id: str, token_digest: str, now: datetime, progress: JsonObject | None
    ) -> datetime | None:
        """Renew a held lease (and record ``progress``); return the new expiry.

        None when the lease is not held at ``now`` (another token, not running, expired, or
        timed out): nothing is written.
        """
        ...

    async def due_attempts(self, now: datetime, limit: int) -> Sequence[tuple[str, str, int]]:
        """Remote attempts whose lease, start-to-close or schedule-to-start time has passed.

        ``(run_id, task_key, attempt)``, at most ``limit``, oldest deadline first.
        """
        ...

    async def page_workers(self, cursor: str | None, limit: int) -> Page[WorkerRecord]:
        """Workers in ``worker_id`` order."""
        ...

    async def queue_stats(self) -> Sequence[QueueStats]:
        """Every queue that has (or had) remote attempts, by name."""
        ...


class SecretStore(Protocol):
    """Secrets the service keeps across restarts (cursor keys, the console's session key)."""

    async def secret(self, name: str) -> bytes:
        """The random secret (32 bytes or more) kept under ``name``, made on first use."""
        ...


class Store(
    WorkflowStore,
    ExecutionStore,
    IdempotencyStore,
    RunReads,
    WorkerStore,
    SecretStore,
    Resource,
    Protocol,
):
    """The whole persistence port: every adapter implements all of it."""
