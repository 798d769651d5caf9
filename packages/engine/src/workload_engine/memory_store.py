"""An in-memory ``Store`` with the transactional semantics of the PostgreSQL one.

Every write validates everything first and then applies all of it without an ``await`` in
between, so it is all-or-nothing and atomic with respect to other tasks, like a database
transaction. Commits are conditioned on the run's revision exactly like
``UPDATE … WHERE revision = $expected``. JSON values are copied in and out, so callers can never
alias stored state.
"""

from __future__ import annotations

import copy
import secrets
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TypeVar

import anyio

from workload_domain.cursors import CursorCodec, Page, Scope, page_of, to_micros
from workload_domain.errors import (
    IdempotencyKeyReused,
    RevisionConflict,
    RunNotFound,
    StoreIntegrityError,
    TaskNotFound,
    VersionNotFound,
    WorkflowExists,
    WorkflowNotFound,
)
from workload_domain.idempotency import IdempotencyClaim, IdempotentWrite, Outcome, Replay
from workload_domain.model import (
    AttemptRecord,
    EventRecord,
    NewRun,
    RunCommit,
    RunRecord,
    RunSnapshot,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.ports import Clock
from workload_domain.statuses import AttemptStatus, RunStatus, TaskStatus
from workload_engine.clock import SystemClock

__all__ = ["InMemoryStore", "StoreIntegrityError"]


@dataclass
class _RunData:
    run: RunRecord
    tasks: dict[str, TaskRecord]
    attempts: dict[tuple[str, int], AttemptRecord] = field(default_factory=dict)
    events: list[EventRecord] = field(default_factory=list)


_T = TypeVar("_T")
_R = TypeVar("_R")


def _copy(value: _T) -> _T:
    return copy.deepcopy(value)


class InMemoryStore:
    """The whole ``Store`` port in process memory (tests, ``run-local``)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._codec = CursorCodec(secrets.token_bytes(32))
        self._workflows: dict[str, WorkflowRecord] = {}
        self._versions: dict[tuple[str, int], VersionRecord] = {}
        self._runs: dict[str, _RunData] = {}
        self._outcomes: dict[tuple[str, str], tuple[IdempotencyClaim, Outcome, datetime]] = {}
        self.commits = 0
        """How many run commits succeeded (for tests that interrupt at a commit point)."""

    # -- workflows ---------------------------------------------------------------------------

    async def create_workflow(
        self,
        workflow: WorkflowRecord,
        version: VersionRecord,
        idempotency: IdempotentWrite[VersionRecord] | None = None,
    ) -> VersionRecord:
        """Create a workflow and its version 1."""
        await anyio.lowlevel.checkpoint()
        self._check_claim(idempotency)
        if workflow.workflow_id in self._workflows:
            raise WorkflowExists(workflow.workflow_id)
        if version.version != 1 or workflow.latest_version != 1:
            raise StoreIntegrityError("a new workflow starts at version 1")
        self._workflows[workflow.workflow_id] = workflow
        self._versions[(workflow.workflow_id, 1)] = _copy(version)
        self._remember(idempotency, version)
        return _copy(version)

    async def create_version(
        self,
        *,
        workflow_id: str,
        definition_hash: str,
        definition: dict[str, object],
        task_count: int,
        created_at: datetime,
        idempotency: IdempotentWrite[VersionRecord] | None = None,
    ) -> VersionRecord:
        """Create version ``latest + 1`` of an existing workflow."""
        await anyio.lowlevel.checkpoint()
        self._check_claim(idempotency)
        workflow = self._workflows.get(workflow_id)
        if workflow is None:
            raise WorkflowNotFound(workflow_id)
        number = workflow.latest_version + 1
        record = VersionRecord(
            workflow_id, number, definition_hash, task_count, created_at, _copy(definition)
        )
        description = definition.get("description", workflow.description)
        self._workflows[workflow_id] = replace(
            workflow,
            latest_version=number,
            updated_at=created_at,
            description=str(description),
        )
        self._versions[(workflow_id, number)] = record
        self._remember(idempotency, record)
        return _copy(record)

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
            return _copy(self._versions[(workflow_id, version)])
        except KeyError:
            raise VersionNotFound(workflow_id, version) from None

    # -- execution ---------------------------------------------------------------------------

    async def create_run(
        self, new_run: NewRun, idempotency: IdempotentWrite[RunRecord] | None = None
    ) -> RunRecord:
        """Write the run, its tasks and its first events atomically."""
        await anyio.lowlevel.checkpoint()
        self._check_claim(idempotency)
        run = new_run.run
        if not _is_canonical_uuid(run.run_id):
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
        _check_sequences(new_run.events, 0)
        _check_rows(run, new_run.tasks, ())
        self._runs[run.run_id] = _RunData(
            run=_copy(run),
            tasks={t.task_key: t for t in new_run.tasks},
            events=list(_copy(new_run.events)),
        )
        self._remember(idempotency, run)
        return _copy(run)

    async def load_run(self, run_id: str) -> RunSnapshot:
        """Read the run, its tasks and its running attempts."""
        await anyio.lowlevel.checkpoint()
        data = self._run(run_id)
        return RunSnapshot(
            run=_copy(data.run),
            tasks=tuple(sorted(data.tasks.values(), key=lambda t: t.position)),
            running_attempts=tuple(
                a for a in data.attempts.values() if a.status is AttemptStatus.RUNNING
            ),
            last_sequence=len(data.events),
        )

    async def commit(
        self, commit: RunCommit, idempotency: IdempotentWrite[RunRecord] | None = None
    ) -> None:
        """Apply a run transition if the run is still at the expected revision."""
        await anyio.lowlevel.checkpoint()
        data = self._run(commit.run.run_id)
        self._check_claim(idempotency)
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
        _check_sequences(commit.events, len(data.events))
        _check_rows(commit.run, commit.tasks, commit.attempts)
        # Everything is valid: apply all of it with no await in between.
        data.run = _copy(commit.run)
        for task in commit.tasks:
            data.tasks[task.task_key] = _copy(task)
        for attempt in commit.attempts:
            data.attempts[(attempt.task_key, attempt.attempt)] = _copy(attempt)
        data.events.extend(_copy(commit.events))
        self.commits += 1
        self._remember(idempotency, commit.run)

    async def list_unfinished_runs(self, after: str | None, limit: int) -> Sequence[str]:
        """Ids of non-terminal runs in id order."""
        await anyio.lowlevel.checkpoint()
        ids = sorted(
            run_id
            for run_id, data in self._runs.items()
            if not data.run.status.is_terminal and (after is None or run_id > after)
        )
        return ids[:limit]

    async def runs_with_running_attempts(self) -> Sequence[str]:
        """Ids of runs with an attempt still running, in id order."""
        await anyio.lowlevel.checkpoint()
        return sorted(
            run_id
            for run_id, data in self._runs.items()
            if any(a.status is AttemptStatus.RUNNING for a in data.attempts.values())
        )

    # -- reads -------------------------------------------------------------------------------

    async def get_run(self, run_id: str) -> RunRecord:
        """Return the run row."""
        await anyio.lowlevel.checkpoint()
        return _copy(self._run(run_id).run)

    async def list_tasks(self, run_id: str) -> Sequence[TaskRecord]:
        """Return the run's tasks in definition order."""
        await anyio.lowlevel.checkpoint()
        return _copy(sorted(self._run(run_id).tasks.values(), key=lambda t: t.position))

    async def list_attempts(self, run_id: str, task_key: str) -> Sequence[AttemptRecord]:
        """Return a task's attempts by number."""
        await anyio.lowlevel.checkpoint()
        data = self._run(run_id)
        if task_key not in data.tasks:
            raise TaskNotFound(run_id, task_key)
        return _copy(
            sorted(
                (a for (k, _), a in data.attempts.items() if k == task_key),
                key=lambda a: a.attempt,
            )
        )

    async def list_events(
        self, run_id: str, after_sequence: int = 0, limit: int | None = None
    ) -> Sequence[EventRecord]:
        """Return the run's events after a sequence number, in order."""
        await anyio.lowlevel.checkpoint()
        events = self._run(run_id).events[max(after_sequence, 0) :]
        return _copy(events if limit is None else events[:limit])

    async def get_run_with_counts(self, run_id: str) -> tuple[RunRecord, Mapping[str, int]]:
        """The run row and its task counts by status."""
        await anyio.lowlevel.checkpoint()
        data = self._run(run_id)
        return _copy(data.run), dict(Counter(t.status.value for t in data.tasks.values()))

    async def get_task(self, run_id: str, task_key: str) -> TaskRecord:
        """Return one task of a run."""
        await anyio.lowlevel.checkpoint()
        data = self._run(run_id)
        try:
            return _copy(data.tasks[task_key])
        except KeyError:
            raise TaskNotFound(run_id, task_key) from None

    async def task_counts(self, run_ids: Sequence[str]) -> Mapping[str, Mapping[str, int]]:
        """Per run, the number of tasks in each status."""
        await anyio.lowlevel.checkpoint()
        return {
            run_id: dict(Counter(t.status.value for t in self._runs[run_id].tasks.values()))
            for run_id in run_ids
            if run_id in self._runs
        }

    # -- pages -------------------------------------------------------------------------------

    async def page_workflows(self, cursor: str | None, limit: int) -> Page[WorkflowRecord]:
        """Workflows in (created_at, workflow_id) order."""
        await anyio.lowlevel.checkpoint()
        rows = sorted(self._workflows.values(), key=_workflow_position)
        return self._page(
            rows,
            kind="workflows",
            scope={},
            cursor=cursor,
            limit=limit,
            position=_workflow_position,
        )

    async def page_versions(
        self, workflow_id: str, cursor: str | None, limit: int
    ) -> Page[VersionRecord]:
        """A workflow's versions by number."""
        await anyio.lowlevel.checkpoint()
        if workflow_id not in self._workflows:
            raise WorkflowNotFound(workflow_id)
        rows = sorted(
            (v for (w, _), v in self._versions.items() if w == workflow_id),
            key=lambda v: v.version,
        )
        scope = {"workflow_id": workflow_id}
        return self._page(
            rows,
            kind="versions",
            scope=scope,
            cursor=cursor,
            limit=limit,
            position=lambda v: (v.version,),
        )

    async def page_runs(
        self,
        workflow_id: str | None,
        status: RunStatus | None,
        cursor: str | None,
        limit: int,
    ) -> Page[RunRecord]:
        """Runs in (created_at, run_id) order, optionally filtered."""
        await anyio.lowlevel.checkpoint()
        rows = sorted(
            (
                d.run
                for d in self._runs.values()
                if (workflow_id is None or d.run.workflow_id == workflow_id)
                and (status is None or d.run.status is status)
            ),
            key=_run_position,
        )
        scope = {"workflow_id": workflow_id, "status": status.value if status else None}
        return self._page(
            rows, kind="runs", scope=scope, cursor=cursor, limit=limit, position=_run_position
        )

    async def page_tasks(self, run_id: str, cursor: str | None, limit: int) -> Page[TaskRecord]:
        """A run's tasks in definition order."""
        rows = await self.list_tasks(run_id)
        scope = {"run_id": run_id}
        return self._page(
            rows,
            kind="tasks",
            scope=scope,
            cursor=cursor,
            limit=limit,
            position=lambda t: (t.position,),
        )

    async def page_attempts(
        self, run_id: str, task_key: str, cursor: str | None, limit: int
    ) -> Page[AttemptRecord]:
        """A task's attempts by number."""
        rows = await self.list_attempts(run_id, task_key)
        scope = {"run_id": run_id, "task_key": task_key}
        return self._page(
            rows,
            kind="attempts",
            scope=scope,
            cursor=cursor,
            limit=limit,
            position=lambda a: (a.attempt,),
        )

    async def page_events(self, run_id: str, cursor: str | None, limit: int) -> Page[EventRecord]:
        """A run's events by sequence."""
        rows = await self.list_events(run_id)
        scope = {"run_id": run_id}
        return self._page(
            rows,
            kind="events",
            scope=scope,
            cursor=cursor,
            limit=limit,
            position=lambda e: (e.sequence,),
        )

    def _page(
        self,
        rows: Sequence[_R],
        *,
        kind: str,
        scope: Scope,
        cursor: str | None,
        limit: int,
        position: Callable[[_R], tuple[str | int, ...]],
    ) -> Page[_R]:
        if cursor is not None:
            after = self._codec.decode(cursor, kind, scope)
            rows = [r for r in rows if position(r) > after]
        return page_of(
            _copy(list(rows[: limit + 1])),
            limit,
            codec=self._codec,
            kind=kind,
            scope=scope,
            position=position,
        )

    # -- idempotency -------------------------------------------------------------------------

    async def find_outcome(self, claim: IdempotencyClaim) -> Outcome | None:
        """The outcome stored for this claim's key, if any."""
        await anyio.lowlevel.checkpoint()
        stored = self._outcomes.get((claim.principal, claim.key))
        if stored is None:
            return None
        _same_request(stored[0], claim)
        return _copy(stored[1])

    async def save_outcome(self, claim: IdempotencyClaim, outcome: Outcome) -> None:
        """Record an outcome for a request that wrote nothing else."""
        await anyio.lowlevel.checkpoint()
        self._check_claim(IdempotentWrite(claim, lambda _: outcome))
        self._outcomes[(claim.principal, claim.key)] = (
            claim,
            _copy(outcome),
            self._clock.now(),
        )

    async def purge_outcomes(self, older_than: datetime) -> int:
        """Delete records created before ``older_than``."""
        await anyio.lowlevel.checkpoint()
        old = [k for k, (_, _, created) in self._outcomes.items() if created < older_than]
        for key in old:
            del self._outcomes[key]
        return len(old)

    def _check_claim(self, idempotency: IdempotentWrite[_R] | None) -> None:
        if idempotency is None:
            return
        claim = idempotency.claim
        stored = self._outcomes.get((claim.principal, claim.key))
        if stored is not None:
            _same_request(stored[0], claim)
            raise Replay(_copy(stored[1]))

    def _remember(self, idempotency: IdempotentWrite[_R] | None, resource: _R) -> None:
        if idempotency is None:
            return
        claim = idempotency.claim
        outcome = idempotency.render(_copy(resource))
        self._outcomes[(claim.principal, claim.key)] = (claim, outcome, self._clock.now())

    def _run(self, run_id: str) -> _RunData:
        try:
            return self._runs[run_id]
        except KeyError:
            raise RunNotFound(run_id) from None


def _is_canonical_uuid(value: str) -> bool:
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def _same_request(stored: IdempotencyClaim, claim: IdempotencyClaim) -> None:
    if (stored.operation, stored.request_hash) != (claim.operation, claim.request_hash):
        raise IdempotencyKeyReused


def _workflow_position(w: WorkflowRecord) -> tuple[str | int, ...]:
    return (to_micros(w.created_at), w.workflow_id)


def _run_position(r: RunRecord) -> tuple[str | int, ...]:
    return (to_micros(r.created_at), r.run_id)


def _check_rows(
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


def _check_sequences(events: Sequence[EventRecord], last: int) -> None:
    expected = list(range(last + 1, last + 1 + len(events)))
    if [e.sequence for e in events] != expected:
        raise StoreIntegrityError("event sequences must continue the run's history contiguously")
