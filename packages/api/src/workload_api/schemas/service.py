"""The service's own resources: problems, health, readiness, the cluster and status."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from workload_api.schemas._common import _Out
from workload_api.schemas.workers import QueueItem

__all__ = [
    "Cluster",
    "ClusterMember",
    "Health",
    "ProblemDetails",
    "ProblemItem",
    "Ready",
    "ReplicaShare",
    "ServiceStatus",
]


class ProblemItem(_Out):
    """One validation problem: where (a JSON Pointer) and what."""

    path: str
    message: str


class ProblemDetails(_Out):
    """An RFC 9457 problem document."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    request_id: str
    errors: list[ProblemItem] | None = None
    reason: str | None = Field(
        default=None,
        description="lease_lost only: expired, canceled, finished, timed_out or unknown",
    )


class Health(_Out):
    """Liveness."""

    status: str


_ROLE = (
    '"leader" (this process holds the coordinator lock), "standby", or "replica" (one of the '
    "replicas that all execute, SPEC §16)"
)


class Ready(_Out):
    """Readiness (SPEC §12, §16): whether this process serves, and what it is."""

    status: str = Field(description='"ready", or why not: starting, stopping, failed')
    role: str = Field(description=_ROLE)
    epoch: int | None = Field(
        default=None,
        description="a leader's or a standby's coordinator epoch (SPEC §14); null without one",
    )
    replica_id: str | None = Field(default=None, description="a replica's id (SPEC §16)")
    shards_owned: int | None = Field(
        default=None, description="how many shards a replica owns now (SPEC §16)"
    )


class ClusterMember(_Out):
    """A live replica and the shards it owns (SPEC §16)."""

    replica_id: str
    shards: list[int]
    started_at: datetime
    last_seen_at: datetime


class Cluster(_Out):
    """The live replicas and their shards (``GET /api/v1/cluster``, SPEC §16).

    A coordinator leading alone (§7, §14) is the one member, owning every shard.
    """

    shards_total: int = Field(description="the database's number of shards (fixed)")
    replicas: list[ClusterMember]


class ReplicaShare(_Out):
    """A live replica and how many shards it owns."""

    replica_id: str
    shards_owned: int


class ServiceStatus(_Out):
    """The service at a glance (``workload status``)."""

    status: str = Field(description='"ready", or why not: starting, stopping, failed')
    role: str = Field(description=_ROLE)
    epoch: int | None = Field(description="the coordinator epoch (SPEC §14); null without one")
    replica_id: str | None = Field(description="this process's replica id, if a replica")
    runs_active: int = Field(description="runs not yet terminal")
    workers_active: int = Field(
        description="workers seen within the last 90 seconds, or holding work"
    )
    approvals_pending: int = Field(description="approvals waiting for a decision")
    queues: list[QueueItem]
    shards_total: int = Field(description="the database's number of shards (SPEC §16)")
    replicas: list[ReplicaShare] = Field(
        description="the live replicas (or the coordinator leading alone), by id"
    )
