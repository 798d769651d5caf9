"""The coordinator lock: one coordinator per database (SPEC §5, §7).

:class:`PostgresCoordinatorLock` implements the ``CoordinatorLock`` port with a *session-level*
PostgreSQL advisory lock, ``pg_try_advisory_lock(COORDINATOR_LOCK_KEY)``.

Why a dedicated connection
    A session-level advisory lock belongs to the backend (server process) that took it and lives
    exactly as long as that backend's session. A pooled connection is shared, reset and recycled
    by the pool: the lock would be released (or leaked to an unrelated caller) behind the
    coordinator's back, and a pool may transparently replace a broken connection, silently
    dropping the lock. So the lock gets its own autocommit ``psycopg.AsyncConnection`` that is
    never pooled, never reconnected, and used for nothing else (it shows up in
    ``pg_stat_activity`` as ``application_name = 'workload-coordinator-lock'``). When that
    connection dies, the lock is gone for good: the coordinator must fail-stop, never re-take it.

Why :meth:`~PostgresCoordinatorLock.check` reads ``pg_locks``
    A connection that answers ``SELECT 1`` does not prove the lock is held: the session could
    have unlocked it (``pg_advisory_unlock_all()``, ``DISCARD ALL``), or the client library could
    have reconnected to a new backend that never held it. ``check`` therefore asks the server
    whether *this* backend (``pid = pg_backend_pid()``, also compared with the pid remembered at
    acquisition) holds a *granted* advisory lock on *this* database with this key. A 64-bit key
    ``k`` appears in ``pg_locks`` as (verified against PostgreSQL 18)::

        locktype = 'advisory'
        database = <oid of the current database>   -- advisory locks are per database
        classid  = (k >> 32) & 0xFFFFFFFF          -- high 32 bits, as an unsigned oid
        objid    = k & 0xFFFFFFFF                  -- low 32 bits, as an unsigned oid
        objsubid = 1                               -- 1: one bigint key; 2: two int4 keys

    (negative keys use their two's-complement bits, e.g. ``-1`` is ``classid = objid =
    4294967295``). The check is bounded by a short timeout, both on the server
    (``statement_timeout``) and on the client, so a dead network raises
    :class:`~workload_domain.errors.LockLost` instead of hanging.

Why replicas matter here
    Replicas (``--replica``, SPEC §16) hold this same lock in *shared* mode while they run. A
    coordinator finding it held so does not stand by, and never ends their sessions: it raises
    :class:`~workload_domain.errors.ModeConflict` (exit 3), as a replica does the other way.

Errors: psycopg exceptions never leave this module. Failing to reach the database while
acquiring raises :class:`~workload_domain.errors.StoreUnavailable`; any doubt about the lock
after it was acquired raises :class:`~workload_domain.errors.LockLost`. The dedicated session
and its bounded operations are :class:`~workload_store_postgres._session.DedicatedSession`.
"""

from __future__ import annotations

from typing import Any, Final

import psycopg

from workload_domain.errors import LockLost, ModeConflict, StoreUnavailable
from workload_store_postgres._replica_grace import refuse_recent_replicas
from workload_store_postgres._session import Conn as _Conn
from workload_store_postgres._session import DedicatedSession, describe, fetch_all, fetch_one
from workload_store_postgres.migrations import MIGRATION_LOCK_KEY

__all__ = [
    "APPLICATION_NAME",
    "COORDINATOR_LOCK_KEY",
    "FENCE_KEY",
    "PostgresCoordinatorLock",
    "advisory_lock_ids",
]

COORDINATOR_LOCK_KEY: Final = 0x574B4C44_434F5244
"""The advisory-lock key of the coordinator: ASCII ``"WKLDCORD"`` read as a 64-bit integer.

It differs from ``MIGRATION_LOCK_KEY`` (``"WKLDMIGR"``) so that running migrations and
running a coordinator never block each other. In ``pg_locks`` it is ``classid = 1464552516``,
``objid = 1129271876``, ``objsubid = 1``.
"""

FENCE_KEY: Final = 0x574B4C44_46454E43
"""The advisory-lock key of the fence (``"WKLDFENC"``, as in migration 0007's
``workload_fence``): writers hold it shared for a transaction, a new leader exclusively while it
increments the epoch (SPEC §14)."""

APPLICATION_NAME: Final = "workload-coordinator-lock"
"""The ``application_name`` of the lock's connection, to find it in ``pg_stat_activity``."""

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_UINT32_MASK: Final = 0xFFFFFFFF

