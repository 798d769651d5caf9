"""The asyncio client's own transport (ADR 0043): connections that keep their socket at hand."""

# ruff: noqa: ASYNC109 - a fake of httpcore's network-stream interface takes ``timeout=``.
from __future__ import annotations

import socket
import ssl
import threading
import typing
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpcore
import httpx
import pytest

from tests.waiting import await_until
from workload_sdk import AsyncClient, NotFound
from workload_sdk._kept_sockets import KeptSocketStream, readable
from workload_sdk._transports import AsyncPoolTransport, PoolTransport

pytestmark = pytest.mark.anyio

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")


class _Closing(ThreadingHTTPServer):
    """Answers every request as kept alive, then closes the connection anyway."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.connections = 0
        self.open = 0


class _Handler(BaseHTTPRequestHandler):
    server: _Closing
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.connections += 1
            self.server.open += 1

    def finish(self) -> None:
        with self.server.lock:
            self.server.open -= 1
        super().finish()

    def do_GET(self) -> None:
        body = b'{"status": 404, "code": "run_not_found", "detail": "no such run"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/problem+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True  # no "Connection: close": the client keeps it

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def closing() -> Iterator[_Closing]:
    served = _Closing()
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        served.shutdown()
        served.server_close()
        thread.join(timeout=10)


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("no_proxy")
async def test_a_connection_the_server_closed_while_idle_is_not_reused(closing: _Closing) -> None:
    url = f"http://127.0.0.1:{closing.server_address[1]}"
    async with AsyncClient(base_url=url, token="t", max_retries=0) as client:
        assert isinstance(client._http._transport, httpx.AsyncHTTPTransport)
        assert type(client._http._transport).__name__ == "KeptSocketTransport"
        for round_ in range(1, 4):
            with pytest.raises(NotFound):
                await client.runs.get("r")

            async def closed() -> bool:
                return closing.open == 0

            await await_until(closed, within=10)
            # The next request sees the idle connection readable (EOF) and opens another: sent
            # on the closed one, it would fail with no answer (no retries here).
            assert closing.connections == round_


async def test_the_pool_asks_a_connection_for_its_socket_once_and_polls_it(
    closing: _Closing, no_proxy: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    inner_info = KeptSocketStream.__init__

    def counting(self: KeptSocketStream, stream: httpcore.AsyncNetworkStream) -> None:
        original = stream.get_extra_info

        def get_extra_info(info: str) -> typing.Any:
            asked.append(info)
            return original(info)

        stream.get_extra_info = get_extra_info  # type: ignore[method-assign]
        inner_info(self, stream)

    monkeypatch.setattr(KeptSocketStream, "__init__", counting)
    polled: list[object] = []

    def polling(sock: socket.socket | None) -> bool:
        polled.append(sock)
        return readable(sock)

    monkeypatch.setattr("workload_sdk._kept_sockets.readable", polling)
    url = f"http://127.0.0.1:{closing.server_address[1]}"
    async with AsyncClient(base_url=url, token="t", max_retries=0) as client:
        for _ in range(2):
            with pytest.raises(NotFound):
                await client.runs.get("r")

            async def closed() -> bool:
                return closing.open == 0

            await await_until(closed, within=10)
    # Each of the two connections was asked for its socket once, when connected (httpcore asks
    # for "ssl_object" once too); the pool's checks never reached anyio's lookup.
    assert asked.count("socket") == 2
    assert "is_readable" not in asked
    assert polled, "the pool checked the idle connection before reusing it"
    assert None not in polled  # the connection's socket (asyncio's TransportSocket)


def test_a_proxy_in_the_environment_keeps_httpx_own_transport(
    monkeypatch: pytest.MonkeyPatch, no_proxy: None
) -> None:
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
    assert isinstance(AsyncPoolTransport(limits), httpx.AsyncHTTPTransport)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    assert AsyncPoolTransport(limits) is None
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
