"""What ``GET /api/v1/cluster`` shows: the live replicas and the shards they hold (SPEC §16)."""

from __future__ import annotations

from workload_domain.shards import Member
from workload_store_postgres._db import one, rows
from workload_store_postgres._part import StorePart

__all__ = ["Cluster"]


class Cluster(StorePart):
    """The ``ClusterReads`` part of the store."""

    async def cluster(self) -> tuple[int, tuple[Member, ...]]:
        """The number of shards and the live members (see ``ClusterReads``).

        A replica is live while its lease runs and its membership session is alive; with no
        replica, a coordinator whose lease runs (§7, §14) is the one member, with every shard.
        """
        async with self._db.single() as conn:
            found = await rows(conn, "cluster_members", {})
            total = int(found[0]["shards_total"])
            members = tuple(
                Member(r["replica_id"], r["started_at"], r["last_seen_at"], tuple(r["shards"]))
                for r in found
                if r["replica_id"] is not None
            )
            if members:
                return total, members
            leader = await one(conn, "cluster_leader", {})
        if leader is None or leader["since"] is None or leader["renewed_at"] is None:
            return total, ()
        member = Member(
            leader["leader"], leader["since"], leader["renewed_at"], tuple(range(total))
        )
        return total, (member,)
