"""The execution store port: the writes that move runs, tasks and attempts."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

from workload_domain.idempotency import (
    IdempotencyRecord,
    Replayed,
)
from workload_domain.records import (
    NewRun,
    RunCommit,
    RunRecord,
    RunSnapshot,
    VersionRecord,
)

__all__ = ["ExecutionStore"]


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

    async def list_unfinished_runs(
        self, after: str | None, limit: int, shards: Collection[int] | None = None
    ) -> Sequence[str]:
        """Return ids of non-terminal runs in id order, after ``after``, at most ``limit``.

        ``shards``: only the runs of these shards (SPEC §16); None: every run.
        """
        ...

    async def runs_with_running_attempts(
        self, actions: Collection[str], shards: Collection[int] | None = None
    ) -> Sequence[str]:
        """Ids of runs with an attempt of one of ``actions`` still ``running``.

        Asked at start-up (or when a replica takes shards over: only those ``shards``) with the
        in-process actions: those attempts were left by a stopped coordinator or replica
        (remote ones keep their leases across a restart).
        """
        ...
