"""The store refuses at once while PostgreSQL is known unreachable, and comes back (ADR 0021).

A store reaches the test's database through a small TCP proxy, run in the test's own event loop,
that the test cuts (every connection aborted, new ones closed at once) and restores.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import anyio
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.cut_forwarding import CutForwarding
from tests.waiting import await_until
from workload_domain.errors import StoreUnavailable
from workload_store_postgres import StoreDown
from workload_store_postgres.store import PostgresStore

pytestmark = pytest.mark.anyio

POOL_TIMEOUT = 30.0
"""The stores' pool timeout here: a refusal that waited for it would be unmistakable."""
AT_ONCE = 10.0
"""Far below the pool timeout: a behavioural check, not a performance target."""


class CutProxy:
    """A TCP proxy on 127.0.0.1 to a PostgreSQL server, which the test cuts and restores."""

    def __init__(self, target_url: str) -> None:
        params = conninfo_to_dict(target_url)
        host, port = str(params.get("host") or "localhost"), str(params.get("port") or 5432)
        unix = f"{host}/.s.PGSQL.{port}" if host.startswith("/") else None

        async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            if unix is not None:
                return await asyncio.open_unix_connection(unix)
            return await asyncio.open_connection(host, int(port))

        self.forwarding = CutForwarding(connect)
        self._target_url = target_url
        self._server: asyncio.Server | None = None

    def url(self) -> str:
        """``target_url``, through the proxy."""
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return make_conninfo(
            self._target_url, host="127.0.0.1", port=port, sslmode="disable", gssencmode="disable"
        )

    def sever(self) -> None:
        """Abort every connection; close new ones at once."""
        self.forwarding.sever()

    async def __aenter__(self) -> CutProxy:
        self._server = await asyncio.start_server(self.forwarding.accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.sever()
        assert self._server is not None
        self._server.close()


@pytest.fixture
async def proxy(database_url: str) -> AsyncIterator[CutProxy]:
    async with CutProxy(database_url) as running:
        yield running


@pytest.fixture
async def store(proxy: CutProxy) -> AsyncIterator[PostgresStore]:
    opened = PostgresStore(proxy.url(), pool_timeout_seconds=POOL_TIMEOUT)
    async with opened:
        yield opened


async def refused(store: PostgresStore) -> StoreUnavailable:
    """The store's answer to a read: an error (fail if the read succeeds)."""
    with pytest.raises(StoreUnavailable) as caught:
        await store.page_workflows(None, 1)
    return caught.value


async def test_a_store_told_postgresql_is_unreachable_refuses_at_once_until_it_answers(
    store: PostgresStore, proxy: CutProxy
) -> None:
    await store.page_workflows(None, 1)
    proxy.sever()
    store.unreachable("the standby's lock try failed")  # as the lifecycle tells it
    assert store.down == "the standby's lock try failed"
    with anyio.fail_after(AT_ONCE):  # not the pool's timeout: nothing is tried
        error = await refused(store)
    assert isinstance(error, StoreDown)
    assert error.retry_after == 1

    async def probed_thrice() -> bool:
        return proxy.forwarding.refused >= 3

    await await_until(probed_thrice, within=AT_ONCE, message="the store does not probe")
    assert store.down is not None  # each probe failed: still refused
    with anyio.fail_after(AT_ONCE):
        assert isinstance(await refused(store), StoreDown)

    proxy.forwarding.restore()

    async def served() -> bool:
        return store.down is None

    await await_until(served, within=AT_ONCE, message="the store did not come back")
    assert (await store.page_workflows(None, 1)).items == ()


async def test_a_store_told_of_the_outage_refuses_until_its_probe_connects(
    store: PostgresStore,
) -> None:
    store.unreachable("the standby's lock try failed")
    assert store.down == "the standby's lock try failed"
    assert isinstance(await refused(store), StoreDown)

    async def served() -> bool:
        return store.down is None

    # PostgreSQL is there all along: the first probe finds it.
    await await_until(served, within=AT_ONCE, message="the store did not come back")
    assert (await store.page_workflows(None, 1)).items == ()


async def test_a_store_closed_while_unreachable_stops_probing(proxy: CutProxy) -> None:
    store = PostgresStore(proxy.url(), pool_timeout_seconds=POOL_TIMEOUT)
    await store.open()
    store.unreachable("told")
    assert probing() != []
    await store.close()
    assert probing() == []  # it would reopen a pool behind the closed store's back
    assert store.down == "told"
    assert isinstance(await refused(store), StoreDown)


def probing() -> list[str]:
    """The tasks of this event loop that probe PostgreSQL for a store."""
    running = [repr(task.get_coro()) for task in asyncio.all_tasks() if not task.done()]
    return [coroutine for coroutine in running if "StorePool._recover" in coroutine]