_ACQUIRE = "SELECT pg_try_advisory_lock(%s::bigint), pg_backend_pid()"
_CHECK = """
SELECT pg_backend_pid(),
       EXISTS (
           SELECT 1
           FROM pg_locks
           WHERE locktype = 'advisory'
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
             AND classid = %(classid)s::bigint::oid
             AND objid = %(objid)s::bigint::oid
             AND objsubid = 1
             AND granted
             AND pid = pg_backend_pid()
       )
"""
_UNLOCK = "SELECT pg_advisory_unlock(%s::bigint)"
_HOLDERS = """
SELECT pid FROM pg_locks
WHERE locktype = 'advisory'
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND classid = %(classid)s::bigint::oid AND objid = %(objid)s::bigint::oid AND objsubid = 1
  AND granted AND pid <> pg_backend_pid()
"""
_SHARED = """
SELECT EXISTS (
    SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory'
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND classid = %(classid)s::bigint::oid AND objid = %(objid)s::bigint::oid AND objsubid = 1
      AND mode = 'ShareLock' AND granted
)
"""
_LEASE_EXPIRED = "SELECT lease_expires_at IS NULL OR lease_expires_at < now() FROM coordinator"
_BUMP = """
UPDATE coordinator
SET epoch = epoch + 1, leader = %(leader)s,
    lease_expires_at = statement_timestamp() + make_interval(secs => %(lease)s),
    since = statement_timestamp(), renewed_at = statement_timestamp()
RETURNING epoch
"""
"""After the wait on the fence (writes in flight): the lease counts from then (ADR 0047)."""
_RENEW = """
UPDATE coordinator
SET lease_expires_at = now() + make_interval(secs => %(lease)s), renewed_at = now()
WHERE epoch = %(epoch)s AND set_config('synchronous_commit', 'off', true) = 'off'
RETURNING epoch
"""
"""A renewal's commit does not wait for the disk (ADR 0047): a lease is worth nothing after a
crash of PostgreSQL, which ends the leader's session (and its lock) anyway."""
_CURRENT_EPOCH = "SELECT epoch FROM coordinator"
_REPLICAS_USE_IT = (
    "replicas (`workload serve --replica`) use this database; a coordinator cannot run beside "
    "them until they stop"
)


def advisory_lock_ids(key: int) -> tuple[int, int]:
    """Split a 64-bit advisory-lock key into its ``pg_locks`` ``(classid, objid)``.

    Args:
        key: A signed 64-bit key, as passed to ``pg_advisory_lock(bigint)``.

    Returns:
        The high and the low 32 bits of the key's two's-complement form, as unsigned integers.

    Raises:
        ValueError: ``key`` does not fit in a signed 64-bit integer.
    """
    if not _INT64_MIN <= key <= _INT64_MAX:
        raise ValueError(f"advisory-lock key {key} does not fit in a signed 64-bit integer")
    return (key >> 32) & _UINT32_MASK, key & _UINT32_MASK


