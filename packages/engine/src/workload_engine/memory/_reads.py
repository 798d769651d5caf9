"""Reads and pages of the in-memory store: the shared pagination over rows held in memory."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

import anyio

from workload_domain import listings
from workload_domain.cursors import Page, Position, Scope
from workload_domain.errors import TaskNotFound, WorkflowNotFound
from workload_domain.records import (
    AttemptRecord,
    EventRecord,
    RunRecord,
    RunWithCounts,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.run_listing import RunFilter, RunOrder
from workload_engine.memory._part import MemoryState, RunData, copied

__all__ = ["MemoryReads"]

_T = TypeVar("_T")


class MemoryReads(MemoryState):
    """The ``RunReads`` part and the pages of the in-memory store."""

    # -- reads -------------------------------------------------------------------------------

    async def get_run(self, run_id: str) -> RunRecord:
        """Return the run row."""
        await anyio.lowlevel.checkpoint()
        return copied(self._run(run_id).run)

    async def list_tasks(self, run_id: str) -> Sequence[TaskRecord]:
        """Return the run's tasks in definition order."""
        await anyio.lowlevel.checkpoint()
        return copied(sorted(self._run(run_id).tasks.values(), key=lambda t: t.position))

    async def list_attempts(self, run_id: str, task_key: str) -> Sequence[AttemptRecord]:
        """Return a task's attempts by number."""
        await anyio.lowlevel.checkpoint()
        data = self._run(run_id)
        if task_key not in data.tasks:
            raise TaskNotFound(run_id, task_key)
        return copied(
            sorted(
                (a for (k, _), a in data.attempts.items() if k == task_key),
                key=lambda a: a.attempt,
            )
        )

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

    async def list_run_attempts(self, run_id: str, limit: int) -> Sequence[AttemptRecord]:
        """Every attempt of a run, by (task_key, attempt), at most ``limit``."""
        await anyio.lowlevel.checkpoint()
        attempts = self._run(run_id).attempts
        return copied([attempts[key] for key in sorted(attempts)][:limit])

    async def list_events(
        self, run_id: str, after_sequence: int = 0, limit: int | None = None
    ) -> Sequence[EventRecord]:
        """Return the run's events after a sequence number, in order."""
        await anyio.lowlevel.checkpoint()
        events = self._run(run_id).events[max(after_sequence, 0) :]
        return copied(events if limit is None else events[:limit])

    async def get_run_with_counts(self, run_id: str) -> RunWithCounts:
        """The run row and its task counts by status."""
        await anyio.lowlevel.checkpoint()
        return _with_counts(self._run(run_id))

    async def get_task(self, run_id: str, task_key: str) -> TaskRecord:
        """Return one task of a run."""
        await anyio.lowlevel.checkpoint()
        data = self._run(run_id)
        try:
            return copied(data.tasks[task_key])
        except KeyError:
            raise TaskNotFound(run_id, task_key) from None

    # -- pages: the shared pagination over rows held in memory --------------------------------

    async def page_workflows(self, cursor: str | None, limit: int) -> Page[WorkflowRecord]:
        """Workflows in (created_at, workflow_id) order."""

        async def rows() -> Sequence[WorkflowRecord]:
            return sorted(self._workflows.values(), key=listings.WORKFLOWS.position)

        return await self._page(listings.WORKFLOWS, {}, cursor, limit, rows)

    async def page_versions(
        self, workflow_id: str, cursor: str | None, limit: int
    ) -> Page[VersionRecord]:
        """A workflow's versions by number."""

        async def rows() -> Sequence[VersionRecord]:
            if workflow_id not in self._workflows:
                raise WorkflowNotFound(workflow_id)
            return sorted(
                (v for (w, _), v in self._versions.items() if w == workflow_id),
                key=listings.VERSIONS.position,
            )

        scope = {"workflow_id": workflow_id}
        return await self._page(listings.VERSIONS, scope, cursor, limit, rows)

    async def page_runs(
        self, wanted: RunFilter, cursor: str | None, limit: int
    ) -> Page[RunWithCounts]:
        """The runs ``wanted`` by (created_at, run_id) in its order, with task counts."""
        position = listings.RUNS.position

        async def fetch(after: Position | None, n: int) -> Sequence[RunWithCounts]:
            await anyio.lowlevel.checkpoint()
            found = sorted(
                (_with_counts(d) for d in self._runs.values() if wanted.matches(d.run)),
                key=position,
                reverse=wanted.order is RunOrder.DESC,
            )
            if after is not None:
                found = [r for r in found if wanted.follows(position(r), after)]
            return found[:n]

        return await listings.paginate(
            self._codec,
            listings.RUNS,
            scope=wanted.scope(),
            cursor=cursor,
            limit=limit,
            fetch=fetch,
        )

    async def page_tasks(self, run_id: str, cursor: str | None, limit: int) -> Page[TaskRecord]:
        """A run's tasks in definition order."""

        async def rows() -> Sequence[TaskRecord]:
            return await self.list_tasks(run_id)

        return await self._page(listings.TASKS, {"run_id": run_id}, cursor, limit, rows)

    async def page_attempts(
        self, run_id: str, task_key: str, cursor: str | None, limit: int
    ) -> Page[AttemptRecord]:
        """A task's attempts by number."""

        async def rows() -> Sequence[AttemptRecord]:
            return await self.list_attempts(run_id, task_key)

        scope = {"run_id": run_id, "task_key": task_key}
        return await self._page(listings.ATTEMPTS, scope, cursor, limit, rows)

    async def page_events(self, run_id: str, cursor: str | None, limit: int) -> Page[EventRecord]:
        """A run's events by sequence."""

        async def rows() -> Sequence[EventRecord]:
            return await self.list_events(run_id)

        return await self._page(listings.EVENTS, {"run_id": run_id}, cursor, limit, rows)

    async def _page(
        self,
        listing: listings.Listing[_T],
        scope: Scope,
        cursor: str | None,
        limit: int,
        rows: Callable[[], Awaitable[Sequence[_T]]],
    ) -> Page[_T]:
        async def fetch(after: Position | None, n: int) -> Sequence[_T]:
            await anyio.lowlevel.checkpoint()
            return copied(listings.rows_after(await rows(), listing, after, n))

        return await listings.paginate(
            self._codec, listing, scope=scope, cursor=cursor, limit=limit, fetch=fetch
        )


def _with_counts(data: RunData) -> RunWithCounts:
    return copied(data.run), dict(Counter(t.status.value for t in data.tasks.values()))
