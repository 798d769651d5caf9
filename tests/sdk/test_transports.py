"""The asyncio client's own transport (ADR 0043): connections that keep their socket at hand."""

# ruff: noqa: ASYNC109 - a fake of httpcore's network-stream interface takes ``timeout=``.
from __future__ import annotations

import socket
import ssl
import typing

import httpcore
import httpx
import pytest

from workload_sdk._kept_sockets import KeptSocketStream, readable
from workload_sdk._transports import AsyncPoolTransport, PoolTransport

pytestmark = pytest.mark.anyio


def test_a_proxy_in_the_environment_keeps_httpx_own_transport(
    monkeypatch: pytest.MonkeyPatch, no_proxy: None
) -> None:
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
    assert isinstance(AsyncPoolTransport(limits), httpx.AsyncHTTPTransport)
    # Neither an exclusion list alone nor another scheme's proxy routes httpx's requests.
    monkeypatch.setenv("NO_PROXY", "localhost,.internal")
    monkeypatch.setenv("ftp_proxy", "http://127.0.0.1:3128")
    assert isinstance(AsyncPoolTransport(limits), httpx.AsyncHTTPTransport)
    for name in ("HTTPS_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:3128")
        assert AsyncPoolTransport(limits) is None, name
        monkeypatch.delenv(name)
    # The blocking client's pool reads its socket directly already: httpx's transport.
    assert PoolTransport(limits) is None


def test_readable_is_true_only_for_data_or_an_end() -> None:
    left, right = socket.socketpair()
    try:
        assert readable(left) is False
        right.sendall(b"x")
        assert readable(left) is True
        left.recv(1)
        assert readable(left) is False
        right.close()
        assert readable(left) is True  # EOF: the peer closed
    finally:
        left.close()
        right.close()
    assert readable(left) is True  # closed here: no descriptor
    assert readable(None) is True


class _FakeStream(httpcore.AsyncNetworkStream):
    def __init__(self, sock: socket.socket | None, tls: _FakeStream | None = None) -> None:
        self.sock = sock
        self.tls = tls
        self.closed = False

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return b"data"[:max_bytes]

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.written = buffer

    async def aclose(self) -> None:
        self.closed = True

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        assert self.tls is not None
        return self.tls

    def get_extra_info(self, info: str) -> typing.Any:
        return {"socket": self.sock, "server_addr": ("127.0.0.1", 1)}.get(info)


async def test_a_kept_socket_stream_passes_everything_else_through() -> None:
    left, right = socket.socketpair()
    try:
        upgraded = _FakeStream(right)
        plain = _FakeStream(left, tls=upgraded)
        stream = KeptSocketStream(plain)
        assert await stream.read(2) == b"da"
        await stream.write(b"abc")
        assert plain.written == b"abc"
        assert stream.get_extra_info("server_addr") == ("127.0.0.1", 1)
        assert stream.get_extra_info("socket") is left
        secured = await stream.start_tls(ssl.create_default_context(), "example.org")
        assert isinstance(secured, KeptSocketStream)
        assert secured.get_extra_info("socket") is right
        await secured.aclose()
        assert upgraded.closed
        assert not plain.closed
    finally:
        left.close()
        right.close()
