"""Reads of a run's state and history, in the orders of the API (the ``RunReads`` part)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from workload_domain import listings
from workload_domain.cursors import Page, Position, from_micros
from workload_domain.errors import RunNotFound
from workload_domain.records import (
    AttemptRecord,
    EventRecord,
    RunRecord,
    RunWithCounts,
    TaskRecord,
)
from workload_domain.run_listing import RunFilter, RunOrder
from workload_store_postgres import _rows
from workload_store_postgres._db import Row, one
from workload_store_postgres._part import StorePart, require_task

__all__ = ["Reads"]

T = TypeVar("T")
_NIL_UUID = uuid.UUID(int=0)
_MAX_UUID = uuid.UUID(int=(1 << 128) - 1)
_MIN_TIME = from_micros(-62135596800 * 1_000_000)  # 0001-01-01T00:00:00Z
_MAX_TIME = datetime.max.replace(tzinfo=UTC)  # 9999-12-31T23:59:59.999999Z
# Only the filters in use appear in the statement, so each variant gets its own index
# (workflow_runs_keyset, _by_workflow, _by_status); the ``_desc`` twins scan it backward.
_RUNS_QUERY = {
    (False, False): "page_runs",
    (True, False): "page_runs_by_workflow",
    (False, True): "page_runs_by_status",
    (True, True): "page_runs_by_workflow_and_status",
}


def _run_with_counts(row: Row) -> RunWithCounts:
    counts = {str(k): int(v) for k, v in row.pop("task_counts").items()}
    return _rows.run(row), counts


def _run_without_sequence(row: Row) -> RunRecord:
    row.pop("last_sequence", None)
    return _rows.run(row)


class Reads(StorePart):
    """Run, task, attempt and event reads."""

    async def get_run(self, run_id: str) -> RunRecord:
        """Return the run row."""
        return await self._one_of_run("get_run", run_id, _run_without_sequence)

    async def get_run_with_counts(self, run_id: str) -> RunWithCounts:
        """The run row and its task counts by status, in one statement."""
        return await self._one_of_run("get_run_with_counts", run_id, _run_with_counts)

    async def get_task(self, run_id: str, task_key: str) -> TaskRecord:
        """Return one task of a run."""
        uid = _rows.run_uuid(run_id)
        async with self._db.single() as conn:
            row = await require_task(conn, uid, run_id, task_key)
        return _rows.task(row)

    async def list_tasks(self, run_id: str) -> Sequence[TaskRecord]:
        """Return the run's tasks in definition order."""
        return await self._tasks(run_id, None, None)

    async def list_attempts(self, run_id: str, task_key: str) -> Sequence[AttemptRecord]:
        """Return a task's attempts by number."""
        return await self._attempts(run_id, task_key, None, None)

    async def count_active_runs(self, workflow_id: str | None) -> Mapping[str, int]:
        """How many unfinished runs are in each status, optionally of one workflow."""
        found = await self._read("count_active_runs", {"workflow_id": workflow_id}, dict)
        return {str(row["status"]): int(row["count"]) for row in found}

    async def list_run_attempts(self, run_id: str, limit: int) -> Sequence[AttemptRecord]:
        """Every attempt of a run, by (task_key, attempt), at most ``limit``."""
        uid = _rows.run_uuid(run_id)
        params = {"run_id": uid, "limit": limit}
        return await self._read("list_run_attempts", params, _rows.attempt, run=(uid, run_id))

    async def list_events(
        self, run_id: str, after_sequence: int = 0, limit: int | None = None
    ) -> Sequence[EventRecord]:
        """Return the run's events after a sequence number, in order."""
        uid = _rows.run_uuid(run_id)
        params = {"run_id": uid, "after": after_sequence, "limit": limit}
        return await self._read("list_events", params, _rows.event, run=(uid, run_id))

    async def page_runs(
        self, wanted: RunFilter, cursor: str | None, limit: int
    ) -> Page[RunWithCounts]:
        """The runs ``wanted`` by (created_at, run_id) in its order, filtered and windowed.

        Each row carries its task counts, from the same statement (one snapshot).
        """
        workflow_id, status = wanted.workflow_id, wanted.status
        desc = wanted.order is RunOrder.DESC
        name = _RUNS_QUERY[(workflow_id is not None, status is not None)] + (
            "_desc" if desc else ""
        )
        start = (_MAX_TIME, _MAX_UUID) if desc else (_MIN_TIME, _NIL_UUID)

        async def fetch(after: Position | None, n: int) -> list[RunWithCounts]:
            params: dict[str, Any] = {
                "after_at": from_micros(int(after[0])) if after else start[0],
                "after_id": _rows.run_uuid(str(after[1])) if after else start[1],
                "workflow_id": workflow_id,
                "status": status.value if status else None,
                "created_after": wanted.created_after or _MIN_TIME,
                "created_before": wanted.created_before or _MAX_TIME,
                "limit": n,
            }
            return await self._read(name, params, _run_with_counts)

        return await self._paginate(listings.RUNS, wanted.scope(), cursor, limit, fetch)

    async def page_tasks(self, run_id: str, cursor: str | None, limit: int) -> Page[TaskRecord]:
        """A run's tasks in definition order."""

        async def fetch(after: Position | None, n: int) -> Sequence[TaskRecord]:
            return await self._tasks(run_id, after, n)

        return await self._paginate(listings.TASKS, {"run_id": run_id}, cursor, limit, fetch)

    async def page_attempts(
        self, run_id: str, task_key: str, cursor: str | None, limit: int
    ) -> Page[AttemptRecord]:
        """A task's attempts by number."""

        async def fetch(after: Position | None, n: int) -> Sequence[AttemptRecord]:
            return await self._attempts(run_id, task_key, after, n)

        scope = {"run_id": run_id, "task_key": task_key}
        return await self._paginate(listings.ATTEMPTS, scope, cursor, limit, fetch)

    async def page_events(self, run_id: str, cursor: str | None, limit: int) -> Page[EventRecord]:
        """A run's events by sequence."""

        async def fetch(after: Position | None, n: int) -> Sequence[EventRecord]:
            return await self.list_events(run_id, int(after[0]) if after else 0, n)

        return await self._paginate(listings.EVENTS, {"run_id": run_id}, cursor, limit, fetch)

    async def _tasks(
        self, run_id: str, after: Position | None, limit: int | None
    ) -> Sequence[TaskRecord]:
        uid = _rows.run_uuid(run_id)
        params = {"run_id": uid, "after": after[0] if after else -1, "limit": limit}
        return await self._read("list_tasks", params, _rows.task, run=(uid, run_id))

    async def _attempts(
        self, run_id: str, task_key: str, after: Position | None, limit: int | None
    ) -> Sequence[AttemptRecord]:
        params = {
            "run_id": _rows.run_uuid(run_id),
            "task_key": task_key,
            "after": after[0] if after else 0,
            "limit": limit,
        }
        found = await self._read("list_attempts", params, _rows.attempt)
        if not found:
            await self.get_task(run_id, task_key)  # an empty list of a missing task is 404
        return found

    async def _one_of_run(self, name: str, run_id: str, convert: Callable[[Row], T]) -> T:
        async with self._db.single() as conn:
            row = await one(conn, name, {"run_id": _rows.run_uuid(run_id)})
        if row is None:
            raise RunNotFound(run_id)
        return convert(row)
