"""The service's status and its cluster (SPEC §16)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from workload_sdk.models._common import _Resource
from workload_sdk.models._workers import QueueStats

__all__ = [
    "Cluster",
    "ClusterMember",
    "ReplicaShare",
    "ServiceStatus",
]


class ReplicaShare(_Resource):
    """A live replica and how many shards it owns (in :class:`ServiceStatus`)."""

    replica_id: str
    shards_owned: int


class ServiceStatus(_Resource):
    """The service at a glance (``GET /status``, SPEC §12): what ``workload status`` shows."""

    status: str
    """``ready``, or why not (``starting``, ``stopping``, ``failed``)."""
    role: str
    """``leader`` (the answering process holds the coordinator lock), ``standby``, or
    ``replica`` (one of the replicas that all execute, SPEC §16)."""
    epoch: int | None
    """The coordinator epoch (SPEC §14), or None where epochs do not exist."""
    runs_active: int
    workers_active: int
    approvals_pending: int
    queues: list[QueueStats]
    replica_id: str | None = None
    """The answering process's replica id, if it is a replica (SPEC §16)."""
    shards_total: int | None = None
    """The database's number of shards (None from servers older than replicas)."""
    replicas: list[ReplicaShare] = Field(default_factory=list)
    """The live replicas (or the coordinator leading alone) and how many shards each owns."""


class ClusterMember(_Resource):
    """A live replica and the shards it owns (SPEC §16)."""

    replica_id: str
    shards: list[int]
    started_at: datetime
    last_seen_at: datetime


class Cluster(_Resource):
    """The live replicas and their shards (``GET /cluster``, SPEC §16).

    A coordinator leading alone is the one member, owning every shard.
    """

    shards_total: int
    replicas: list[ClusterMember]
