"""An in-memory ``Store`` with the transactional semantics of the PostgreSQL one.

Every write validates everything first and then applies all of it without an ``await`` in
between, so it is all-or-nothing and atomic with respect to other tasks, like a database
transaction. Commits are conditioned on the run's revision exactly like
``UPDATE … WHERE revision = $expected``. JSON values are copied in and out, so callers can never
alias stored state.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

import anyio

from workload_domain.errors import (
    Fenced,
    RevisionConflict,
    StoreIntegrityError,
    VersionNotFound,
    WorkflowExists,
    WorkflowNotFound,
)
from workload_domain.idempotency import (
    IdempotencyClaim,
    IdempotencyRecord,
    Outcome,
    PendingRecord,
    Replayed,
    same_request,
)
from workload_domain.records import (
    AppliedVersion,
    NewRun,
    NewVersion,
    RunCommit,
    RunRecord,
    RunSnapshot,
    VersionRecord,
    WorkflowRecord,
    check_sequences,
)
from workload_domain.shards import Member, shard_of
from workload_domain.statuses import AttemptStatus
from workload_engine._memory_approvals import MemoryApprovals
from workload_engine._memory_drafts import MemoryDrafts
from workload_engine._memory_reads import MemoryReads
from workload_engine._memory_retention import MemoryRetention
from workload_engine._memory_sessions import MemorySessions
from workload_engine._memory_state import RunData, check_rows, copied, is_canonical_uuid
from workload_engine._memory_workers import MemoryWorkers

__all__ = ["InMemoryStore", "StoreIntegrityError"]


class InMemoryStore(
    MemoryReads, MemoryWorkers, MemoryApprovals, MemoryDrafts, MemorySessions, MemoryRetention
):
    """The whole ``Store`` port in process memory (tests, ``run-local``).

    Its parts: :class:`~workload_engine._memory_state.MemoryState` (the tables and the checks
    the PostgreSQL schema makes), :class:`~workload_engine._memory_reads.MemoryReads` (reads
    and pages), :class:`~workload_engine._memory_workers.MemoryWorkers` (claims, leases,
    workers, queues), :class:`~workload_engine._memory_journal.MemoryJournal` (agent steps),
    :class:`~workload_engine._memory_sessions.MemorySessions` (console sessions),
    :class:`~workload_engine._memory_retention.MemoryRetention` (run retention) and this class
    (writes and idempotency).
    """

    async def open(self) -> None:
        """Nothing to connect to."""
        await anyio.lowlevel.checkpoint()

    async def close(self) -> None:
        """Nothing to release."""
        await anyio.lowlevel.checkpoint()

    def fence(self, epoch: int | None, on_fenced: Callable[[Fenced], None] | None = None) -> None:
        """One process per store: nothing to fence (SPEC §14 needs a shared database)."""

    def announce(self, enabled: bool) -> None:
        """One process per store: nobody to announce to."""

    def shard_notices(self, shards_total: int) -> None:
        """One process per store: nobody to announce to."""

    async def secret(self, name: str) -> bytes:
        """A random secret per name, kept as long as this store (this process)."""
        await anyio.lowlevel.checkpoint()
        return self._secrets.setdefault(name, secrets.token_bytes(32))

    # -- workflows ---------------------------------------------------------------------------

    async def create_workflow(
        self,
        workflow: WorkflowRecord,
        version: VersionRecord,
        idempotency: IdempotencyRecord | None = None,
    ) -> VersionRecord | Replayed:
        """Create a workflow and its version 1."""
        await anyio.lowlevel.checkpoint()
        if (replayed := self._replayed(idempotency)) is not None:
            return replayed
        if workflow.workflow_id in self._workflows:
            raise WorkflowExists(workflow.workflow_id)
        if version.version != 1 or workflow.latest_version != 1:
            raise StoreIntegrityError("a new workflow starts at version 1")
        self._workflows[workflow.workflow_id] = workflow
        self._versions[(workflow.workflow_id, 1)] = copied(version)
        self._remember(idempotency)
        return copied(version)

    async def create_version(
        self,
        version: NewVersion,
        idempotency: PendingRecord[VersionRecord] | None = None,
    ) -> VersionRecord | Replayed:
        """Add ``version`` as the workflow's next one (no ``await`` between read and write)."""
        await anyio.lowlevel.checkpoint()
        if (replayed := self._replayed(idempotency)) is not None:
            return replayed
        workflow = self._workflows.get(version.workflow_id)
        if workflow is None:
            raise WorkflowNotFound(version.workflow_id)
        numbered = version.numbered(workflow.latest_version + 1)
        self._workflows[version.workflow_id] = replace(
            workflow,
            latest_version=numbered.version,
            updated_at=version.created_at,
            description=version.description,
        )
        self._versions[(version.workflow_id, numbered.version)] = copied(numbered)
        self._remember(None if idempotency is None else idempotency.record(numbered))
        return copied(numbered)

    async def apply_version(
        self,
        version: NewVersion,
        idempotency: PendingRecord[AppliedVersion] | None = None,
    ) -> AppliedVersion | Replayed:
        """Make ``version`` the latest unless the latest has its definition (see the port)."""
        await anyio.lowlevel.checkpoint()
        if (replayed := self._replayed(idempotency)) is not None:
            return replayed
        workflow_id = version.workflow_id
        workflow = self._workflows.get(workflow_id)
        if workflow is None:
            numbered = version.numbered(1)
            at = version.created_at
            self._workflows[workflow_id] = WorkflowRecord(
                workflow_id, 1, version.description, at, at
            )
            applied = AppliedVersion(numbered, created=True)
        else:
            latest = self._versions[(workflow_id, workflow.latest_version)]
            if latest.definition_hash == version.definition_hash:
                applied = AppliedVersion(copied(latest), created=False)
            else:
                numbered = version.numbered(workflow.latest_version + 1)
                self._workflows[workflow_id] = replace(
                    workflow,
                    latest_version=numbered.version,
                    updated_at=version.created_at,
                    description=version.description,
                )
                applied = AppliedVersion(numbered, created=True)
        if applied.created:
            stored = applied.version
            self._versions[(workflow_id, stored.version)] = copied(stored)
        self._remember(None if idempotency is None else idempotency.record(applied))
        return AppliedVersion(copied(applied.version), applied.created)

    async def get_workflow(self, workflow_id: str) -> WorkflowRecord:
        """Return a workflow."""
        await anyio.lowlevel.checkpoint()
        try:
            return self._workflows[workflow_id]
        except KeyError:
            raise WorkflowNotFound(workflow_id) from None

    async def get_version(self, workflow_id: str, version: int) -> VersionRecord:
        """Return one version with its definition."""
        await anyio.lowlevel.checkpoint()
        if workflow_id not in self._workflows:
            raise WorkflowNotFound(workflow_id)
        try:
            return copied(self._versions[(workflow_id, version)])
        except KeyError:
            raise VersionNotFound(workflow_id, version) from None

    # -- execution ---------------------------------------------------------------------------

    async def create_run(
        self, new_run: NewRun, idempotency: IdempotencyRecord | None = None
    ) -> RunRecord | Replayed:
        """Write the run, its tasks and its first events atomically."""
        await anyio.lowlevel.checkpoint()
        if (replayed := self._replayed(idempotency)) is not None:
            return replayed
        run = new_run.run
        if not is_canonical_uuid(run.run_id):
            raise StoreIntegrityError(f"run ids are canonical UUIDs, not {run.run_id!r}")
        if run.run_id in self._runs:
            raise StoreIntegrityError(f"run {run.run_id!r} already exists")
        if (run.workflow_id, run.version) not in self._versions:
            raise VersionNotFound(run.workflow_id, run.version)
        if run.revision != 1:
            raise StoreIntegrityError("a new run starts at revision 1")
        keys = [t.task_key for t in new_run.tasks]
        if len(set(keys)) != len(keys):
            raise StoreIntegrityError("duplicate task keys")
        check_sequences(new_run.events, 0)
        check_rows(run, new_run.tasks, ())
        self._runs[run.run_id] = RunData(
            run=copied(run),
            tasks={t.task_key: t for t in new_run.tasks},
            events=list(copied(new_run.events)),
        )
        self._remember(idempotency)
        return copied(run)

    async def load_run(self, run_id: str) -> RunSnapshot:
        """Read the run, its tasks and its running attempts."""
        await anyio.lowlevel.checkpoint()
        data = self._run(run_id)
        return RunSnapshot(
            run=copied(data.run),
            tasks=tuple(sorted(data.tasks.values(), key=lambda t: t.position)),
            live_attempts=tuple(a for a in data.attempts.values() if a.status.is_live),
            last_sequence=len(data.events),
            approvals=self._live_approvals(run_id, data),
        )

    async def commit(
        self, commit: RunCommit, idempotency: IdempotencyRecord | None = None
    ) -> Replayed | None:
        """Apply a run transition if the run is still at the expected revision."""
        await anyio.lowlevel.checkpoint()
        data = self._run(commit.run.run_id)
        if (replayed := self._replayed(idempotency)) is not None:
            return replayed
        if data.run.revision != commit.expected_revision:
            raise RevisionConflict(commit.run.run_id, commit.expected_revision)
        if commit.run.revision != commit.expected_revision + 1:
            raise StoreIntegrityError("a commit raises the revision by exactly one")
        for task in commit.tasks:
            if task.task_key not in data.tasks:
                raise StoreIntegrityError(f"unknown task {task.task_key!r}")
        for attempt in commit.attempts:
            if attempt.task_key not in data.tasks:
                raise StoreIntegrityError(f"attempt of unknown task {attempt.task_key!r}")
        for approval in commit.approvals:
            key = (approval.task_key, approval.attempt)
            if approval.run_id != commit.run.run_id or (
                key not in data.attempts
                and key not in {(a.task_key, a.attempt) for a in commit.attempts}
            ):
                raise StoreIntegrityError("an approval belongs to an attempt of its run")
        check_sequences(commit.events, len(data.events))
        check_rows(commit.run, commit.tasks, commit.attempts)
        # Everything is valid: apply all of it with no await in between.
        # Usage is the journal's to write, never a commit's (its snapshot may be older).
        data.run = replace(copied(commit.run), usage=data.run.usage)
        for task in commit.tasks:
            stored = data.tasks[task.task_key]
            data.tasks[task.task_key] = replace(copied(task), usage=stored.usage)
        closed = [
            (step, attempt)
            for attempt in commit.attempts
            for step in self._store_attempt(commit.run.run_id, data, attempt)
        ]
        for approval in commit.approvals:
            self._store_approval(approval)
        data.events.extend(copied(commit.events))
        self.commits += 1
        self._remember(idempotency)
        for step, attempt in closed:  # ended by this commit, once (SPEC §12)
            self._telemetry.tool_call_ended(step, closed_by=attempt)
        return None

    async def list_unfinished_runs(
        self, after: str | None, limit: int, shards: Collection[int] | None = None
    ) -> Sequence[str]:
        """Ids of non-terminal runs in id order (of ``shards`` only, if given)."""
        await anyio.lowlevel.checkpoint()
        ids = sorted(
            run_id
            for run_id, data in self._runs.items()
            if not data.run.status.is_terminal
            and (after is None or run_id > after)
            and self._in_shards(run_id, shards)
        )
        return ids[:limit]

    def _in_shards(self, run_id: str, shards: Collection[int] | None) -> bool:
        return shards is None or shard_of(run_id, self.shards_total) in shards

    async def cluster(self) -> tuple[int, tuple[Member, ...]]:
        """One process per store: no member is recorded (the API shows the process itself)."""
        await anyio.lowlevel.checkpoint()
        return self.shards_total, ()

    async def count_active_runs(self, workflow_id: str | None) -> Mapping[str, int]:
        """How many unfinished runs are in each status, optionally of one workflow."""
        await anyio.lowlevel.checkpoint()
        return dict(
            Counter(
                data.run.status.value
                for data in self._runs.values()
                if not data.run.status.is_terminal
                and (workflow_id is None or data.run.workflow_id == workflow_id)
            )
        )

    async def runs_with_running_attempts(
        self, actions: Collection[str], shards: Collection[int] | None = None
    ) -> Sequence[str]:
        """Ids of runs with an attempt of one of ``actions`` still running, in id order."""
        await anyio.lowlevel.checkpoint()
        return sorted(
            run_id
            for run_id, data in self._runs.items()
            if self._in_shards(run_id, shards)
            and any(
                a.status is AttemptStatus.RUNNING and a.action in actions
                for a in data.attempts.values()
            )
        )

    # -- idempotency -------------------------------------------------------------------------

    async def find_outcome(self, claim: IdempotencyClaim) -> Outcome | None:
        """The outcome stored for this claim's key, if any."""
        await anyio.lowlevel.checkpoint()
        stored = self._outcomes.get((claim.principal, claim.key))
        if stored is None:
            return None
        same_request(stored[0], claim)
        return copied(stored[1])

    async def save_outcome(self, record: IdempotencyRecord) -> Replayed | None:
        """Record an outcome for a request that wrote nothing else."""
        await anyio.lowlevel.checkpoint()
        if (replayed := self._replayed(record)) is not None:
            return replayed
        self._remember(record)
        return None

    async def purge_outcomes(self, older_than: datetime) -> int:
        """Delete records created before ``older_than``."""
        await anyio.lowlevel.checkpoint()
        old = [k for k, (_, _, created) in self._outcomes.items() if created < older_than]
        for key in old:
            del self._outcomes[key]
        return len(old)
