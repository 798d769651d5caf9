"""The asyncio client's pool (``workload_sdk._indexed_pool``, ADR 0044) against real sockets:
its limits, its queue, and what a failure, a cancel or a closed connection leaves behind."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import anyio
import httpcore
import httpx
import pytest

from tests.sdk.counting_server import CountingServer, serving
from tests.waiting import await_until
from workload_sdk._indexed_pool import IndexedPool
from workload_sdk._kept_sockets import KeptSocketTransport

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_proxy")]


def _client(server: CountingServer, limits: httpx.Limits, **timeouts: float) -> httpx.AsyncClient:
    transport = KeptSocketTransport(limits)
    assert isinstance(transport._pool, IndexedPool)
    timeout = httpx.Timeout(10, **timeouts)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    return httpx.AsyncClient(base_url=url, transport=transport, timeout=timeout)


def _pool(client: httpx.AsyncClient) -> IndexedPool:
    transport = client._transport
    assert isinstance(transport, KeptSocketTransport)
    pool = transport._pool
    assert isinstance(pool, IndexedPool)
    return pool


@pytest.fixture
def other() -> Iterator[CountingServer]:
    with serving(CountingServer()) as served:
        served.release.set()
        yield served


async def test_a_request_waiting_past_its_pool_timeout_fails_and_frees_its_place(
    server: CountingServer,
) -> None:
    async with _client(server, httpx.Limits(max_connections=1), pool=0.2) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.get, "/held")

            async def reached() -> bool:
                return server.waiting == 1

            await await_until(reached, within=20, message="the first request at the server")
            with pytest.raises(httpx.PoolTimeout):
                await client.get("/late")
            server.release.set()
        # The timed-out request left no waiter behind: the next one reuses the connection.
        assert (await client.get("/next")).status_code == 404
        assert server.connections == 1
        assert repr(_pool(client)) == "<IndexedPool [0 busy, 1 idle, 0 waiting]>"


async def test_a_cancelled_waiter_gives_back_what_it_was_handed(server: CountingServer) -> None:
    async with _client(server, httpx.Limits(max_connections=1)) as client:
        pool = _pool(client)
        waiting = anyio.CancelScope()

        async def first_then_cancel() -> None:
            async with client.stream("GET", "/first") as response:
                await response.aread()
            # Closing it handed the connection to the queued request; that request is
            # cancelled before it runs again.
            waiting.cancel()

        async def second() -> None:
            with waiting:
                await client.get("/second")

        async def at_server() -> bool:
            return server.waiting == 1

        async def queued() -> bool:
            return len(pool._waiters) == 1

        async with anyio.create_task_group() as tg:
            tg.start_soon(first_then_cancel)
            await await_until(at_server, within=20, message="the first request at the server")
            tg.start_soon(second)
            await await_until(queued, within=10, message="the second request queued")
            server.release.set()
        assert waiting.cancelled_caught
        # The connection is back: one more request uses it, and nothing else is counted
        # against the limit.
        assert (await client.get("/third")).status_code == 404
        assert server.connections == 1
        assert (pool._open, len(pool._busy), len(pool._waiters)) == (1, 0, 0)


async def test_connections_closed_after_their_answer_free_their_place_for_the_queue(
    server: CountingServer,
) -> None:
    server.release.set()
    async with _client(server, httpx.Limits(max_connections=1)) as client:
        answers: list[int] = []

        async def get() -> None:
            # "Connection: close": the connection is closed once answered, never kept.
            answers.append((await client.get("/x", headers={"Connection": "close"})).status_code)

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(get)
        assert answers == [404] * 5
        assert server.connections == 5  # one after another, each in the slot the last freed
        assert _pool(client)._open == 0


async def test_idle_connections_beyond_the_keepalive_limit_are_closed(
    server: CountingServer,
) -> None:
    limits = httpx.Limits(max_connections=6, max_keepalive_connections=2)
    async with _client(server, limits) as client:

        async def reached() -> bool:
            return server.waiting == 6

        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(client.get, "/x")
            await await_until(reached, within=20, message="six requests at the server")
            server.release.set()

        async def two_left() -> bool:
            return server.open == 2

        await await_until(two_left, within=10, message="two idle connections kept")
        assert _pool(client)._idle_count == 2

    async def none_left() -> bool:
        return server.open == 0

    await await_until(none_left, within=10, message="closing the client closes them")


async def test_a_full_pool_closes_an_idle_connection_to_another_origin(
    other: CountingServer, server: CountingServer
) -> None:
    server.release.set()
    url = f"http://127.0.0.1:{other.server_address[1]}/x"
    async with _client(server, httpx.Limits(max_connections=1)) as client:
        for _ in range(2):
            assert (await client.get("/x")).status_code == 404
            assert (await client.get(url)).status_code == 404
        assert (server.connections, other.connections) == (2, 2)

        async def one_open() -> bool:
            return server.open + other.open == 1

        await await_until(one_open, within=10, message="one connection open across both")


async def test_a_connection_that_fails_to_connect_frees_its_place(server: CountingServer) -> None:
    server.release.set()
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{unused.getsockname()[1]}/x"  # bound, not listening
        async with _client(server, httpx.Limits(max_connections=1), pool=2) as client:
            for _ in range(3):
                with pytest.raises(httpx.ConnectError):
                    await client.get(refused)
            assert (await client.get("/x")).status_code == 404
            assert _pool(client)._open == 1


async def test_other_schemes_are_refused_as_httpcore_refuses_them(server: CountingServer) -> None:
    async with _client(server, httpx.Limits(max_connections=1)) as client:
        with pytest.raises(httpx.UnsupportedProtocol, match="ftp"):
            await client.get("ftp://127.0.0.1/x")


async def test_a_request_cancelled_while_a_stale_connection_closes_keeps_no_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    closed = httpcore.AsyncHTTPConnection.aclose
    finished: list[httpcore.AsyncHTTPConnection] = []

    async def slow_aclose(connection: httpcore.AsyncHTTPConnection) -> None:
        await asyncio.sleep(0.3)  # the close outlives the request's cancel below
        await closed(connection)
        finished.append(connection)

    monkeypatch.setattr(httpcore.AsyncHTTPConnection, "aclose", slow_aclose)
    with serving(CountingServer(close_after_answer=True)) as closing:
        closing.release.set()
        async with _client(closing, httpx.Limits(max_connections=1), pool=3) as client:
            assert (await client.get("/first")).status_code == 404

            async def stale() -> bool:
                return closing.open == 0

            await await_until(stale, within=10, message="the server closed the connection")
            with anyio.move_on_after(0.05) as cancelled:
                await client.get("/cancelled")  # finds it stale, and is cancelled closing it
            assert cancelled.cancelled_caught
            # Its slot was given up: with a pool of one, the next request still connects.
            assert (await client.get("/next")).status_code == 404
            assert _pool(client)._open == 1

            async def stale_one_closed() -> bool:
                return bool(finished)

            await await_until(stale_one_closed, within=10, message="the shielded close ended")
