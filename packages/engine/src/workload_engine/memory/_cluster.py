"""What ``GET /api/v1/cluster`` shows of an in-memory store: its shards, no members (SPEC §16)."""

from __future__ import annotations

import anyio

from workload_domain.shards import Member
from workload_engine.memory._part import MemoryState

__all__ = ["MemoryCluster"]


class MemoryCluster(MemoryState):
    """The ``ClusterReads`` part of the in-memory store."""

    async def cluster(self) -> tuple[int, tuple[Member, ...]]:
        """One process per store: no member is recorded (the API shows the process itself)."""
        await anyio.lowlevel.checkpoint()
        return self.shards_total, ()
