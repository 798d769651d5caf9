"""Run retention, the cluster duty (SPEC §5): forget finished runs past the configured age.

With ``WORKLOAD_RUN_RETENTION_DAYS`` set, the process that runs the cluster's duties (the
leader; in replica mode the owner of shard 0, §16) deletes terminal runs that finished longer
ago than that, with everything they own, at start and then every ``interval``. Each batch is
one short transaction of at most ``batch`` runs; a backlog (retention just turned on) is
worked through batch after batch, never in one long lock. Runs not finished are never touched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

import anyio

from workload_domain.ports import Clock
from workload_domain.retention import PURGE_BATCH, RetentionStore

__all__ = ["RunRetention"]

_log = logging.getLogger("workload.coordinator")


class RunRetention:
    """Deletes terminal runs older than ``days`` (by ``finished_at``), a batch at a time."""

    def __init__(
        self,
        store: RetentionStore,
        clock: Clock,
        days: int,
        *,
        on_purged: Callable[[int], None] | None = None,
        batch: int = PURGE_BATCH,
        interval: float = 3600.0,
    ) -> None:
        if days < 1 or batch < 1:
            raise ValueError("retention days and batch size must be positive")
        self._store = store
        self._clock = clock
        self._age = timedelta(days=days)
        self._on_purged = on_purged
        """Told how many runs each batch deleted (``workload_runs_purged_total``)."""
        self._batch = batch
        self._interval = interval

    async def purge_due(self) -> int:
        """Delete every terminal run finished before now minus the retention; return how many.

        The cut-off is taken once, so a run finishing meanwhile waits for the next pass.
        """
        cutoff = self._clock.now() - self._age
        total = 0
        while True:
            purged = await self._store.purge_finished_runs(cutoff, self._batch)
            total += purged
            if purged and self._on_purged is not None:
                self._on_purged(purged)
            if not purged:  # a store bounds a batch by its rows too: fewer is not the end
                return total
            await anyio.lowlevel.checkpoint()  # others run between two batches

    async def run(self) -> None:
        """Purge now, then every interval, until cancelled."""
        while True:
            purged = await self.purge_due()
            if purged:
                _log.info("purged finished runs", extra={"fields": {"runs": purged}})
            await anyio.sleep(self._interval)
