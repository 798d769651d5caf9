"""The clients' connection pool (``max_connections``, idle connections' checks, ADR 0043),
against a real socket."""

from __future__ import annotations

import socket
import typing
from collections.abc import Iterator

import anyio
import httpcore
import httpx
import pytest

from tests.sdk.counting_server import CountingServer, serving
from tests.waiting import await_until
from workload_sdk import AsyncClient, Client, NotFound
from workload_sdk._kept_sockets import KeptSocketStream, readable

pytestmark = pytest.mark.anyio


@pytest.fixture
def closing() -> Iterator[CountingServer]:
    """A server that answers at once and closes each connection after its answer."""
    with serving(CountingServer(close_after_answer=True)) as served:
        served.release.set()
        yield served


async def test_requests_beyond_max_connections_wait_for_a_free_one(server: CountingServer) -> None:
    url = f"http://127.0.0.1:{server.server_address[1]}"
    async with AsyncClient(base_url=url, token="t", max_retries=0, max_connections=2) as client:

        async def reached() -> bool:
            return server.waiting >= 2

        async def get() -> None:
            with pytest.raises(NotFound):
                await client.runs.get("r")

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(get)
            # Two requests reach the server; the other three wait for their connections.
            await await_until(reached, within=20, message="two requests at the server")
            server.release.set()
    assert server.peak == 2
    assert server.connections == 2  # kept alive and used again


def test_max_connections_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_connections"):
        Client(max_connections=0)
    with pytest.raises(ValueError, match="max_connections"):
        AsyncClient(max_connections=0)


@pytest.mark.usefixtures("no_proxy")
async def test_a_connection_the_server_closed_while_idle_is_not_reused(
    closing: CountingServer,
) -> None:
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
    closing: CountingServer, no_proxy: None, monkeypatch: pytest.MonkeyPatch
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
