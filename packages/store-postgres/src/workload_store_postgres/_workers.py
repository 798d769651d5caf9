"""Remote attempts (SPEC §10): claims under leases, heartbeats, deadlines; workers and queues.

A claim is one statement (``claim_attempts`` in ``queries.sql``): ``FOR UPDATE SKIP LOCKED`` on
the queued attempts and their runs, so concurrent claimers — in this process or in other API
processes on the same database — never take the same attempt and never wait on each other or
on a commit. Skipping has a price: work whose run a commit holds for a moment (a sibling task's
report, a heartbeat) is passed over, and that commit queues nothing, so nobody would wake the
claim again. A claim that found nothing therefore checks whether matching work is queued all
the same, and if so tries again after a few milliseconds (:data:`LOCKED_RETRY_SECONDS`).
The store keeps only the digest of each lease token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import anyio
from psycopg.types.json import Jsonb

from workload_domain import listings
from workload_domain.cursors import Page, Position
from workload_domain.jsonvalues import JsonObject
from workload_domain.leases import LeasedAttempt, RunPosition
from workload_domain.workers import (
    SEEN_SECONDS,
    Activity,
    Claim,
    ClaimedAttempt,
    QueueStats,
    WorkerRecord,
)
from workload_store_postgres import _rows
from workload_store_postgres._db import Row, one
from workload_store_postgres._part import StorePart
from workload_store_postgres._queries import query

__all__ = ["LOCKED_RETRY_SECONDS", "Workers"]

LOCKED_RETRY_SECONDS = (0.005, 0.01, 0.02, 0.04, 0.08)
"""The pauses before each new try of a claim that met only locked work (150 ms in all): a
commit holds its run for milliseconds; work still locked after them waits for the next wake-up."""


def _claimed(row: Row) -> ClaimedAttempt:
    return ClaimedAttempt(
        **{**row, "attempt_id": str(row["attempt_id"]), "run_id": str(row["run_id"])}
    )


def _worker(row: Row) -> WorkerRecord:
    return WorkerRecord(**{**row, "queues": tuple(row["queues"]), "actions": tuple(row["actions"])})


class Workers(StorePart):
    """The ``WorkerStore`` part of the store."""

    async def claim(self, claim: Claim, now: datetime) -> Sequence[ClaimedAttempt]:
        """Hand out the oldest matching queued attempts under leases (see ``WorkerStore``)."""
        params = {
            "worker_id": claim.worker_id,
            "queues": list(claim.queues),
            "actions": list(claim.actions),
            "limit": len(claim.token_digests),
            "digests": list(claim.token_digests),
            "now": now,
            "seen_seconds": SEEN_SECONDS,
            "record_seen": claim.record_seen,
        }
        claimed = await self._read("claim_attempts", params, _claimed)
        for pause in LOCKED_RETRY_SECONDS:
            if claimed or not await self._claimable(params):
                break
            await anyio.sleep(pause)
            claimed = await self._read("claim_attempts", params, _claimed)
        return claimed

    async def _claimable(self, params: Mapping[str, Any]) -> bool:
        """Whether matching work is queued, held by another transaction or not."""
        async with self._db.single() as conn:
            row = await one(conn, "claimable", params)
        return bool(row and row["claimable"])

    async def find_attempt(self, attempt_id: str) -> LeasedAttempt | None:
        """An attempt by id, with its run and its lease token's digest."""
        uid = _rows.maybe_uuid(attempt_id)
        if uid is None:
            return None
        async with self._db.single() as conn:
            row = await one(conn, "find_attempt", {"attempt_id": uid})
        if row is None:
            return None
        run_id, digest = str(row.pop("run_id")), row.pop("lease_token_digest")
        position = RunPosition(
            row.pop("run_revision"), row.pop("run_last_sequence"), row.pop("run_updated_at")
        )
        return LeasedAttempt(run_id, _rows.attempt(row), digest, position)

    async def heartbeat(
        self, attempt_id: str, token_digest: str, now: datetime, progress: JsonObject | None
    ) -> datetime | None:
        """Renew a held lease; None (nothing written) when it is not held."""
        uid = _rows.maybe_uuid(attempt_id)
        if uid is None:
            return None
        params: dict[str, Any] = {
            "attempt_id": uid,
            "digest": token_digest,
            "now": now,
            "progress": None if progress is None else Jsonb(progress),
        }
        async with self._db.single() as conn:
            row = await one(conn, "heartbeat", params)
        return None if row is None else row["lease_expires_at"]

    async def due_attempts(self, now: datetime, limit: int) -> Sequence[tuple[str, str, int]]:
        """Remote attempts whose lease, start-to-close or schedule-to-start time passed."""

        def key(row: Row) -> tuple[str, str, int]:
            return str(row["run_id"]), row["task_key"], row["attempt"]

        return await self._read("due_attempts", {"now": now, "limit": limit}, key)

    async def page_workers(self, cursor: str | None, limit: int) -> Page[WorkerRecord]:
        """Workers in ``worker_id`` order, with how many attempts each holds now."""

        async def fetch(after: Position | None, n: int) -> list[WorkerRecord]:
            params = {"after": str(after[0]) if after else "", "limit": n}
            return await self._read("page_workers", params, _worker)

        return await self._paginate(listings.WORKERS, {}, cursor, limit, fetch)

    async def forget_workers(self, seen_before: datetime) -> int:
        """Delete the workers last seen before ``seen_before`` that hold no work."""
        async with self._db.tx() as conn:
            cur = await conn.execute(query("forget_workers"), {"seen_before": seen_before})
            return cur.rowcount

    async def queue_stats(self) -> Sequence[QueueStats]:
        """Every queue that has (or had) remote attempts, by name."""
        return await self._read("queue_stats", {}, lambda r: QueueStats(**r))

    async def activity(self, active_since: datetime) -> Activity:
        """What is going on: open runs, active workers, pending approvals (one query)."""
        found = await self._read("activity", {"since": active_since}, lambda r: Activity(**r))
        return found[0]

    def connection_counts(self) -> Mapping[str, int]:
        """The pool's connections: ``idle`` ones and ``used`` ones (psycopg_pool's stats)."""
        stats = self._db.pool.get_stats()
        size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
        return {"idle": idle, "used": max(size - idle, 0)}
