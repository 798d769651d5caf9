"""The asyncio client's pool, its connections keeping their socket at hand (ADR 0043, 0044).

See :mod:`workload_sdk._transports`: imported when the first asyncio client is made.
"""

# ruff: noqa: ASYNC109 - ``timeout=`` is httpcore's network-stream interface.
from __future__ import annotations

import select
import socket
import ssl
import typing

import httpcore
import httpx

from workload_sdk._indexed_pool import IndexedPool

__all__ = ["KeptSocketStream", "KeptSocketTransport", "readable"]


class KeptSocketTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a pool whose connections keep their socket at hand."""

    def __init__(self, limits: httpx.Limits) -> None:
        # As httpx.AsyncHTTPTransport(limits=limits) makes it, with the network backend given
        # and connections found by the indexed pool (ADR 0044).
        self._pool = IndexedPool(limits, httpx.create_ssl_context(), _KeptSocketBackend())


class _KeptSocketBackend(httpcore.AsyncNetworkBackend):
    """httpcore's anyio backend, its streams wrapped in :class:`KeptSocketStream`."""

    def __init__(self) -> None:
        self._backend = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._backend.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        return KeptSocketStream(stream)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._backend.connect_unix_socket(
            path, timeout=timeout, socket_options=socket_options
        )
        return KeptSocketStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class KeptSocketStream(httpcore.AsyncNetworkStream):
    """A connected stream that answers ``socket`` and ``is_readable`` from its own socket."""

    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream
        self._socket: socket.socket | None = stream.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._stream.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._stream.start_tls(ssl_context, server_hostname, timeout)
        return KeptSocketStream(stream)

    def get_extra_info(self, info: str) -> typing.Any:
        if info == "socket":
            return self._socket
        if info == "is_readable":
            return readable(self._socket)
        return self._stream.get_extra_info(info)


def readable(sock: socket.socket | None) -> bool:
    """The test httpcore makes: a socket gone (no descriptor) reads as readable (EOF)."""
    descriptor = -1 if sock is None else sock.fileno()
    if descriptor < 0:
        return True
    if not hasattr(select, "poll"):  # Windows
        readable, _, _ = select.select([descriptor], [], [], 0)
        return bool(readable)
    poller = select.poll()
    poller.register(descriptor, select.POLLIN)
    return bool(poller.poll(0))
