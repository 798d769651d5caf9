"""A service process's own path to PostgreSQL, which the soak can partition or slow down.

Each service process connects to PostgreSQL through a :class:`DatabaseProxy` of its own: a TCP
listener on 127.0.0.1 that relays every connection to the cluster's Unix socket. The proxy
models what a network does to TCP, not what a firewall's reset does:

- **partition** (:meth:`DatabaseProxy.partition`): nothing gets through in either direction, and
  nothing is lost — bytes, new connections and closes are held until :meth:`heal`, as TCP
  retransmission delivers them once the network is back. The process keeps believing it is
  connected; PostgreSQL keeps its sessions (and their locks) open; the process's statements
  hang. Whatever it sent during the partition arrives after it, late: what fencing is for.
- **latency** (:meth:`DatabaseProxy.delay`): every chunk is delivered ``seconds`` late, in order.

One asyncio loop in a thread of its own serves every proxy of the soak.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any

__all__ = ["DatabaseProxy", "ProxyLoop"]

_CHUNK = 64 * 1024


class ProxyLoop:
    """The event loop every proxy runs on, in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="proxy", daemon=True)
        self._thread.start()

    def call(self, coroutine: Coroutine[Any, Any, Any], timeout: float = 10) -> Any:
        """Run ``coroutine`` on the loop; return its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        """Stop the loop (the proxies' connections are dropped with it)."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()


class DatabaseProxy:
    """127.0.0.1:``port`` → the PostgreSQL Unix socket ``socket_path``; partitionable."""

    def __init__(self, loop: ProxyLoop, socket_path: str, port: int) -> None:
        self._loop = loop
        self._socket_path = socket_path
        self.port = port
        self._open = asyncio.Event()
        self._delay = 0.0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.connections = 0
        loop.call(self._start())

    def url(self, database: str) -> str:
        """The URL a service process is given: PostgreSQL through this proxy."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    async def _start(self) -> None:
        self._open.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    # -- faults (called from the soak's threads) ------------------------------------------------

    def partition(self) -> None:
        """Hold everything, both ways, new connections included, until :meth:`heal`."""
        self._loop.loop.call_soon_threadsafe(self._open.clear)

    def delay(self, seconds: float) -> None:
        """Deliver every chunk ``seconds`` late (0: no delay)."""

        def set_delay() -> None:
            self._delay = seconds

        self._loop.loop.call_soon_threadsafe(set_delay)

    def heal(self) -> None:
        """Deliver what was held; no more delay."""

        def open_up() -> None:
            self._delay = 0.0
            self._open.set()

        self._loop.loop.call_soon_threadsafe(open_up)

    def close(self) -> None:
        """Stop listening and drop every connection."""
        self._loop.call(self._close())

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    # -- relaying -----------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        upstream: asyncio.StreamWriter | None = None
        try:
            await self._open.wait()  # a connection attempt during a partition waits for it
            try:
                up_reader, upstream = await asyncio.open_unix_connection(self._socket_path)
            except OSError:
                return  # PostgreSQL is down: the client sees its connection closed
            await asyncio.gather(
                self._pump(reader, upstream),
                self._pump(up_reader, writer),
                return_exceptions=True,
            )
        finally:
            self._tasks.discard(task)
            for side in (writer, upstream):
                if side is not None:
                    with contextlib.suppress(OSError, RuntimeError):
                        side.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                chunk = await reader.read(_CHUNK)
                await self._pass()
                if not chunk:  # the other side closed: so does this one (once delivered)
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(chunk)
                await writer.drain()
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                writer.close()

    async def _pass(self) -> None:
        """Wait while partitioned, then for the latency, if any."""
        await self._open.wait()
        if self._delay:
            await asyncio.sleep(self._delay)
            await self._open.wait()
