"""``workload cluster``: the replicas that execute and the shards each owns (SPEC §16).

One request (``GET /api/v1/cluster``). A coordinator leading alone (§7, §14) shows as the one
member, owning every shard. The shard lists are written as ranges (``0-15,32``).
"""

from __future__ import annotations

from collections.abc import Sequence

from workload_cli._output import Column
from workload_cli._session import Session, client_command
from workload_sdk import ClusterMember

__all__ = ["CLUSTER_COLUMNS", "cluster", "shard_ranges"]


def shard_ranges(shards: Sequence[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` as ``0-2,5,7-8``."""
    parts: list[str] = []
    ordered = sorted(shards)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


CLUSTER_COLUMNS: list[Column[ClusterMember]] = [
    Column("REPLICA", lambda m: m.replica_id, no_wrap=True),
    Column("SHARDS", lambda m: len(m.shards), no_wrap=True),
    Column("OWNS", lambda m: shard_ranges(m.shards)),
    Column("STARTED", lambda m: m.started_at),
    Column("LAST_SEEN", lambda m: m.last_seen_at),
]


@client_command
def cluster(s: Session) -> None:
    """Show the replicas that execute and the shards each owns (viewer, SPEC §16)."""
    current = s.client.cluster.get()
    if s.out.is_json:
        s.out.json(current.model_dump(mode="json"))
        return
    s.out.echo(f"{current.shards_total} shards, {len(current.replicas)} live replica(s)")
    s.out.listing(current.replicas, CLUSTER_COLUMNS)
