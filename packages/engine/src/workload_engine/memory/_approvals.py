"""Approvals in the in-memory store (SPEC §11): read by id, listed, found when they expire.

The same contract as the PostgreSQL store's: approvals are written only by run commits
(:meth:`MemoryState._store_approval`), and a decided approval never changes again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import anyio

from workload_domain import listings
from workload_domain.approvals import ApprovalRecord, ApprovalStatus
from workload_domain.cursors import Page, Position
from workload_engine.memory._part import MemoryState, copied

__all__ = ["MemoryApprovals"]


class MemoryApprovals(MemoryState):
    """The ``ApprovalStore`` part of the in-memory store."""

    async def find_approval(self, approval_id: str) -> ApprovalRecord | None:
        """An approval by id."""
        await anyio.lowlevel.checkpoint()
        return copied(self._approvals.get(approval_id))

    async def page_approvals(
        self, status: ApprovalStatus | None, cursor: str | None, limit: int
    ) -> Page[ApprovalRecord]:
        """Approvals in (requested_at, approval_id) order, optionally of one status."""

        async def fetch(after: Position | None, n: int) -> Sequence[ApprovalRecord]:
            await anyio.lowlevel.checkpoint()
            found = sorted(
                (a for a in self._approvals.values() if status is None or a.status is status),
                key=listings.APPROVALS.position,
            )
            return copied(listings.rows_after(found, listings.APPROVALS, after, n))

        scope = {"status": None if status is None else status.value}
        return await listings.paginate(
            self._codec, listings.APPROVALS, scope=scope, cursor=cursor, limit=limit, fetch=fetch
        )

    async def due_approvals(self, now: datetime, limit: int) -> Sequence[ApprovalRecord]:
        """Pending approvals whose expiry has passed, oldest first."""
        await anyio.lowlevel.checkpoint()
        due = sorted(
            (
                a
                for a in self._approvals.values()
                if a.status is ApprovalStatus.PENDING and a.expires_at <= now
            ),
            key=lambda a: (a.expires_at, a.approval_id),
        )
        return copied(due[:limit])
