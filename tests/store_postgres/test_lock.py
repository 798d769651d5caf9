"""The coordinator's advisory lock against a real PostgreSQL server (SPEC §5, §7)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.plugins.postgres import with_database
from workload_domain.errors import LockLost, StoreUnavailable
from workload_store_postgres.lock import (
    APPLICATION_NAME,
    COORDINATOR_LOCK_KEY,
    PostgresCoordinatorLock,
    advisory_lock_ids,
)
from workload_store_postgres.migrations import MIGRATION_LOCK_KEY

pytestmark = pytest.mark.anyio

Conn = psycopg.AsyncConnection[tuple[Any, ...]]
MakeLock = Callable[..., PostgresCoordinatorLock]
_other_counter = itertools.count()


@pytest.fixture
async def make_lock(database_url: str) -> AsyncIterator[MakeLock]:
    """Build locks (on ``database_url`` unless told otherwise); release them all afterwards."""
    created: list[PostgresCoordinatorLock] = []

    def make(url: str | None = None, **options: Any) -> PostgresCoordinatorLock:
        lock = PostgresCoordinatorLock(url or database_url, **options)
        created.append(lock)
        return lock

    yield make
    for lock in created:
        await lock.release()


@pytest.fixture
def other_database_url(postgres_server_url: str) -> Iterator[str]:
    """A second, empty database on the same server as ``database_url``."""
    name = f"workload_lock_test_{os.getpid()}_{next(_other_counter)}"
    with psycopg.connect(postgres_server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield with_database(postgres_server_url, name)
    finally:
        with psycopg.connect(postgres_server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@contextlib.asynccontextmanager
async def observer(url: str) -> AsyncIterator[Conn]:
    """Another session on the same database, to look at (or interfere with) the lock."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        yield conn


async def advisory_rows(conn: Conn, pid: int) -> list[tuple[Any, ...]]:
    """The advisory locks of backend ``pid``: ``(database name, classid, objid, objsubid)``."""
    cursor = await conn.execute(
        "SELECT d.datname, l.classid::bigint, l.objid::bigint, l.objsubid, l.granted"
        " FROM pg_locks l JOIN pg_database d ON d.oid = l.database"
        " WHERE l.locktype = 'advisory' AND l.pid = %s",
        (pid,),
    )
    return await cursor.fetchall()


def dbname(url: str) -> str:
    return str(conninfo_to_dict(url)["dbname"])


def held_pid(lock: PostgresCoordinatorLock) -> int:
    pid = lock.backend_pid
    assert pid is not None
    return pid


# --- the key ---------------------------------------------------------------------------------


