"""Runs in the in-memory store: create, load and commit them; the recovery scans.

A commit validates everything first and then applies all of it without an ``await`` in between,
conditioned on the run's revision exactly like ``UPDATE … WHERE revision = $expected``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

import anyio

from workload_domain.errors import RevisionConflict, StoreIntegrityError, VersionNotFound
from workload_domain.idempotency import IdempotencyRecord, Replayed
from workload_domain.leases import lease_renewed_since
from workload_domain.records import NewRun, RunCommit, RunRecord, RunSnapshot, check_sequences
from workload_domain.shards import shard_of
from workload_domain.statuses import AttemptStatus
from workload_engine.memory._part import MemoryState, RunData, check_rows, copied, is_canonical_uuid

__all__ = ["MemoryRuns"]


class MemoryRuns(MemoryState):
    """The ``ExecutionStore`` part of the in-memory store."""

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
            held = data.attempts.get((attempt.task_key, attempt.attempt))
            if held is not None and lease_renewed_since(held, attempt):
                raise RevisionConflict(commit.run.run_id, commit.expected_revision)
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
