"""One Store contract, two adapters: every test here runs on InMemoryStore and PostgresStore."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from workload_domain.ports import Store
from workload_engine.clock import FakeClock
from workload_engine.memory import InMemoryStore
from workload_store_postgres.store import PostgresStore


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["memory", "postgres"])
async def store(request: pytest.FixtureRequest, clock: FakeClock) -> AsyncIterator[Store]:
    if request.param == "memory":
        yield InMemoryStore(clock)
        return
    url: str = request.getfixturevalue("database_url")
    async with PostgresStore(url, max_size=4, clock=clock) as postgres:
        yield postgres
