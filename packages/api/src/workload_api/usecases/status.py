"""The service at a glance (SPEC §12): ``GET /api/v1/status`` and ``GET /metrics``.

Both read what the store knows now — queues, runs not yet terminal, workers seen lately,
pending approvals — and what this process is: leader or standby, and its epoch.
"""

from __future__ import annotations

from workload_api import resources
from workload_api.lifecycle import Readiness
from workload_api.telemetry import Metrics
from workload_domain.errors import SystemFault
from workload_domain.jsonvalues import JsonObject
from workload_domain.ports import Clock, Store
from workload_domain.workers import WORKER_ACTIVE_WINDOW

__all__ = ["StatusUseCases"]


class StatusUseCases:
    """The status of the service, as a resource and as Prometheus metrics."""

    def __init__(self, store: Store, clock: Clock, readiness: Readiness, metrics: Metrics) -> None:
        self._store = store
        self._clock = clock
        self._readiness = readiness
        self._metrics = metrics

    async def status(self) -> JsonObject:
        """Role, epoch, readiness, active runs and workers, pending approvals, queues."""
        now = self._clock.now()
        queues = await self._store.queue_stats()
        activity = await self._store.activity(now - WORKER_ACTIVE_WINDOW)
        ready = self._readiness
        return {
            "status": "ready" if ready.ready else ready.reason,
            "role": ready.role,
            "epoch": ready.epoch,
            "runs_active": activity.runs_active,
            "workers_active": activity.workers_active,
            "approvals_pending": activity.approvals_pending,
            "queues": [resources.queue(q, now) for q in queues],
        }

    async def metrics(self) -> bytes:
        """Every metric, the database's gauges read now (the Prometheus text format).

        A database that does not answer is itself a metric (``workload_database_up`` 0); the
        scrape still answers, with the counters this process keeps.
        """
        now = self._clock.now()
        try:
            queues = await self._store.queue_stats()
            activity = await self._store.activity(now - WORKER_ACTIVE_WINDOW)
        except SystemFault:
            queues, activity = None, None
        ready = self._readiness
        self._metrics.refresh(
            queues=queues,
            activity=activity,
            now=now,
            leading=ready.leading,
            epoch=ready.epoch,
            connections=self._store.connection_counts(),
        )
        return self._metrics.exposition()
