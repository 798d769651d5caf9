"""Run retention (SPEC §5): how long finished runs are kept, and the port that forgets them.

With ``WORKLOAD_RUN_RETENTION_DAYS`` set, the cluster-duty owner deletes terminal runs that
finished longer ago than that, with every row that belongs to them, a bounded batch per
transaction so that no purge holds its locks for long. Runs that have not finished are never
purged, whatever their age.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

__all__ = ["MAX_RETENTION_DAYS", "PURGE_BATCH", "RetentionStore"]

MAX_RETENTION_DAYS = 36_500
"""The longest retention the setting accepts (a hundred years)."""
PURGE_BATCH = 500
"""Runs deleted per transaction: one batch is the longest a purge holds its locks."""


class RetentionStore(Protocol):
    """Deletes finished runs with everything they own."""

    async def purge_finished_runs(self, finished_before: datetime, limit: int) -> int:
        """Delete up to ``limit`` terminal runs finished before ``finished_before``.

        Each run goes with its tasks, attempts, events, agent steps and approvals, in one
        transaction. Returns how many runs were deleted (0: none are left; a store may delete
        fewer than ``limit`` when the runs own many rows).
        """
        ...
