"""Coordination ports: the coordinator lock, shard leases, the cluster and announcements."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from workload_domain.shards import ClusterPicture, Member, ShardFence

__all__ = ["ClusterReads", "CoordinatorLock", "Notifications", "NotifyHandlers", "ShardLeases"]


class CoordinatorLock(Protocol):
    """The lock that makes one process the only coordinator of a database."""

    epoch: int | None
    """The coordinator epoch the lock was acquired in (SPEC §14); None until then."""

    async def acquire(self) -> bool:
        """Try to take the lock at once; ``False`` if another coordinator holds it."""
        ...

    async def check(self) -> None:
        """Prove the lock is still held; raise :class:`~workload_domain.errors.LockLost`."""
        ...

    async def release(self) -> None:
        """Give the lock up (idempotent)."""
        ...


class ShardLeases(Protocol):
    """A replica's membership of its database's cluster and its shard leases (SPEC §16).

    Joined once, on a connection of its own; renewed every lock check interval. A shard is
    taken in a new epoch of its own (:class:`~workload_domain.shards.ShardFence`), after every
    write of the previous epoch in flight, and given back when this replica hands it over.
    """

    replica_id: str
    """This replica's id (``WORKLOAD_REPLICA_ID``)."""

    async def join(self) -> int:
        """Register this replica; return the database's number of shards.

        Raises:
            ModeConflict: a coordinator without ``--replica`` (§7, §14) uses the database, or a
                live replica already has this id.
            StoreUnavailable: the database cannot be reached (nothing is left open).
        """
        ...

    async def renew(self, held: Collection[ShardFence]) -> ClusterPicture:
        """Say this replica is alive, extend the leases it holds, and see the cluster.

        Raises:
            ShardsLost: a held shard is no longer this replica's in its epoch, or the renewal
                failed or timed out (fail-stop: another replica may take the shards).
        """
        ...

    async def take(self, shard: int) -> ShardFence | None:
        """Take a free shard in a new epoch; None if someone holds it (or took it first).

        Raises:
            ShardsLost: the membership's connection failed (fail-stop).
        """
        ...

    async def give(self, fence: ShardFence) -> None:
        """Release a shard this replica held (its runs are no longer executed here)."""
        ...

    async def depart(self) -> None:
        """Say this replica is leaving (a stop): the others count it out of their shares.

        From their next renewal they take each shard it gives up; it still holds, and renews,
        the shards it has not given up yet.

        Raises:
            ShardsLost: the membership's connection failed (fail-stop).
        """
        ...

    async def leave(self) -> None:
        """Release every shard, deregister and close (idempotent; never raises)."""
        ...


class ClusterReads(Protocol):
    """What ``GET /api/v1/cluster`` shows (SPEC §16)."""

    async def cluster(self) -> tuple[int, tuple[Member, ...]]:
        """The number of shards and the live members, each with the shards it holds.

        Live replicas by id; with none, a coordinator leading by itself (§7, §14) is the one
        member, holding every shard. An empty tuple: nobody executes (or it cannot be seen).
        """
        ...


@dataclass(frozen=True, slots=True)
class NotifyHandlers:
    """What a replica does when another one announces something (SPEC §14)."""

    run: Callable[[str], None]
    """A run was created or changed through another replica's API."""
    work: Callable[[Sequence[tuple[str, str]] | None], None]
    """Remote work of these ``(queue, action)`` pairs was queued: the waiting claims that match
    look again (None: unknown work, every waiting claim looks)."""
    step: Callable[[str, str, int], None]
    """A tool call of ``(run_id, task_key, attempt)`` ended: its agent's loop reads on."""
    listening: Callable[[], None] = lambda: None
    """The listener listens (again): at each connection, once its ``LISTEN``s are in place.
    What was announced before was not heard (while it reconnected, or before it first
    connected), so whatever waits for an announcement looks again now."""


class Notifications(Protocol):
    """Announcements of other replicas (``LISTEN/NOTIFY``)."""

    async def run(self, handlers: NotifyHandlers) -> None:
        """Hand every announcement to ``handlers`` until cancelled."""
        ...

    async def hear_shards(self, shards: Collection[int]) -> None:
        """Hear the runs of exactly these shards from now on (a replica, SPEC §16).

        Returns once the listener listens to them — or at once while it is not connected (it
        listens to them when it reconnects; the owner's sweep covers what it missed).
        """
        ...
