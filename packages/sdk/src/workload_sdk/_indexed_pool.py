"""The asyncio client's connection pool: idle connections indexed by origin (ADR 0044).

httpcore 1.0's ``AsyncConnectionPool`` re-examines every connection against every queued
request at each request it assigns and each response it releases (encode/httpcore#1035, not
released): a worker with 64 handlers (129 kept connections) spent 59 % of its CPU there.
:class:`IndexedPool` keeps the same limits with constant work a request: idle connections in a
stack per origin (the most recently used first, checked as httpcore checks them before reuse),
the others counted, and requests that find no connection wait in one FIFO, each handed a
released connection or a freed slot in turn.

HTTP/1.1 only, as the SDK's clients speak (no HTTP/2, no proxy: the transport keeps httpx's own
pool where a proxy is set). Only the asyncio client uses it (see :mod:`workload_sdk._transports`).
"""

from __future__ import annotations

import asyncio
import collections
import typing

import httpcore
import httpx

__all__ = ["IndexedPool"]

_Key = tuple[bytes, bytes, int]
_Connection = httpcore.AsyncConnectionInterface


class _Waiter:
    """A request waiting for a connection: handed one that is idle, or a slot to open one."""

    __slots__ = ("connection", "event", "key")

    def __init__(self, key: _Key) -> None:
        self.key = key
        self.event = asyncio.Event()
        self.connection: _Connection | None = None  # None once woken: a slot to open one


