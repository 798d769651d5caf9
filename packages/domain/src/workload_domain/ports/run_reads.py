"""The run reads port: what the API lists and shows of runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from workload_domain.cursors import Page
from workload_domain.records import (
    AttemptRecord,
    EventRecord,
    RunRecord,
    RunWithCounts,
    TaskRecord,
)
from workload_domain.run_listing import RunFilter

__all__ = ["RunReads"]


class RunReads(Protocol):
    """Reads of a run's state and history, in the orders of the API."""

    async def get_run(self, run_id: str) -> RunRecord:
        """Return the run row; ``RunNotFound`` if absent."""
        ...

    async def get_run_with_counts(self, run_id: str) -> RunWithCounts:
        """The run row and its task counts by status, in one read; ``RunNotFound``."""
        ...

    async def get_task(self, run_id: str, task_key: str) -> TaskRecord:
        """Return one task; ``RunNotFound`` / ``TaskNotFound``."""
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
        self, wanted: RunFilter, cursor: str | None, limit: int
    ) -> Page[RunWithCounts]:
        """The runs ``wanted`` by ``(created_at, run_id)`` in its order, with task counts.

        The creation bounds are exclusive. Each run's counts are read with its row, in one
        read: they agree with its status. The cursor is bound to the order and every filter.
        """
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
