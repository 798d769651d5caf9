"""An in-memory ``Store`` with the transactional semantics of the PostgreSQL one.

Every write validates everything first and then applies all of it without an ``await`` in
between, so it is all-or-nothing and atomic with respect to other tasks, like a database
transaction. Commits are conditioned on the run's revision exactly like
``UPDATE … WHERE revision = $expected``. JSON values are copied in and out, so callers can never
alias stored state.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TypeVar

import anyio

from workload_domain.errors import (
    RevisionConflict,
    RunNotFound,
    TaskNotFound,
    VersionNotFound,
    WorkflowExists,
    WorkflowNotFound,
)
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
from workload_domain.statuses import AttemptStatus

__all__ = ["InMemoryStore", "StoreIntegrityError"]


class StoreIntegrityError(Exception):
    """A write that a database constraint would reject: always a bug in the writer."""


@dataclass
class _RunData:
    run: RunRecord
    tasks: dict[str, TaskRecord]
    attempts: dict[tuple[str, int], AttemptRecord] = field(default_factory=dict)
    events: list[EventRecord] = field(default_factory=list)


_T = TypeVar("_T")


def _copy(value: _T) -> _T:
    return copy.deepcopy(value)


class InMemoryStore:
    """The whole ``Store`` port in process memory (tests, ``run-local``)."""

    def __init__(self) -> None:
        self._workflows: dict[str, WorkflowRecord] = {}
        self._versions: dict[tuple[str, int], VersionRecord] = {}
        self._runs: dict[str, _RunData] = {}
        self.commits = 0
        """How many run commits succeeded (for tests that interrupt at a commit point)."""

    # -- workflows ---------------------------------------------------------------------------

    async def create_workflow(self, workflow: WorkflowRecord, version: VersionRecord) -> None:
        """Create a workflow and its version 1."""
        await anyio.lowlevel.checkpoint()
        if workflow.workflow_id in self._workflows:
            raise WorkflowExists(workflow.workflow_id)
        if version.version != 1 or workflow.latest_version != 1:
            raise StoreIntegrityError("a new workflow starts at version 1")
        self._workflows[workflow.workflow_id] = workflow
        self._versions[(workflow.workflow_id, 1)] = _copy(version)

    async def create_version(
        self,
        workflow_id: str,
        definition_hash: str,
        definition: dict[str, object],
        task_count: int,
        created_at: datetime,
    ) -> VersionRecord:
        """Create version ``latest + 1`` of an existing workflow."""
        await anyio.lowlevel.checkpoint()
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

    async def create_run(self, new_run: NewRun) -> None:
        """Write the run, its tasks and its first events atomically."""
        await anyio.lowlevel.checkpoint()
        run = new_run.run
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
        self._runs[run.run_id] = _RunData(
            run=_copy(run),
            tasks={t.task_key: t for t in new_run.tasks},
            events=list(_copy(new_run.events)),
        )

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

    async def commit(self, commit: RunCommit) -> None:
        """Apply a run transition if the run is still at the expected revision."""
        await anyio.lowlevel.checkpoint()
        data = self._run(commit.run.run_id)
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
        # Everything is valid: apply all of it with no await in between.
        data.run = _copy(commit.run)
        for task in commit.tasks:
            data.tasks[task.task_key] = _copy(task)
        for attempt in commit.attempts:
            data.attempts[(attempt.task_key, attempt.attempt)] = _copy(attempt)
        data.events.extend(_copy(commit.events))
        self.commits += 1

    async def list_unfinished_runs(self, after: str | None, limit: int) -> Sequence[str]:
        """Ids of non-terminal runs in id order."""
        await anyio.lowlevel.checkpoint()
        ids = sorted(
            run_id
            for run_id, data in self._runs.items()
            if not data.run.status.is_terminal and (after is None or run_id > after)
        )
        return ids[:limit]

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

    def _run(self, run_id: str) -> _RunData:
        try:
            return self._runs[run_id]
        except KeyError:
            raise RunNotFound(run_id) from None


def _check_sequences(events: Sequence[EventRecord], last: int) -> None:
    expected = list(range(last + 1, last + 1 + len(events)))
    if [e.sequence for e in events] != expected:
        raise StoreIntegrityError("event sequences must continue the run's history contiguously")