class IndexedPool(httpcore.AsyncConnectionPool):
    """httpcore's pool interface with idle connections found in constant time."""

    def __init__(
        self,
        limits: httpx.Limits,
        ssl_context: typing.Any,
        network_backend: httpcore.AsyncNetworkBackend,
    ) -> None:
        # httpcore's pool keeps the settings and makes each connection (``create_connection``).
        super().__init__(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=network_backend,
        )
        unbounded = 2**31
        most, keep = limits.max_connections, limits.max_keepalive_connections
        self._limit = unbounded if most is None else most
        self._keep = min(self._limit, unbounded if keep is None else keep)
        self._idle: dict[_Key, list[_Connection]] = {}  # per origin, the most recent last
        self._idle_count = 0
        self._busy: dict[_Connection, _Key] = {}
        self._open = 0  # counted against the limit: idle, busy, or handed to a waiter
        self._waiters: collections.deque[_Waiter] = collections.deque()

    @property
    def connections(self) -> list[_Connection]:
        """Every connection the pool holds, idle or busy."""
        return [c for stack in self._idle.values() for c in stack] + list(self._busy)

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        """Send ``request`` on an idle connection of its origin, or a new one; wait for one."""
        if request.url.scheme not in (b"http", b"https"):
            raise httpcore.UnsupportedProtocol(
                f"Request URL has an unsupported protocol '{request.url.scheme.decode()}://'."
            )
        timeouts = request.extensions.get("timeout", {})
        origin = request.url.origin
        key = (origin.scheme, origin.host, origin.port)
        while True:
            connection = await self._acquire(key, origin, timeouts.get("pool"))
            self._busy[connection] = key
            try:
                response = await connection.handle_async_request(request)
            except httpcore.ConnectionNotAvailable:
                await self._release(connection)  # taken meanwhile: another one
                continue
            except BaseException:
                await self._release(connection)
                raise
            stream = response.stream
            assert isinstance(stream, typing.AsyncIterable)  # httpcore's contract
            return httpcore.Response(
                status=response.status,
                headers=response.headers,
                content=_Released(stream, self, connection),
                extensions=response.extensions,
            )

    async def _acquire(
        self, key: _Key, origin: httpcore.Origin, waiting: float | None
    ) -> _Connection:
        if not self._waiters:  # nobody is ahead in the queue
            found = await self._take(key, origin)
            if found is not None:
                return found
        waiter = _Waiter(key)
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter.event.wait(), waiting)
        except BaseException as exc:
            if not waiter.event.is_set():
                self._waiters.remove(waiter)
                if isinstance(exc, TimeoutError):
                    raise httpcore.PoolTimeout("no connection freed in time") from None
                raise
            if not isinstance(exc, TimeoutError):  # handed one, but cancelled: give it back
                await self._hand_back(waiter)
                raise
        connection = waiter.connection
        if connection is None:
            return self.create_connection(origin)
        if connection.is_available() and not connection.has_expired():
            return connection
        await self._close_keeping_slot(connection)  # gone stale in between: its slot is ours
        return self.create_connection(origin)

    async def _take(self, key: _Key, origin: httpcore.Origin) -> _Connection | None:
        """An idle connection of ``key``, a new one within the limit, or None: wait."""
        spare = False  # the slot of a stale idle connection closed here
        stack = self._idle.get(key)
        while stack:
            connection = stack.pop()
            self._idle_count -= 1
            if spare:
                self._free_slot()
            if connection.is_available() and not connection.has_expired():
                return connection
            spare = True  # the server closed it, or it expired: its slot is ours
            await self._close_keeping_slot(connection)
        if spare:
            return self.create_connection(origin)
        if self._open < self._limit:
            self._open += 1
            return self.create_connection(origin)
        other = self._pop_oldest_idle()
        if other is None:
            return None
        await self._close_keeping_slot(other)  # an idle one to another origin makes room
        return self.create_connection(origin)

    def _pop_oldest_idle(self) -> _Connection | None:
        for stack in self._idle.values():
            if stack:
                self._idle_count -= 1
                return stack.pop(0)
        return None

    async def _release(self, connection: _Connection) -> None:
        """A request is done with ``connection``: to a waiter, to the idle stack, or closed."""
        key = self._busy.pop(connection, None)
        if key is None:  # the pool was closed meanwhile
            await _close(connection)
            return
        if connection.is_closed() or not connection.is_idle():
            self._free_slot()  # counted first: a cancel during the close must not keep it
            await _close(connection)
            return
        for waiter in self._waiters:
            if waiter.key == key:
                self._waiters.remove(waiter)
                waiter.connection = connection
                waiter.event.set()
                return
        if self._waiters:  # they wait for other origins: this one makes room
            self._free_slot()
            await _close(connection)
            return
        self._idle.setdefault(key, []).append(connection)
        self._idle_count += 1
        if self._idle_count > self._keep:
            surplus = self._pop_oldest_idle()
            if surplus is not None:
                self._free_slot()
                await _close(surplus)

    async def _hand_back(self, waiter: _Waiter) -> None:
        """What a cancelled waiter was handed goes to the next one (or back to the pool)."""
        if waiter.connection is None:
            self._free_slot()
            return
        self._busy[waiter.connection] = waiter.key
        await self._release(waiter.connection)

    async def _close_keeping_slot(self, connection: _Connection) -> None:
        """Close ``connection``, its slot kept by the caller (given up if cancelled meanwhile)."""
        try:
            await _close(connection)
        except BaseException:
            self._free_slot()
            raise

    def _free_slot(self) -> None:
        """A connection was closed: its slot goes to the first waiter, or is given up."""
        if self._waiters:
            self._waiters.popleft().event.set()  # with no connection: a slot to open one
        else:
            self._open -= 1

    async def aclose(self) -> None:
        """Close every connection (requests still in flight fail)."""
        closing = self.connections
        self._idle.clear()
        self._idle_count = 0
        self._busy.clear()
        for _ in closing:  # what was handed to a waiter, or is being opened, stays counted
            self._free_slot()
        for connection in closing:
            await _close(connection)

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} [{len(self._busy)} busy, {self._idle_count} idle,"
            f" {len(self._waiters)} waiting]>"
        )


class _Released:
    """A response's body: closing it releases its connection to the pool."""

    def __init__(
        self, stream: typing.AsyncIterable[bytes], pool: IndexedPool, connection: _Connection
    ) -> None:
        self._stream = stream
        self._pool = pool
        self._connection = connection
        self._closed = False

    async def __aiter__(self) -> typing.AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.shield(self._finish())

    async def _finish(self) -> None:
        closer = getattr(self._stream, "aclose", None)
        if closer is not None:
            await closer()
        await self._pool._release(self._connection)


async def _close(connection: _Connection) -> None:
    await asyncio.shield(connection.aclose())
