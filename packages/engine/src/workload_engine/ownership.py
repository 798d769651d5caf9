"""Which runs a replica executes: the shards it holds (SPEC §16).

A replica's :class:`~workload_engine.engine.Engine` executes a run only while it holds the run's
shard, and not while it hands that shard over. :class:`ShardOwnership` is that picture, kept by
the replica's membership (which takes and gives shards) and read by the engine (which runs it
accepts, and which fence their runners' writes carry). A process that is not a replica has no
ownership: it executes every run (§7, §14).
"""

from __future__ import annotations

from workload_domain.shards import ShardFence, shard_of

__all__ = ["ShardOwnership"]


class ShardOwnership:
    """The shards a replica holds, each in its epoch, and those it is handing over."""

    def __init__(self, shards_total: int) -> None:
        self.shards_total = shards_total
        self._held: dict[int, ShardFence] = {}
        self._leaving: set[int] = set()

    def shard_of(self, run_id: str) -> int:
        """The shard of ``run_id``."""
        return shard_of(run_id, self.shards_total)

    def accepts(self, run_id: str) -> bool:
        """Whether this replica executes ``run_id`` now: it holds its shard, not leaving it."""
        shard = shard_of(run_id, self.shards_total)
        return shard in self._held and shard not in self._leaving

    def fence_for(self, run_id: str) -> ShardFence | None:
        """The fence of ``run_id``'s shard while this replica holds it (leaving it too)."""
        return self._held.get(shard_of(run_id, self.shards_total))

    def hold(self, fence: ShardFence) -> None:
        """This replica took ``fence.shard`` in ``fence.epoch``."""
        self._held[fence.shard] = fence
        self._leaving.discard(fence.shard)

    def leave(self, shard: int) -> None:
        """This replica hands ``shard`` over: its runs are no longer accepted."""
        if shard in self._held:
            self._leaving.add(shard)

    def drop(self, shard: int) -> None:
        """``shard`` is no longer this replica's (given up, or lost)."""
        self._held.pop(shard, None)
        self._leaving.discard(shard)

    @property
    def held(self) -> tuple[ShardFence, ...]:
        """The shards held (leaving ones too), by number."""
        return tuple(self._held[s] for s in sorted(self._held))

    @property
    def serving(self) -> tuple[int, ...]:
        """The shards whose runs this replica executes (held and not leaving), by number."""
        return tuple(s for s in sorted(self._held) if s not in self._leaving)
