"""A heartbeat that commits while the lease reaper's commit waits for the attempt's row.

``test_workers_contract.py`` shows both stores refusing a reaper's commit decided before a
heartbeat renewed the lease. Here, in PostgreSQL only, the heartbeat is caught mid-way: written,
not yet committed, when the reaper's statement starts; its snapshot still holds the lease that
ran out. The statement waits for the row and must judge the lease as the heartbeat left it
(migration 0013), not as its snapshot saw it. (Here, not in ``tests/store_postgres``: the
reaper's commit is planned by the engine, which that package's own session does not install.)
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import psycopg
import pytest
from psycopg import sql

from tests.contract.test_workers_contract import StaleReap, stale_reap
from workload_domain.errors import RevisionConflict
from workload_domain.statuses import AttemptStatus
from workload_engine.clock import FakeClock
from workload_store_postgres._queries import query
from workload_store_postgres._session import DedicatedSession
from workload_store_postgres.store import PostgresStore

pytestmark = pytest.mark.anyio

_WAITING = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'
"""


async def set_default_isolation(database_url: str, level: str) -> None:
    """Give the test's database a default isolation for its new sessions."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as admin:
        await admin.execute(
            sql.SQL("ALTER DATABASE {} SET default_transaction_isolation = {}").format(
                sql.Identifier(admin.info.dbname), sql.Literal(level)
            )
        )


async def isolation(conn: psycopg.AsyncConnection[Any]) -> object:
    row = await (await conn.execute("SHOW transaction_isolation")).fetchone()
    assert row is not None
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


async def test_every_session_of_the_store_runs_at_read_committed(database_url: str) -> None:
    # The pool's, and the dedicated sessions of the coordinator lock and of a replica's
    # membership, whose renewals and takes meet concurrent changes of their rows.
    await set_default_isolation(database_url, "repeatable read")
    async with await psycopg.AsyncConnection.connect(database_url) as plain:
        assert await isolation(plain) == "repeatable read"
    async with PostgresStore(database_url, max_size=1) as store, store._db.single() as pooled:
        assert await isolation(pooled) == "read committed"
    session = DedicatedSession(database_url, application_name="test", connect_timeout=5)
    dedicated = await session.connect(5)
    try:
        assert await isolation(dedicated) == "read committed"
    finally:
        await session.close(dedicated)


@pytest.mark.parametrize("default_isolation", ["read committed", "repeatable read"])
async def test_a_heartbeat_committed_while_the_reapers_commit_waits_refuses_it(
    database_url: str, default_isolation: str
) -> None:
    # The store's sessions run at READ COMMITTED whatever the database's default: at REPEATABLE
    # READ the waiting statement would fail as a serialization failure (StoreUnavailable).
    await set_default_isolation(database_url, default_isolation)
    clock = FakeClock()
    async with PostgresStore(database_url, max_size=4, clock=clock) as store:
        stale = await stale_reap(store, clock)
        params = {**stale.heartbeat, "digest": stale.heartbeat["token_digest"]}
        outcome: list[Exception | None] = []

        async def reap() -> None:
            try:
                await store.commit(stale.commit)
            except RevisionConflict as exc:
                outcome.append(exc)
            else:
                outcome.append(None)

        async with (
            await psycopg.AsyncConnection.connect(database_url) as heartbeat,
            await psycopg.AsyncConnection.connect(database_url, autocommit=True) as watch,
        ):
            # The heartbeat's statement, run and not committed: it holds the attempt's row.
            row = await (await heartbeat.execute(query("heartbeat"), params)).fetchone()
            assert row is not None
            async with anyio.create_task_group() as tg:
                tg.start_soon(reap)
                for _ in range(2000):  # 20 s at most
                    if await (await watch.execute(_WAITING)).fetchone() == (1,):
                        break
                    await anyio.sleep(0.01)
                else:
                    pytest.fail("the reaper's commit never waited for the heartbeat's row")
                assert outcome == [], "the reaper's commit waits for the heartbeat's row"
                await heartbeat.commit()
        assert len(outcome) == 1
        assert isinstance(outcome[0], RevisionConflict)
        fresh = await store.load_run(stale.read.run.run_id)
        assert fresh.run.revision == stale.read.run.revision, "nothing of the commit was written"
        (live,) = fresh.live_attempts
        renewed = stale.heartbeat["now"] + timedelta(seconds=10)
        assert (live.status, live.lease_expires_at) == (AttemptStatus.RUNNING, renewed)


async def test_in_a_group_commit_only_the_reap_of_a_renewed_lease_is_refused(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reaps of several runs committed at once share a group's transaction; the one whose lease
    # a heartbeat renewed fails the group's transaction, each of the group is then written
    # alone, and its reaper alone is told to read the run again.
    clock = FakeClock()
    async with PostgresStore(database_url, max_size=4, clock=clock) as store:
        reaps = [await stale_reap(store, clock) for _ in range(6)]
        renewed = reaps[3]
        assert await store.heartbeat(**renewed.heartbeat) is not None
        tried: list[list[str]] = []
        write = store._commits._write

        async def spied(group: list[Any]) -> None:
            tried.append([str(queued.run_id) for queued in group])
            await write(group)

        monkeypatch.setattr(store._commits, "_write", spied)
        told: dict[str, Exception | None] = {}

        async def reap(stale: StaleReap) -> None:
            try:
                await store.commit(stale.commit)
            except RevisionConflict as exc:
                told[stale.attempt_id] = exc
            else:
                told[stale.attempt_id] = None

        async with anyio.create_task_group() as tg:
            for stale in reaps:
                tg.start_soon(reap, stale)
        renewed_run = renewed.read.run.run_id
        assert any(len(group) > 1 and renewed_run in group for group in tried), tried
        assert isinstance(told.pop(renewed.attempt_id), RevisionConflict)
        assert told == {stale.attempt_id: None for stale in reaps if stale is not renewed}
        for stale in reaps:
            found = await store.find_attempt(stale.attempt_id)
            assert found is not None
            ended = AttemptStatus.RUNNING if stale is renewed else AttemptStatus.INTERRUPTED
            assert found.attempt.status is ended
