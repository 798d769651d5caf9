"""The store's connection pool, and what it does while PostgreSQL is known unreachable.

:class:`StorePool` hands out the connections of a psycopg ``AsyncConnectionPool``. When the
process knows PostgreSQL is unreachable — a standby's lock try failed for want of it, and its
``/readyz`` says ``unavailable`` — it tells the store (:meth:`StorePool.unreachable`, ADR 0021).
From then on:

- every operation is refused at once with :class:`StoreDown` (HTTP 503 ``unavailable`` with
  ``Retry-After: 1``): nothing waits out the pool's timeout for a connection that cannot come;
- the pool is closed, so that requests already waiting for one of its connections are refused
  too (within a second), and its reconnection attempts, which back off to minutes, stop;
- a probe tries one new connection every :data:`PROBE_SECONDS`; the first that succeeds opens a
  fresh pool, and operations are served again. That is at most ``PROBE_SECONDS`` plus two
  connections after PostgreSQL accepts connections again — plus one probe's connect timeout
  (:data:`PROBE_CONNECT_SECONDS`) when that probe began while the network dropped packets.

The pool's own failures are no such evidence: psycopg reports every failed connection attempt
alike (a server that is gone, or one that answered "too many clients"), and a connection that
breaks in use may be one terminated backend. The pool replaces those as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Final

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from workload_domain.errors import StoreUnavailable

__all__ = [
    "PROBE_CONNECT_SECONDS",
    "PROBE_SECONDS",
    "Conn",
    "Row",
    "StoreDown",
    "StorePool",
    "written_to",
]

Row = dict[str, Any]
Conn = psycopg.AsyncConnection[Row]

PROBE_SECONDS: Final = 0.5
"""How often a store that knows PostgreSQL unreachable tries a new connection to it."""
PROBE_CONNECT_SECONDS: Final = 2
"""The connect timeout of a probe (libpq's least)."""
CLOSE_SECONDS: Final = 1.0
"""What a closing pool gives its background workers: one connecting to a server that stopped
answering would otherwise hold a shutdown (or a fail-stop) for five seconds."""

_log = logging.getLogger("workload.store")


class StoreDown(StoreUnavailable):
    """An operation refused without trying it: PostgreSQL is known unreachable (ADR 0021)."""

    retry_after = 1


async def _still_alive(conn: Conn) -> None:
    """Refuse a pooled connection the server has written to while it sat idle.

    An idle connection receives nothing unless its backend is going away: a terminated backend
    (``pg_terminate_backend``, a server shutdown) sends its error and closes the socket. A
    readable socket therefore means a dead connection, which the pool then replaces — instead
    of handing it to a request, or to a commit whose failure would stop execution. A
    non-blocking poll of the socket costs no round trip.
    """
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    if written_to(conn):
        # Closed, so that the pool discards it rather than taking it back as good.
        await conn.close()
        raise psycopg.OperationalError("the server wrote to an idle connection: it is gone")


def written_to(conn: Conn) -> bool:
    """Whether the connection's socket has something to read (a non-blocking poll)."""
    readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    return bool(readable)


class StorePool:
    """The store's connections: a psycopg pool, refused and replaced while PostgreSQL is away.

    See the module. ``configure`` is called with each new connection (of every pool made);
    ``kwargs`` are its connection parameters.
    """

    def __init__(
        self,
        url: str,
        *,
        min_size: int,
        max_size: int,
        timeout: float,
        configure: Callable[[Conn], Any],
        kwargs: Mapping[str, Any],
    ) -> None:
        self._url = url
        self._min_size = min_size
        self._max_size = max_size
        self._timeout = timeout
        self._configure = configure
        self._kwargs = dict(kwargs)
        self._pool = self._new_pool()
        self._watching = False
        """Failed connections count from a successful open to the close."""
        self._down: str | None = None
        self._down_at = 0.0
        self._recovery: asyncio.Task[None] | None = None

    @property
    def down(self) -> str | None:
        """Why PostgreSQL is known unreachable (operations are refused), or None."""
        return self._down

    def connection(self) -> AbstractAsyncContextManager[Conn]:
        """A connection of the pool, for an ``async with``.

        Raises:
            StoreDown: PostgreSQL is known unreachable; nothing was tried.
        """
        if self._down is not None:
            raise StoreDown(f"PostgreSQL is unreachable, not tried: {self._down}")
        return self._pool.connection()

    def get_stats(self) -> Mapping[str, int]:
        """psycopg_pool's statistics of the current pool."""
        return self._pool.get_stats()

    async def open(self) -> None:
        """Open the pool, waiting for its first connections.

        Raises:
            StoreUnavailable: PostgreSQL cannot be reached in time.
        """
        try:
            await self._pool.open(wait=True, timeout=self._timeout)
        except (PoolTimeout, psycopg.Error) as exc:
            raise StoreUnavailable(f"cannot connect to PostgreSQL: {exc}") from exc
        self._watching = True

    async def close(self) -> None:
        """Stop any probe, and close every connection of the pool."""
        self._watching = False
        recovery, self._recovery = self._recovery, None
        if recovery is not None:
            recovery.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await recovery
        await self._pool.close(timeout=CLOSE_SECONDS)

    def unreachable(self, reason: str) -> None:
        """PostgreSQL is known unreachable: refuse from now on, and probe until it answers.

        Nothing happens while it is already known, nor outside the open store.
        """
        if self._down is not None or not self._watching:
            return
        self._down, self._down_at = reason, time.monotonic()
        _log.warning(
            "PostgreSQL is unreachable: what needs it is refused until it answers again: %s",
            reason,
        )
        self._recovery = asyncio.get_running_loop().create_task(self._recover(self._pool))

    def _new_pool(self) -> AsyncConnectionPool[Conn]:
        return AsyncConnectionPool(
            self._url,
            min_size=self._min_size,
            max_size=self._max_size,
            open=False,
            configure=self._configure,
            check=_still_alive,
            timeout=self._timeout,
            name="workload-store",
            connection_class=psycopg.AsyncConnection[Row],
            kwargs=self._kwargs,
        )

    async def _recover(self, gone: AsyncConnectionPool[Conn]) -> None:
        """Close the pool, probe until PostgreSQL answers, then serve from a fresh pool."""
        await gone.close(timeout=CLOSE_SECONDS)
        probes = 0
        while True:
            await asyncio.sleep(PROBE_SECONDS)
            probes += 1
            if not await self._probe():
                continue
            pool = self._new_pool()
            try:
                await pool.open(wait=True, timeout=self._timeout)
            except (PoolTimeout, psycopg.Error):
                await pool.close(timeout=CLOSE_SECONDS)
                continue
            except BaseException:  # cancelled: the store closes
                await pool.close(timeout=CLOSE_SECONDS)
                raise
            self._pool, self._down, self._recovery = pool, None, None
            _log.info(
                "PostgreSQL answers again: serving what needs it",
                extra={
                    "fields": {
                        "seconds": round(time.monotonic() - self._down_at, 3),
                        "probes": probes,
                    }
                },
            )
            return

    async def _probe(self) -> bool:
        """Whether one new connection to PostgreSQL succeeds (it is closed again)."""
        try:
            conn = await asyncio.wait_for(
                psycopg.AsyncConnection.connect(
                    self._url,
                    autocommit=True,
                    connect_timeout=PROBE_CONNECT_SECONDS,
                    application_name=self._kwargs.get("application_name", ""),
                ),
                # libpq's timeout is per host; this bounds all of them.
                timeout=PROBE_CONNECT_SECONDS + 1,
            )
        except (psycopg.Error, OSError, TimeoutError):
            return False
        with contextlib.suppress(psycopg.Error, OSError):
            await conn.close()
        return True