class PostgresCoordinatorLock:
    """A PostgreSQL session advisory lock held on a dedicated connection.

    One object takes the lock at most once: after :meth:`release`, or after :meth:`check`
    found the lock lost, :meth:`acquire` refuses (a coordinator never re-takes its lock in the
    same process; SPEC §7). Acquiring may be retried while it keeps returning ``False`` or
    raising ``StoreUnavailable`` (a failed try leaves nothing open: a standby retries through a
    database outage, SPEC §14).

    Example::

        lock = PostgresCoordinatorLock(url)
        if not await lock.acquire():
            ...  # another coordinator holds it: exit 3
        try:
            await lock.check()  # every interval; LockLost -> fail-stop
        finally:
            await lock.release()
    """

    def __init__(
        self,
        url: str,
        *,
        key: int = COORDINATOR_LOCK_KEY,
        connect_timeout: float = 5,
        check_timeout: float = 2,
        lease_seconds: float = 3,
        take_over_stale: bool = False,
        leader: str = "",
    ) -> None:
        """Describe the lock; nothing is opened until :meth:`acquire`.

        Args:
            url: Any libpq connection string or URL (TCP or Unix socket).
            key: The 64-bit advisory-lock key; must not be the migrations' key.
            connect_timeout: Seconds allowed to connect and take the lock (libpq rounds the
                connection part up to whole seconds, at least 2).
            check_timeout: Seconds allowed for one :meth:`check` (and for unlocking).
            lease_seconds: How long the leadership lasts without a :meth:`check` renewing it
                (SPEC §14): a standby takes over from a leader whose lease ran out.
            take_over_stale: When the lock is busy but its holder's lease ran out (a frozen or
                partitioned leader), end the holder's session and take the lock (``--standby``).
            leader: This process's name, recorded with the epoch.

        Raises:
            ValueError: the key is out of range or is the migrations' key, or a timeout is not
                positive.
        """
        self._classid, self._objid = advisory_lock_ids(key)
        if key == MIGRATION_LOCK_KEY:
            raise ValueError("the coordinator lock key must differ from MIGRATION_LOCK_KEY")
        if connect_timeout <= 0 or check_timeout <= 0:
            raise ValueError("timeouts must be positive")
        self._session = DedicatedSession(
            url, application_name=APPLICATION_NAME, connect_timeout=connect_timeout
        )
        self._key = key
        self._connect_timeout = connect_timeout
        self._check_timeout = check_timeout
        self._conn: _Conn | None = None
        self._pid: int | None = None
        self._finished = False
        self._lease = lease_seconds
        self._take_over_stale = take_over_stale
        self._leader = leader
        self.epoch: int | None = None
        """The coordinator epoch this lock was acquired in (None until acquired)."""

    @property
    def key(self) -> int:
        """The advisory-lock key."""
        return self._key

    @property
    def backend_pid(self) -> int | None:
        """The pid of the backend holding the lock, or ``None`` when it is not held."""
        return self._pid if self._conn is not None else None

    async def acquire(self) -> bool:
        """Try to take the lock at once, on a new dedicated connection.

        Returns:
            ``True`` if this object now holds the lock; ``False`` if another session holds it
            (the connection is closed again).

        Raises:
            StoreUnavailable: the database cannot be reached, or did not answer in time (the
                connection is closed again; the lock may be tried again).
            ModeConflict: replicas (``--replica``) hold the lock, or one was live less than
                ``REPLICA_RESTART_GRACE_SECONDS`` ago and may be restarting (SPEC §16).
            RuntimeError: the lock is already held by this object, or was held and then released
                or lost.
        """
        if self._conn is not None or self._finished:
            raise RuntimeError("this coordinator lock was already acquired; it is taken once")
        conn = await self._session.open(self._check_timeout, "take the coordinator lock")
        try:
            await self._bounded(conn, refuse_recent_replicas, self._connect_timeout)
            taken, pid = await self._bounded(
                conn, lambda c: _take(c, self._key), self._connect_timeout
            )
            if not taken:
                await self._bounded(conn, self._refuse_replicas, self._connect_timeout)
            if not taken and self._take_over_stale:
                taken, pid = await self._bounded(conn, self._take_over, self._connect_timeout)
            if taken:
                self.epoch = await self._bounded(conn, self._bump, self._connect_timeout * 2)
        except (psycopg.Error, OSError, TimeoutError) as exc:
            await self._close(conn)
            raise StoreUnavailable(
                f"PostgreSQL failed while taking the coordinator lock: {describe(exc)}"
            ) from exc
        except BaseException:
            await self._close(conn)
            raise
        if not taken:
            await self._close(conn)
            return False
        self._conn, self._pid = conn, pid
        return True

    async def check(self) -> None:
        """Prove that this object's backend still holds the lock on this database.

        Raises:
            LockLost: the lock is not held: never acquired, released, its connection closed or
                terminated, the check failed or timed out, the backend changed, or ``pg_locks``
                has no granted lock for this key and backend. The connection is then closed and
                the lock can never be used again by this object.
        """
        conn, pid = self._conn, self._pid
        if conn is None or pid is None:
            raise LockLost("the coordinator lock is not held (never acquired, released or lost)")
        problem: str | None = None
        if conn.closed or conn.broken:
            problem = "its connection is closed"
        else:
            try:
                current_pid, held = await self._bounded(
                    conn,
                    lambda c: _query_held(c, self._classid, self._objid),
                    self._check_timeout,
                )
            except TimeoutError:
                problem = f"the lock check did not answer within {self._check_timeout:g} s"
            except (psycopg.Error, OSError) as exc:
                problem = f"the lock check failed: {describe(exc)}"
            except BaseException:
                # Interrupted mid-query: the connection's state is unknown, so it is unusable.
                await self._lose()
                raise
            else:
                if current_pid != pid:
                    problem = f"the lock's backend changed from pid {pid} to pid {current_pid}"
                elif not held:
                    problem = f"pg_locks shows no granted lock {self._key:#x} for backend {pid}"
                else:
                    problem = await self._renew(conn)
        if problem is not None:
            await self._lose()
            raise LockLost(f"the coordinator lock was lost: {problem}")

    async def _renew(self, conn: _Conn) -> str | None:
        """Extend the leadership's lease; why it cannot be (another epoch leads), or None."""
        if self.epoch is None:
            return None
        try:
            renewed = await self._bounded(
                conn,
                lambda c: fetch_one(c, _RENEW, {"lease": self._lease, "epoch": self.epoch}),
                self._check_timeout,
            )
        except TimeoutError:
            return f"renewing the lease did not answer within {self._check_timeout:g} s"
        except (psycopg.Error, OSError) as exc:
            return f"renewing the lease failed: {describe(exc)}"
        if renewed is None:
            return f"another coordinator leads now (epoch {self.epoch} is no longer current)"
        return None

    async def _take_over(self, conn: _Conn) -> tuple[bool, int]:
        """Take the lock from a holder whose lease ran out (a frozen or partitioned leader).

        Its session is ended (``pg_terminate_backend``): the lock goes with it. A live leader
        renews its lease at every check, so this never takes the lock from one.
        """
        if not await _has_coordinator_table(conn):
            return False, 0
        expired = await fetch_one(conn, _LEASE_EXPIRED, {})
        if not expired or not expired[0]:
            return False, 0
        ids = {"classid": self._classid, "objid": self._objid}
        for (pid,) in await fetch_all(conn, _HOLDERS, ids):
            await conn.execute("SELECT pg_terminate_backend(%s, 1000)", (pid,))
        return await _take(conn, self._key)

    async def _refuse_replicas(self, conn: _Conn) -> None:
        """Raise ``ModeConflict`` when replicas hold the lock (in shared mode, SPEC §16)."""
        row = await fetch_one(conn, _SHARED, {"classid": self._classid, "objid": self._objid})
        if row and row[0]:
            raise ModeConflict(_REPLICAS_USE_IT, mode_in_use="replicas")

    async def _bump(self, conn: _Conn) -> int | None:
        """Increment the epoch under the fence's exclusive lock, after every write in flight.

        Writers of an older epoch that still hold the fence (a frozen leader's open
        transactions) are ended first; they could never commit anyway. None on a database
        without the schema (migration 0007): there is nothing to fence there.
        """
        if not await _has_coordinator_table(conn):
            return None
        fence_class, fence_obj = advisory_lock_ids(FENCE_KEY)
        holders = await fetch_all(conn, _HOLDERS, {"classid": fence_class, "objid": fence_obj})
        for (pid,) in holders:
            await conn.execute("SELECT pg_terminate_backend(%s, 1000)", (pid,))
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s::bigint)", (FENCE_KEY,))
            row = await fetch_one(conn, _BUMP, {"leader": self._leader, "lease": self._lease})
        if row is None:  # pragma: no cover - migration 0007 inserts the row
            raise psycopg.InterfaceError("the coordinator row is missing")
        return int(row[0])

    async def release(self) -> None:
        """Unlock and close the connection; idempotent, and never raises on a dead connection."""
        conn, self._conn = self._conn, None
        self._finished = self._finished or conn is not None
        if conn is None:
            await self._session.settle()
            return
        if not (conn.closed or conn.broken):
            try:
                await self._bounded(
                    conn, lambda c: c.execute(_UNLOCK, (self._key,)), self._check_timeout
                )
            except (psycopg.Error, OSError, TimeoutError):
                pass  # closing the session below releases the lock anyway
            except BaseException:
                await self._close(conn)
                raise
        await self._close(conn)
        await self._session.settle()

    async def __aenter__(self) -> PostgresCoordinatorLock:
        """Acquire the lock.

        Raises:
            LockLost: another coordinator holds the lock.
            StoreUnavailable: the database cannot be reached.
        """
        if not await self.acquire():
            raise LockLost("another coordinator holds the coordinator lock")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Release the lock."""
        await self.release()

    async def _lose(self) -> None:
        conn, self._conn = self._conn, None
        self._finished = True
        if conn is not None:
            await self._close(conn)

    async def _bounded(self, conn: _Conn, operation: Any, seconds: float) -> Any:
        """Run ``operation`` on ``conn``; on timeout close ``conn`` and raise ``TimeoutError``."""
        return await self._session.bounded(conn, operation, seconds)

    async def _close(self, conn: _Conn) -> None:
        await self._session.close(conn)


async def _take(conn: _Conn, key: int) -> tuple[bool, int]:
    cursor = await conn.execute(_ACQUIRE, (key,))
    row = await cursor.fetchone()
    if row is None:  # pragma: no cover - a SELECT without FROM returns one row
        raise psycopg.InterfaceError("pg_try_advisory_lock returned no row")
    return bool(row[0]), int(row[1])


async def _query_held(conn: _Conn, classid: int, objid: int) -> tuple[int, bool]:
    cursor = await conn.execute(_CHECK, {"classid": classid, "objid": objid})
    row = await cursor.fetchone()
    if row is None:  # pragma: no cover - a SELECT without FROM returns one row
        raise psycopg.InterfaceError("the lock check returned no row")
    return int(row[0]), bool(row[1])


async def _has_coordinator_table(conn: _Conn) -> bool:
    row = await fetch_one(conn, "SELECT to_regclass('coordinator') IS NOT NULL", {})
    return bool(row and row[0])
