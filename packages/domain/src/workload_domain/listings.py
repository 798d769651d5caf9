"""Keyset pagination, written once: every store supplies only the rows after a position.

A :class:`Listing` names one ordered list of the API (its cursor kind, the position of an item in
its order, and the types of that position). :func:`paginate` decodes the cursor, asks the store
for up to ``limit + 1`` rows after the position, and builds the page with the next cursor. Both
stores call it; neither re-implements cursor handling.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from workload_domain.agent.journal import StepRecord
from workload_domain.approvals import ApprovalRecord
from workload_domain.cursors import CursorCodec, Page, Position, Scope, page_of, to_micros
from workload_domain.drafts import DraftRecord
from workload_domain.errors import InvalidCursor
from workload_domain.records import (
    AttemptRecord,
    EventRecord,
    RunWithCounts,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.workers import WorkerRecord

__all__ = [
    "APPROVALS",
    "ATTEMPTS",
    "DRAFTS",
    "EVENTS",
    "RUNS",
    "STEPS",
    "TASKS",
    "VERSIONS",
    "WORKERS",
    "WORKFLOWS",
    "Fetch",
    "Listing",
    "paginate",
    "rows_after",
]

T = TypeVar("T")

Fetch = Callable[[Position | None, int], Awaitable[Sequence[T]]]
"""Rows strictly after a position (``None``: from the start), in order, at most ``n``."""


@dataclass(frozen=True, slots=True)
class Listing(Generic[T]):
    """One keyset-ordered listing of the API."""

    kind: str
    position: Callable[[T], Position]
    shape: tuple[type, ...]
    """The type of each part of a position (a cursor whose position differs is malformed)."""

    def after(self, codec: CursorCodec, cursor: str | None, scope: Scope) -> Position | None:
        """The position a cursor of this listing carries (``None`` without a cursor).

        Raises:
            InvalidCursor: malformed, tampered with, or from another listing or scope.
        """
        if cursor is None:
            return None
        position = codec.decode(cursor, self.kind, scope)
        if len(position) != len(self.shape) or not all(
            isinstance(part, kind) for part, kind in zip(position, self.shape, strict=True)
        ):
            raise InvalidCursor("the cursor is malformed")
        return position


async def paginate(
    codec: CursorCodec,
    listing: Listing[T],
    *,
    scope: Scope,
    cursor: str | None,
    limit: int,
    fetch: Fetch[T],
) -> Page[T]:
    """One page of ``listing``: rows after the cursor's position, and the next cursor."""
    after = listing.after(codec, cursor, scope)
    rows = await fetch(after, limit + 1)
    return page_of(
        rows, limit, codec=codec, kind=listing.kind, scope=scope, position=listing.position
    )


def _workflow(w: WorkflowRecord) -> Position:
    return (to_micros(w.created_at), w.workflow_id)


def _run(item: RunWithCounts) -> Position:
    run = item[0]
    return (to_micros(run.created_at), run.run_id)


WORKFLOWS: Listing[WorkflowRecord] = Listing("workflows", _workflow, (int, str))
"""Workflows in ``(created_at, workflow_id)`` order."""
VERSIONS: Listing[VersionRecord] = Listing("versions", lambda v: (v.version,), (int,))
"""A workflow's versions by number."""
RUNS: Listing[RunWithCounts] = Listing("runs", _run, (int, str))
"""Runs, each with its task counts, in ``(created_at, run_id)`` order."""
TASKS: Listing[TaskRecord] = Listing("tasks", lambda t: (t.position,), (int,))
"""A run's tasks in definition order."""
ATTEMPTS: Listing[AttemptRecord] = Listing("attempts", lambda a: (a.attempt,), (int,))
"""A task's attempts by number."""
EVENTS: Listing[EventRecord] = Listing("events", lambda e: (e.sequence,), (int,))
"""A run's events by sequence."""
STEPS: Listing[StepRecord] = Listing("steps", lambda s: (s.attempt, s.sequence), (int, int))
"""A task's agent steps by ``(attempt, sequence)``."""
APPROVALS: Listing[ApprovalRecord] = Listing(
    "approvals", lambda a: (to_micros(a.requested_at), a.approval_id), (int, str)
)
"""Approvals in ``(requested_at, approval_id)`` order."""
DRAFTS: Listing[DraftRecord] = Listing(
    "drafts", lambda d: (to_micros(d.created_at), d.draft_id), (int, str)
)
"""Drafts in ``(created_at, draft_id)`` order."""
WORKERS: Listing[WorkerRecord] = Listing("workers", lambda w: (w.worker_id,), (str,))
"""Workers by id."""


def rows_after(rows: Sequence[T], listing: Listing[T], after: Position | None, n: int) -> list[T]:
    """The first ``n`` of ``rows`` (already in the listing's order) after ``after``.

    For stores that hold their rows in memory; a database asks its index instead.
    """
    if after is None:
        return list(rows[:n])
    return [r for r in rows if listing.position(r) > after][:n]
