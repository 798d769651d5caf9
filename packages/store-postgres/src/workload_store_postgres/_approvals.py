"""Approvals of agents' tool calls (SPEC §11): read by id, listed, and found when they expire.

They are written only by run commits (``upsert_approval`` in :mod:`._runs`), so an approval and
its events change together, at the run's next revision.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from workload_domain import listings
from workload_domain.approvals import ApprovalRecord, ApprovalStatus
from workload_domain.cursors import Page, Position, from_micros
from workload_store_postgres import _rows
from workload_store_postgres._db import one
from workload_store_postgres._part import StorePart

__all__ = ["Approvals"]

_NIL_UUID = uuid.UUID(int=0)
_MIN_TIME = datetime(1, 1, 1, tzinfo=UTC)


class Approvals(StorePart):
    """The ``ApprovalStore`` part of the store."""

    async def find_approval(self, approval_id: str) -> ApprovalRecord | None:
        """An approval by id."""
        uid = _rows.maybe_uuid(approval_id)
        if uid is None:
            return None
        async with self._db.tx() as conn:
            row = await one(conn, "find_approval", {"approval_id": uid})
        return None if row is None else _rows.approval(row)

    async def page_approvals(
        self, status: ApprovalStatus | None, cursor: str | None, limit: int
    ) -> Page[ApprovalRecord]:
        """Approvals in (requested_at, approval_id) order, optionally of one status."""

        async def fetch(after: Position | None, n: int) -> Sequence[ApprovalRecord]:
            params = {
                "after_at": from_micros(int(after[0])) if after else _MIN_TIME,
                "after_id": (_rows.maybe_uuid(str(after[1])) or _NIL_UUID) if after else _NIL_UUID,
                "status": None if status is None else status.value,
                "limit": n,
            }
            name = "page_approvals" if status is None else "page_approvals_by_status"
            return await self._read(name, params, _rows.approval)

        scope = {"status": None if status is None else status.value}
        return await self._paginate(listings.APPROVALS, scope, cursor, limit, fetch)

    async def due_approvals(self, now: datetime, limit: int) -> Sequence[ApprovalRecord]:
        """Pending approvals whose expiry has passed, oldest first."""
        return await self._read("due_approvals", {"now": now, "limit": limit}, _rows.approval)
