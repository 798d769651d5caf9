"""A claim that meets work a commit holds for a moment tries again (SPEC §10; found by the §10
audit): ``claim_attempts`` skips locked rows, and the commit holding the run (a sibling task's
report, a heartbeat) queues nothing, so no notification would wake the claim again; it slept
until its ``wait_seconds`` ran out with the work queued."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import psycopg
import pytest

from tests.contract.test_workers_contract import claim, queued_run
from workload_engine.clock import FakeClock
from workload_store_postgres.store import PostgresStore

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[PostgresStore]:
    async with PostgresStore(database_url, max_size=4) as opened:
        yield opened


async def test_a_claim_that_meets_a_held_run_takes_its_work_once_it_is_let_go(
    database_url: str, store: PostgresStore
) -> None:
    clock = FakeClock()
    run_id = await queued_run(store, clock)
    released = anyio.Event()
    holding = anyio.Event()

    async def hold_the_run() -> None:
        # As a commit on the run does (it locks the run row first), for 30 ms.
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            await conn.execute(
                "SELECT 1 FROM workflow_runs WHERE run_id = %s FOR UPDATE", (run_id,)
            )
            holding.set()
            await anyio.sleep(0.03)
            await conn.commit()
        released.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold_the_run)
        await holding.wait()
        request, _ = claim()
        claimed = await store.claim(request, clock.now())
    assert released.is_set()
    assert [c.run_id for c in claimed] == [run_id], "the claim passed over work it met locked"


async def test_a_claim_with_nothing_queued_returns_at_once(store: PostgresStore) -> None:
    request, _ = claim()
    with anyio.fail_after(5):  # a bound on a broken retry loop, not a measure
        assert await store.claim(request, FakeClock().now()) == []
