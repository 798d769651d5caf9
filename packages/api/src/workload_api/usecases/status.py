"""The service at a glance (SPEC §12, §16): ``/api/v1/status``, ``/api/v1/cluster``, ``/metrics``.

They read what the store knows now — queues, runs not yet terminal, workers seen lately,
pending approvals, the live replicas and their shards — and what this process is: leader,
standby or replica, and its epoch.
"""

from __future__ import annotations

from workload_api import resources
from workload_api.readiness import Readiness
from workload_api.telemetry import Metrics
from workload_domain.errors import SystemFault
from workload_domain.jsonvalues import JsonObject
from workload_domain.ports import Clock, Store
from workload_domain.shards import Member
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
        total, members = await self._members()
        return {
            "status": "ready" if ready.ready else ready.reason,
            "role": ready.role,
            "epoch": ready.epoch,
            "replica_id": ready.replica_id,
            "runs_active": activity.runs_active,
            "workers_active": activity.workers_active,
            "approvals_pending": activity.approvals_pending,
            "queues": [resources.queue(q, now) for q in queues],
            "shards_total": total,
            "replicas": [
                {"replica_id": m.replica_id, "shards_owned": len(m.shards)} for m in members
            ],
        }

    async def cluster(self) -> JsonObject:
        """The live replicas and the shards each holds (``GET /api/v1/cluster``, SPEC §16)."""
        total, members = await self._members()
        return {"shards_total": total, "replicas": [resources.member(m) for m in members]}

    async def _members(self) -> tuple[int, tuple[Member, ...]]:
        """The cluster as the store sees it; a process leading alone shows itself if unseen."""
        total, members = await self._store.cluster()
        ready = self._readiness
        if not members and ready.leading and ready.name is not None:
            # The in-memory store (run-local, tests) records no member: this process is it.
            now = self._clock.now()
            members = (Member(ready.name, ready.since or now, now, tuple(range(total))),)
        return total, members

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
            shards_owned=ready.shards_owned,
            replicas_live=ready.replicas_live,
        )
        return self._metrics.exposition()
