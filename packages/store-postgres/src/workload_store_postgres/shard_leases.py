"""A replica's membership and shard leases in PostgreSQL (SPEC §16).

:class:`PostgresShardLeases` implements the ``ShardLeases`` port on a dedicated session (as the
coordinator lock does, and for the same reasons: see :mod:`._session`), shown in
``pg_stat_activity`` as ``application_name = 'workload-replica'``:

- **Joining** takes the coordinator's advisory lock in *shared* mode: replicas hold it together,
  a coordinator (§7, §14) exclusively, so a replica never joins a database a coordinator uses,
  nor the reverse (``ModeConflict``: exit 3). It moves the coordinator epoch on (after the
  coordinator writes in flight): a coordinator whose lock vanished just before writes nothing.
  It registers the replica (``replicas``) with the session's backend pid and start, which make
  it *live* only while this very session lives: a killed replica's shards are free at once, a
  frozen or partitioned one's once its lease (3 lock checks) has run out.
- **Renewing**, every lock check, is one statement: the replica's heartbeat, its shards' leases
  (each in the epoch it took it in: one taken over meanwhile is not renewed, and that is a
  ``ShardsLost``), and the cluster as it stands (live replicas, free shards).
- **Taking** a free shard is one transaction: the shard's row locked, the writes of its previous
  owner still in flight ended (they hold the shard's fence), the fence taken exclusively (it
  waits for every write of the old epoch), the epoch incremented (``workload_shard_fence``
  refuses every later write of an older one).
- **Giving** a shard back clears its owner; **departing** (a stop) counts the replica out of
  the others' shares while it hands its shards over, each taken as soon as it is given;
  **leaving** frees what is left and deregisters.

Errors: psycopg exceptions never leave this module. Failing to reach the database while joining
raises ``StoreUnavailable``; any failure afterwards, ``ShardsLost`` (fail-stop).
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from typing import Any, Final

import psycopg

from workload_domain.errors import ModeConflict, ShardsLost, StoreUnavailable
from workload_domain.shards import ClusterPicture, ShardFence, check_replica_id
from workload_store_postgres._queries import query
from workload_store_postgres._session import Conn, DedicatedSession, describe, fetch_one
from workload_store_postgres.lock import COORDINATOR_LOCK_KEY, FENCE_KEY, advisory_lock_ids

__all__ = ["APPLICATION_NAME", "SHARD_FENCE_KEY", "PostgresShardLeases"]

APPLICATION_NAME: Final = "workload-replica"
SHARD_FENCE_KEY: Final = 0x574B5348
"""The first key of a shard's fence (``"WKSH"``; the second is the shard), as migration 0008's
``workload_shard_fence``. In ``pg_locks``: ``classid`` this, ``objid`` the shard, ``objsubid``
2."""


class PostgresShardLeases:
    """A replica's membership of the cluster and the leases of its shards (see the module)."""

    def __init__(
        self,
        url: str,
        replica_id: str,
        *,
        lease_seconds: float = 3,
        connect_timeout: float = 5,
        check_timeout: float = 2,
    ) -> None:
        """Describe the membership; nothing is opened until :meth:`join`.

        Args:
            url: Any libpq connection string or URL.
            replica_id: This replica's id (``^[A-Za-z0-9._-]{1,128}$``).
            lease_seconds: How long the membership and the shards' leases last without a
                renewal (3 lock checks, SPEC §16).
            connect_timeout: Seconds allowed to connect and join.
            check_timeout: Seconds allowed for one renewal, take or give.
        """
        if lease_seconds <= 0 or connect_timeout <= 0 or check_timeout <= 0:
            raise ValueError("the lease and the timeouts must be positive")
        self.replica_id = check_replica_id(replica_id)
        self._lease = lease_seconds
        self._connect_timeout = connect_timeout
        self._check_timeout = check_timeout
        self._session = DedicatedSession(
            url, application_name=APPLICATION_NAME, connect_timeout=connect_timeout
        )
        self._conn: Conn | None = None
        self._lock_wait_ms = max(1, int(check_timeout * 1000 // 2))
        self.shards_total: int | None = None

    async def join(self) -> int:
        """Register this replica; return the database's number of shards (see the port)."""
        if self._conn is not None:
            raise RuntimeError("this replica has joined already")
        conn = await self._session.open(self._check_timeout, "join the cluster")
        try:
            total = await self._session.bounded(conn, self._register, self._connect_timeout * 2)
        except (psycopg.Error, OSError, TimeoutError) as exc:
            await self._session.close(conn)
            raise StoreUnavailable(
                f"PostgreSQL failed while joining the cluster: {describe(exc)}"
            ) from exc
        except BaseException:
            await self._session.close(conn)
            raise
        self._conn, self.shards_total = conn, total
        return total

    async def _register(self, conn: Conn) -> int:
        row = await fetch_one(conn, query("join_cluster"), {"key": COORDINATOR_LOCK_KEY})
        assert row is not None  # a SELECT without FROM returns one row
        joined, _pid, backend_start, total = row
        if not joined:
            raise ModeConflict(
                "a coordinator (`workload serve` without --replica, perhaps with --standby "
                "replicas) uses this database; replicas cannot join it until it stops",
                mode_in_use="coordinator",
            )
        async with conn.transaction():
            # No coordinator can take the lock now (it is held shared); one whose lock vanished
            # before its own check noticed is fenced out (SPEC §14), after its writes in flight.
            classid, objid = advisory_lock_ids(FENCE_KEY)
            await conn.execute(
                query("end_coordinator_writers"), {"classid": classid, "objid": objid}
            )
            await conn.execute(query("fence_coordinators"), {"fence_key": FENCE_KEY})
            await conn.execute(query("bump_coordinator_epoch"))
            found = await fetch_one(conn, query("lock_replica"), {"replica_id": self.replica_id})
            if found is not None and found[0]:
                raise ModeConflict(
                    f"a live replica already has the id {self.replica_id!r}: give each replica "
                    "its own WORKLOAD_REPLICA_ID",
                    mode_in_use="replica",
                )
            params = {
                "replica_id": self.replica_id,
                "lease": self._lease,
                "backend_start": backend_start,
            }
            await conn.execute(query("register_replica"), params)
        return int(total)

    async def renew(self, held: Collection[ShardFence]) -> ClusterPicture:
        """Heartbeat, renew the leases held, see the cluster (see the port)."""
        fences = sorted(held, key=lambda f: f.shard)
        params = {
            "replica_id": self.replica_id,
            "lease": self._lease,
            "shards": [f.shard for f in fences],
            "epochs": [f.epoch for f in fences],
        }
        row = await self._run("renewing the shard leases", query("renew_membership"), params)
        assert row is not None  # a SELECT without FROM returns one row
        registered, renewed, members, free, owned, total = row
        if not registered:
            raise ShardsLost(f"replica {self.replica_id!r} is no longer registered in the cluster")
        lost = tuple(f.shard for f in fences if f.shard not in set(renewed))
        if lost:
            raise ShardsLost(
                f"replica {self.replica_id!r} lost shards {list(lost)}: taken over in a newer "
                "epoch (its leases ran out)",
                lost,
            )
        return ClusterPicture(
            shards_total=int(total),
            members=tuple(sorted({*members, self.replica_id})),
            free=tuple(int(s) for s in free),
            owned={str(k): int(v) for k, v in dict(owned).items()},
        )

    async def take(self, shard: int) -> ShardFence | None:
        """Take a free shard in a new epoch (see the port)."""
        params = {
            "shard": shard,
            "replica_id": self.replica_id,
            "lease": self._lease,
            "fence_key": SHARD_FENCE_KEY,
        }

        async def take(conn: Conn) -> int | None:
            try:
                async with conn.transaction():
                    # Waiting for a lock (another replica taking it, an old writer that is slow
                    # to end) gives up before the bound: the shard is tried again next time.
                    await conn.execute(query("take_lock_timeout"), {"ms": self._lock_wait_ms})
                    free = await fetch_one(conn, query("lock_shard"), params)
                    if free is None or not free[0]:
                        return None
                    await conn.execute(query("end_shard_writers"), params)
                    await conn.execute(query("fence_shard"), params)
                    taken = await fetch_one(conn, query("take_shard"), params)
            except psycopg.errors.LockNotAvailable:
                return None
            return None if taken is None else int(taken[0])

        epoch = await self._bounded_or_lost(
            f"taking shard {shard}", take, seconds=self._check_timeout * 2
        )
        return None if epoch is None else ShardFence(shard, epoch)

    async def give(self, fence: ShardFence) -> None:
        """Release a shard this replica held (see the port)."""
        params = {"shard": fence.shard, "epoch": fence.epoch, "replica_id": self.replica_id}
        await self._run(f"giving shard {fence.shard} back", query("give_shard"), params)

    async def depart(self) -> None:
        """Say this replica is leaving: no member to share with from now on (see the port)."""
        params = {"replica_id": self.replica_id}
        await self._run("saying the replica leaves", query("depart_cluster"), params)

    async def leave(self) -> None:
        """Free what is left, deregister, close (idempotent; never raises)."""
        conn, self._conn = self._conn, None
        if conn is None:
            await self._session.settle()
            return
        if not (conn.closed or conn.broken):
            # On failure its lease runs out and its session is gone: the others take over.
            with contextlib.suppress(psycopg.Error, OSError, TimeoutError):
                await self._session.bounded(conn, self._deregister, self._check_timeout)
        await self._session.close(conn)
        await self._session.settle()

    async def _deregister(self, conn: Conn) -> None:
        await conn.execute(query("leave_replicas"), {"replica_id": self.replica_id})
        await conn.execute(query("leave_cluster"), {"key": COORDINATOR_LOCK_KEY})

    async def _run(self, doing: str, sql: Any, params: Any) -> tuple[Any, ...] | None:
        async def run(conn: Conn) -> tuple[Any, ...] | None:
            cursor = await conn.execute(sql, params)
            return await cursor.fetchone() if cursor.description is not None else None

        found: tuple[Any, ...] | None = await self._bounded_or_lost(doing, run)
        return found

    async def _bounded_or_lost(
        self, doing: str, operation: Any, seconds: float | None = None
    ) -> Any:
        """Run ``operation`` on the membership's session; any failure is ``ShardsLost``."""
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            self._conn = None
            raise ShardsLost(f"{doing} failed: the membership's connection is closed")
        try:
            return await self._session.bounded(conn, operation, seconds or self._check_timeout)
        except TimeoutError as exc:
            self._conn = None
            raise ShardsLost(f"{doing} did not answer within {self._check_timeout:g} s") from exc
        except (psycopg.Error, OSError) as exc:
            self._conn = None
            await self._session.close(conn)
            raise ShardsLost(f"{doing} failed: {describe(exc)}") from exc