def test_the_key_is_documented_and_differs_from_the_migration_key() -> None:
    assert int.from_bytes(b"WKLDCORD", "big") == COORDINATOR_LOCK_KEY
    assert COORDINATOR_LOCK_KEY != MIGRATION_LOCK_KEY
    assert advisory_lock_ids(COORDINATOR_LOCK_KEY) == (1464552516, 1129271876)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (MIGRATION_LOCK_KEY, "MIGRATION_LOCK_KEY"),
        (2**63, "64-bit"),
        (-(2**63) - 1, "64-bit"),
    ],
)
def test_unusable_keys_are_refused(key: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PostgresCoordinatorLock("postgresql://", key=key)


@pytest.mark.parametrize(
    "key",
    [COORDINATOR_LOCK_KEY, 0, 1, -1, 2**63 - 1, -(2**63), 0xFFFFFFFF, 2**32, -(2**32)],
    ids=lambda key: f"{key & (2**64 - 1):#018x}",
)
async def test_pg_locks_shows_the_key_as_classid_objid_objsubid_1(
    make_lock: MakeLock, database_url: str, key: int
) -> None:
    lock = make_lock(key=key)
    assert await lock.acquire()
    async with observer(database_url) as conn:
        rows = await advisory_rows(conn, held_pid(lock))
    classid, objid = advisory_lock_ids(key)
    assert classid == (key >> 32) % 2**32
    assert objid == key % 2**32
    assert rows == [(dbname(database_url), classid, objid, 1, True)]
    await lock.check()


# --- acquire, check, release -----------------------------------------------------------------


async def test_one_holder_at_a_time(make_lock: MakeLock, database_url: str) -> None:
    first, second = make_lock(), make_lock()
    assert await first.acquire()
    await first.check()

    assert not await second.acquire()
    assert second.backend_pid is None
    with pytest.raises(LockLost, match="not held"):
        await second.check()
    assert not await second.acquire()  # retrying a busy lock is allowed

    await first.release()
    assert await second.acquire()
    await second.check()
    with pytest.raises(LockLost):
        await first.check()


async def test_the_lock_has_its_own_named_idle_connection(
    make_lock: MakeLock, database_url: str
) -> None:
    lock = make_lock()
    assert await lock.acquire()
    async with observer(database_url) as conn:
        cursor = await conn.execute(
            "SELECT application_name, state, datname FROM pg_stat_activity WHERE pid = %s",
            (held_pid(lock),),
        )
        assert await cursor.fetchall() == [(APPLICATION_NAME, "idle", dbname(database_url))]


async def test_the_migration_lock_does_not_block_the_coordinator(
    make_lock: MakeLock, database_url: str
) -> None:
    async with observer(database_url) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s::bigint)", (MIGRATION_LOCK_KEY,))
        lock = make_lock()
        assert await lock.acquire()
        await lock.check()


async def test_release_is_idempotent_and_check_after_release_fails(
    make_lock: MakeLock, database_url: str
) -> None:
    lock = make_lock()
    await lock.release()  # before acquiring: nothing to do
    assert await lock.acquire()
    pid = held_pid(lock)
    await lock.release()
    await lock.release()
    assert lock.backend_pid is None
    with pytest.raises(LockLost, match="not held"):
        await lock.check()
    with pytest.raises(RuntimeError, match="taken once"):
        await lock.acquire()
    async with observer(database_url) as conn:
        assert await advisory_rows(conn, pid) == []
        cursor = await conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
        assert await cursor.fetchone() == (0,)


async def test_acquiring_twice_is_a_programming_error(make_lock: MakeLock) -> None:
    lock = make_lock()
    assert await lock.acquire()
    with pytest.raises(RuntimeError, match="taken once"):
        await lock.acquire()
    await lock.check()


async def test_the_context_manager_holds_then_releases(
    make_lock: MakeLock, database_url: str
) -> None:
    async with make_lock() as lock:
        await lock.check()
        with pytest.raises(LockLost, match="another coordinator"):
            async with make_lock():
                pass
    with pytest.raises(LockLost):
        await lock.check()
    assert await make_lock().acquire()


# --- losing the lock -------------------------------------------------------------------------


async def test_a_terminated_backend_is_lost_at_the_next_check(
    make_lock: MakeLock, database_url: str
) -> None:
    lock = make_lock()
    assert await lock.acquire()
    pid = held_pid(lock)
    async with observer(database_url) as conn:
        cursor = await conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
        assert await cursor.fetchone() == (True,)  # True once the backend has exited

    with pytest.raises(LockLost, match="lost"):
        await lock.check()
    with pytest.raises(LockLost):
        await lock.check()  # lost for good
    with pytest.raises(RuntimeError, match="taken once"):
        await lock.acquire()  # never re-taken by the same object
    await lock.release()  # the connection is dead: releasing does not raise
    await lock.release()
    assert await make_lock().acquire()  # the server freed the lock with the session


async def test_a_lock_missing_from_pg_locks_is_lost_although_the_connection_answers(
    make_lock: MakeLock,
) -> None:
    lock = make_lock()
    assert await lock.acquire()
    # Unlock from inside the lock's own session: the connection stays perfectly healthy.
    own: Conn | None = lock._conn  # a session that lost its lock
    assert own is not None
    await own.execute("SELECT pg_advisory_unlock_all()")
    await own.execute("SELECT 1")

    with pytest.raises(LockLost, match="pg_locks shows no granted lock"):
        await lock.check()
    assert lock.backend_pid is None


