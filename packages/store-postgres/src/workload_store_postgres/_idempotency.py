"""Outcomes of idempotent writes that wrote nothing else, and their purge."""

from __future__ import annotations

from datetime import datetime

from workload_domain.idempotency import IdempotencyClaim, IdempotencyRecord, Outcome, Replayed
from workload_store_postgres._db import Conn, stored_outcome
from workload_store_postgres._part import StorePart
from workload_store_postgres._queries import query

__all__ = ["PURGE_BATCH", "Idempotency"]

PURGE_BATCH = 5_000
"""Records one statement of the purge deletes at most: a backlog of millions (a day down) is
purged in statements of tens of milliseconds, each its own transaction."""


class Idempotency(StorePart):
    """The ``IdempotencyStore`` part of the store."""

    async def find_outcome(self, claim: IdempotencyClaim) -> Outcome | None:
        """The outcome stored for this claim's key, if any."""
        async with self._db.single() as conn:
            return await stored_outcome(conn, claim)

    async def save_outcome(self, record: IdempotencyRecord) -> Replayed | None:
        """Record the outcome of a request that wrote nothing else."""

        async def nothing(_: Conn) -> None:
            return None

        result = await self._db.write(nothing, record)
        return result if isinstance(result, Replayed) else None

    async def purge_outcomes(self, older_than: datetime) -> int:
        """Delete records created before ``older_than``, :data:`PURGE_BATCH` a statement."""
        purged = 0
        while True:
            deleted = await self._purge_batch(older_than, PURGE_BATCH)
            purged += deleted
            if deleted < PURGE_BATCH:
                return purged

    async def _purge_batch(self, older_than: datetime, limit: int) -> int:
        async with self._db.tx() as conn:
            params = {"older_than": older_than, "limit": limit}
            cur = await conn.execute(query("purge_outcomes"), params)
            return cur.rowcount
