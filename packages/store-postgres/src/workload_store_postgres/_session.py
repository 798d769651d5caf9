"""A dedicated PostgreSQL session whose every operation is bounded in time.

The coordinator lock (§7, §14) and a replica's membership (§16) each live in a session of their
own: a session advisory lock belongs to its backend, so the connection is never pooled, never
reconnected, and closed for good when it fails. Every operation on it is bounded: on timeout
(or when its caller is cancelled) the operation is *abandoned*, not cancelled, and not waited
for. ``asyncio.wait_for`` alone is not enough: on cancellation psycopg tries to cancel the
query on the server and waits for it, seconds more on a dead network.

Abandoning severs the connection's socket (``shutdown``: the operation's wait sees end-of-file
at once, whatever the network does) and closes the connection once the operation has ended.
The socket is never closed under a running operation: the event loop may be watching its
descriptor, and libuv (uvloop) aborts the whole process when it applies a watch to a
descriptor closed behind its back (``epoll_ctl``: ``EBADF``; uvloop issue 100). Found by the
chaos soak: replicas died with SIGABRT when a bounded operation timed out.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import psycopg

from workload_domain.errors import StoreUnavailable

__all__ = ["Conn", "DedicatedSession", "describe", "fetch_all", "fetch_one"]

_T = TypeVar("_T")
Conn = psycopg.AsyncConnection[tuple[Any, ...]]

_UNWIND_SECONDS: Final = 1.0
_SETTINGS = (
    "SELECT set_config('statement_timeout', %s, false),"
    " set_config('idle_session_timeout', '0', false),"
    " set_config('idle_in_transaction_session_timeout', '0', false),"
    # As the pool's (ADR 0048): a renewal or a take that meets a concurrent change of its row
    # acts on the newest one, where a stricter default would fail the session's whole lease.
    " set_config('default_transaction_isolation', 'read committed', false)"
)


class DedicatedSession:
    """Connects, bounds operations, closes; keeps no state about what the session holds."""

    def __init__(self, url: str, *, application_name: str, connect_timeout: float) -> None:
        self._url = url
        self._application_name = application_name
        self._connect_timeout = connect_timeout
        self._stragglers: set[asyncio.Future[Any]] = set()
        self._running: dict[int, asyncio.Future[Any]] = {}
        """Connections (by id) whose abandoned operation still runs: closed when it ends."""

    async def connect(self, statement_timeout: float) -> Conn:
        """A new autocommit connection whose statements the server bounds too.

        Raises:
            psycopg.Error, OSError, TimeoutError: the database cannot be reached in time (the
                connection, if made, is closed again).
        """
        conn = await asyncio.wait_for(
            psycopg.AsyncConnection.connect(
                self._url,
                autocommit=True,
                prepare_threshold=None,
                application_name=self._application_name,
                connect_timeout=str(max(1, math.ceil(self._connect_timeout))),
            ),
            # psycopg enforces the libpq timeout per host; this bounds all of them.
            timeout=max(2.0, math.ceil(self._connect_timeout)) + 1,
        )
        try:
            # Bound server-side work; never let the server drop the idle session on its own.
            millis = f"{max(1, math.ceil(statement_timeout * 1000))}ms"
            await self.bounded(conn, lambda c: c.execute(_SETTINGS, (millis,)), statement_timeout)
        except BaseException:
            await self.close(conn)
            raise
        return conn

    async def open(self, statement_timeout: float, doing: str) -> Conn:
        """:meth:`connect`, or ``StoreUnavailable`` saying what the connection was for."""
        try:
            return await self.connect(statement_timeout)
        except (psycopg.Error, OSError, TimeoutError) as exc:
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL to {doing}: {describe(exc)}"
            ) from exc

    async def bounded(
        self, conn: Conn, operation: Callable[[Conn], Awaitable[_T]], seconds: float
    ) -> _T:
        """Run ``operation`` on ``conn``; on timeout abandon it (and ``conn``): ``TimeoutError``."""
        task = asyncio.ensure_future(operation(conn))
        try:
            done, _ = await asyncio.wait({task}, timeout=seconds)
        except BaseException:
            self._abandon(conn, task)
            raise
        if task not in done:
            self._abandon(conn, task)
            raise TimeoutError
        return task.result()

    def _abandon(self, conn: Conn, task: asyncio.Future[Any]) -> None:
        """Sever ``conn`` so that ``task`` ends by itself, and close ``conn`` once it has."""
        self._running[id(conn)] = task
        _sever(conn)
        self._stragglers.add(task)
        task.add_done_callback(_consume)
        task.add_done_callback(self._stragglers.discard)
        task.add_done_callback(lambda _: self._ended(conn))

    def _ended(self, conn: Conn) -> None:
        self._running.pop(id(conn), None)
        _finish(conn)

    async def settle(self) -> None:
        """Give abandoned operations a moment to unwind (they end with their connection)."""
        if self._stragglers:
            await asyncio.wait(set(self._stragglers), timeout=_UNWIND_SECONDS)

    async def close(self, conn: Conn) -> None:
        """Close ``conn``; a dead one has nothing to release.

        One whose abandoned operation is still running is only severed: it is closed when that
        operation ends (see the module).
        """
        if id(conn) in self._running:
            _sever(conn)
            return
        _finish(conn)


def _sever(conn: Conn) -> None:
    """Shut the connection's socket down, both ways, without closing its descriptor.

    Reads on it return end-of-file and writes fail at once: an operation waiting on it ends
    with a connection error instead of waiting for a server that may never answer.
    """
    if conn.closed:
        return
    try:
        fd = conn.pgconn.socket
    except psycopg.Error:  # no socket: nothing runs on it
        return
    sock = socket.socket(fileno=fd)
    try:
        with contextlib.suppress(OSError):  # not connected (any more): nothing to sever
            sock.shutdown(socket.SHUT_RDWR)
    finally:
        sock.detach()  # the descriptor stays psycopg's


def _finish(conn: Conn) -> None:
    """Close ``conn`` now (psycopg's ``close`` without the coroutine: it never waits)."""
    with contextlib.suppress(psycopg.Error, OSError):
        conn.pgconn.finish()


async def fetch_one(conn: Conn, sql: str, params: Any = None) -> tuple[Any, ...] | None:
    """The first row of ``sql``."""
    cursor = await conn.execute(sql, params)
    return await cursor.fetchone()


async def fetch_all(conn: Conn, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Every row of ``sql``."""
    cursor = await conn.execute(sql, params)
    return await cursor.fetchall()


def _consume(task: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned task's outcome so asyncio does not log it as unretrieved."""
    if not task.cancelled():
        task.exception()


def describe(exc: BaseException) -> str:
    """A driver error in one short line (its first line)."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
