"""``workload status``: the service at a glance, on one screen (SPEC §12).

Role and epoch of the process that answers, whether it is ready, runs not yet terminal,
workers seen lately, approvals waiting, every queue with its work, and the replicas with how
many shards each owns (SPEC §16) — one request (``GET /api/v1/status``).
"""

from __future__ import annotations

from pydantic import BaseModel

from workload_cli._output import Column
from workload_cli._session import Session, client_command
from workload_cli._views import QUEUE_COLUMNS
from workload_sdk import ReplicaShare

__all__ = ["status"]


_REPLICA_COLUMNS: list[Column[ReplicaShare]] = [
    Column("REPLICA", lambda r: r.replica_id, no_wrap=True),
    Column("SHARDS", lambda r: r.shards_owned, no_wrap=True),
]


class _Summary(BaseModel):
    role: str
    epoch: int | None
    status: str
    runs_active: int
    workers_active: int
    approvals_pending: int


class _ReplicaSummary(_Summary):
    replica_id: str | None


@client_command
def status(s: Session) -> None:
    """Show the service at a glance (viewer).

    Leader, standby or replica, epoch, readiness, active runs and workers, pending approvals,
    queues, and the replicas with their shard counts.
    """
    current = s.client.status()
    if s.out.is_json:
        s.out.json(current.model_dump(mode="json"))
        return
    summary = _ReplicaSummary if current.replica_id is not None else _Summary
    s.out.resource(summary.model_validate(current.model_dump()))
    s.out.echo("")
    s.out.listing(current.queues, QUEUE_COLUMNS)
    if current.replicas:
        s.out.echo("")
        s.out.listing(current.replicas, _REPLICA_COLUMNS)