async def test_check_gives_up_quickly_when_the_network_is_dead(
    make_lock: MakeLock, database_url: str
) -> None:
    async with FreezableProxy(database_url) as proxy:
        lock = make_lock(proxy.url, check_timeout=0.5)
        assert await lock.acquire()
        await lock.check()

        proxy.freeze()  # packets stop flowing both ways; no error, no FIN: silence
        started = time.monotonic()
        with pytest.raises(LockLost, match=r"did not answer within 0\.5 s"):
            await lock.check()
        await lock.release()
        elapsed = time.monotonic() - started
        assert elapsed < 3, f"check + release took {elapsed:.1f}s on a dead network"
        proxy.thaw()


async def test_acquire_gives_up_when_the_network_is_dead(
    make_lock: MakeLock, database_url: str
) -> None:
    async with FreezableProxy(database_url) as proxy:
        proxy.freeze()  # the TCP connection opens, but the server never answers
        lock = make_lock(proxy.url, connect_timeout=1)  # libpq waits at least 2 s
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="cannot connect"):
            await lock.acquire()
        elapsed = time.monotonic() - started
        assert elapsed < 4, f"acquire took {elapsed:.1f}s on a dead network"
        assert lock.backend_pid is None
        proxy.thaw()


# --- databases and connection failures ------------------------------------------------------


async def test_advisory_locks_are_per_database(
    make_lock: MakeLock, database_url: str, other_database_url: str
) -> None:
    here, there = make_lock(), make_lock(other_database_url)
    assert await here.acquire()
    assert await there.acquire()  # same key, same server, other database: no conflict
    await here.check()
    await there.check()
    assert not await make_lock(other_database_url).acquire()  # but one per database

    classid, objid = advisory_lock_ids(COORDINATOR_LOCK_KEY)
    async with observer(database_url) as conn:
        rows = await advisory_rows(conn, held_pid(here)) + await advisory_rows(
            conn, held_pid(there)
        )
    assert sorted(rows) == sorted(
        [
            (dbname(database_url), classid, objid, 1, True),
            (dbname(other_database_url), classid, objid, 1, True),
        ]
    )


async def test_an_unreachable_database_is_store_unavailable_at_once() -> None:
    lock = PostgresCoordinatorLock("postgresql://postgres@/x?host=/nonexistent")
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="cannot connect") as caught:
        await lock.acquire()
    assert time.monotonic() - started < 2
    assert not isinstance(caught.value, psycopg.Error)
    assert lock.backend_pid is None
    with pytest.raises(StoreUnavailable):
        await lock.acquire()  # nothing was held: trying again is allowed
    with pytest.raises(LockLost):
        await lock.check()
    await lock.release()


# --- a TCP proxy whose traffic can be frozen -------------------------------------------------


class FreezableProxy:
    """Forwards a local TCP port to the test server; ``freeze`` silently stops all traffic."""

    def __init__(self, database_url: str) -> None:
        self._params = conninfo_to_dict(database_url)
        self._database_url = database_url
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.url = ""

    def freeze(self) -> None:
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    async def __aenter__(self) -> FreezableProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = make_conninfo(self._database_url, host="127.0.0.1", port=str(port))
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        self._flowing.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in self._writers:
            writer.close()
        for writer in self._writers:
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        await self._server.wait_closed()

    async def _upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host = str(self._params.get("host") or "localhost")
        port = int(self._params.get("port") or 5432)
        if host.startswith("/"):
            return await asyncio.open_unix_connection(f"{host}/.s.PGSQL.{port}")
        return await asyncio.open_connection(host, port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        up_reader, up_writer = await self._upstream()
        self._writers.append(up_writer)
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.ensure_future(self._pump(source, sink))
            self._tasks.add(task)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await source.read(65536):
                await self._flowing.wait()
                sink.write(data)
                await sink.drain()
        sink.close()
