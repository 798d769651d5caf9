"""Ports: what the core needs from the outside world, as small Protocols.

Adapters: the engine package ships ``InMemoryStore``, ``FakeClock``, ``SystemClock`` and
``MockExecutor``; the PostgreSQL package ships the database ``Store`` and ``CoordinatorLock``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

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

__all__ = [
    "Clock",
    "CoordinatorLock",
    "ExecutionStore",
    "Executor",
    "RunReads",
    "Store",
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
    """Executes one attempt of a task. Cancellation (anyio) must stop it promptly."""

    async def execute(self, request: ExecutorRequest) -> ExecutorResult:
        """Execute the attempt and report its outcome; failures are results, not exceptions."""
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

    async def create_workflow(self, workflow: WorkflowRecord, version: VersionRecord) -> None:
        """Create a workflow and its version 1; ``WorkflowExists`` if the id is taken."""
        ...

    async def create_version(
        self,
        workflow_id: str,
        definition_hash: str,
        definition: dict[str, object],
        task_count: int,
        created_at: datetime,
    ) -> VersionRecord:
        """Create version ``latest + 1``; ``WorkflowNotFound`` if there is no such workflow."""
        ...

    async def get_workflow(self, workflow_id: str) -> WorkflowRecord:
        """Return a workflow; ``WorkflowNotFound`` if absent."""
        ...

    async def get_version(self, workflow_id: str, version: int) -> VersionRecord:
        """Return a version; ``WorkflowNotFound`` or ``VersionNotFound`` if absent."""
        ...


class ExecutionStore(Protocol):
    """What executing runs needs: create, load and commit runs; find unfinished ones."""

    async def get_version(self, workflow_id: str, version: int) -> VersionRecord:
        """Return a version; ``WorkflowNotFound`` or ``VersionNotFound`` if absent."""
        ...

    async def create_run(self, new_run: NewRun) -> None:
        """Write the run, its tasks and its first events in one transaction."""
        ...

    async def load_run(self, run_id: str) -> RunSnapshot:
        """Read a run, its tasks and running attempts consistently; ``RunNotFound``."""
        ...

    async def commit(self, commit: RunCommit) -> None:
        """Apply ``commit`` atomically; ``RevisionConflict`` (nothing written) if stale."""
        ...

    async def list_unfinished_runs(self, after: str | None, limit: int) -> Sequence[str]:
        """Return ids of non-terminal runs in id order, after ``after``, at most ``limit``."""
        ...


class RunReads(Protocol):
    """Reads of a run's state and history, in the orders of the API."""

    async def get_run(self, run_id: str) -> RunRecord:
        """Return the run row; ``RunNotFound`` if absent."""
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


class Store(WorkflowStore, ExecutionStore, RunReads, Protocol):
    """The whole persistence port: every adapter implements all of it."""
