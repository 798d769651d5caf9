"""A claim that meets work a commit holds for a moment tries again (SPEC §10; found by the §10
audit): ``claim_attempts`` skips locked rows, and the commit holding the run (a sibling task's
report, a heartbeat) queues nothing, so no notification would wake the claim again; it slept
until its ``wait_seconds`` ran out with the work queued."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta

import anyio
import psycopg
import pytest

from tests.store_postgres.test_store_postgres import T0, new_run, queue_commit
from workload_domain.compiler import compile_definition
from workload_domain.leases import token_digest
from workload_domain.records import VersionRecord, WorkflowRecord
from workload_domain.workers import SEEN_SECONDS, Claim
from workload_store_postgres.store import PostgresStore

pytestmark = pytest.mark.anyio


REMOTE = compile_definition({"id": "remote", "tasks": [{"key": "r", "action": "resize"}]})
CLAIM = Claim("w1", ("default",), ("resize",), 1, (token_digest("token-1"),))


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[PostgresStore]:
    async with PostgresStore(database_url, max_size=4) as opened:
        yield opened


async def queued_run(store: PostgresStore) -> str:
    """A run whose one remote task is queued."""
    document = REMOTE.document()
    await store.create_workflow(
        WorkflowRecord("remote", 1, "", T0, T0),
        VersionRecord("remote", 1, REMOTE.definition_hash, 1, T0, document),
    )
    made = new_run(REMOTE)
    await store.create_run(made)
    await store.commit(queue_commit(made, T0))
    return made.run.run_id


async def test_a_claim_that_meets_a_held_run_takes_its_work_once_it_is_let_go(
    database_url: str, store: PostgresStore
) -> None:
    run_id = await queued_run(store)
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
        claimed = await store.claim(CLAIM, T0)
    assert released.is_set()
    assert [c.run_id for c in claimed] == [run_id], "the claim passed over work it met locked"


async def test_a_claim_with_nothing_queued_returns_at_once(store: PostgresStore) -> None:
    with anyio.fail_after(5):  # a bound on a broken retry loop, not a measure
        assert await store.claim(CLAIM, T0) == []


def _next_xid(url: str) -> int:
    """The next transaction id of the cluster: how many write transactions happened since."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetchone()
    assert row is not None
    return int(row[0])


async def test_a_claim_that_finds_nothing_writes_nothing(
    store: PostgresStore, database_url: str
) -> None:
    # SPEC §15: woken claims whose work another took must not be write transactions.
    first = await store.claim(CLAIM, T0)
    assert first == []
    (worker,) = (await store.page_workers(None, 10)).items  # a new worker is recorded at once
    assert worker.last_seen_at == T0
    before = _next_xid(database_url)
    for i in range(10):
        assert await store.claim(CLAIM, T0 + timedelta(seconds=i * 0.4)) == []
    assert _next_xid(database_url) == before  # no write transaction at all
    (worker,) = (await store.page_workers(None, 10)).items
    assert worker.last_seen_at == T0
    # Recorded again once SEEN_SECONDS passed, or when what it serves changes.
    later = T0 + timedelta(seconds=SEEN_SECONDS + 1)
    assert await store.claim(CLAIM, later) == []
    (worker,) = (await store.page_workers(None, 10)).items
    assert worker.last_seen_at == later
    other = Claim("w1", ("default", "gpu"), ("resize",), 1, (token_digest("token-2"),))
    assert await store.claim(other, later + timedelta(seconds=1)) == []
    (worker,) = (await store.page_workers(None, 10)).items
    assert worker.queues == ("default", "gpu")


async def test_a_long_polls_look_after_a_wake_up_writes_nothing(
    store: PostgresStore, database_url: str
) -> None:
    # ADR 0025: a claim request records its worker once, when it begins; its looks after a
    # wake-up that find nothing write nothing, however long ago the worker was recorded.
    assert await store.claim(CLAIM, T0) == []
    woken = replace(CLAIM, record_seen=False)
    before = _next_xid(database_url)
    for seconds in (SEEN_SECONDS + 1, 3 * SEEN_SECONDS, 50):
        assert await store.claim(woken, T0 + timedelta(seconds=seconds)) == []
    assert _next_xid(database_url) == before  # no write transaction at all
    (worker,) = (await store.page_workers(None, 10)).items
    assert worker.last_seen_at == T0
    # What it claims is still recorded, with the worker.
    await queued_run(store)
    later = T0 + timedelta(seconds=60)
    (claimed,) = await store.claim(woken, later)
    (worker,) = (await store.page_workers(None, 10)).items
    assert worker.last_seen_at == later
    assert claimed.action == "resize"
