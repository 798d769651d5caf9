"""Leases a live process keeps (ADR 0047): renewals do not wait for the disk, and a take's lease
counts from the take, not from the start of the transaction that waited for it.

A leader's or a replica's lease is three check intervals long; a renewal that waited for a slow
disk to flush its commit could let it run out under a live process, and a standby or another
replica would take over (found by a red CI on a busy disk). A lease is worth nothing after a crash
of PostgreSQL — the crash ends every session, and the locks and memberships with them — so its
renewal need not be durable: each renewal sets ``synchronous_commit`` off for its own transaction.
Here each statement runs inside an explicit transaction, which shows the setting it leaves.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any, LiteralString

import anyio
import psycopg
import pytest

from tests.store_postgres.test_shards import joined
from workload_domain.shards import ShardFence
from workload_store_postgres._queries import query
from workload_store_postgres.lock import _RENEW, COORDINATOR_LOCK_KEY
from workload_store_postgres.shard_leases import PostgresShardLeases

pytestmark = pytest.mark.anyio


async def synchronous_commit_inside(
    conn: psycopg.AsyncConnection[Any], statement: LiteralString, params: Mapping[str, Any]
) -> tuple[str, bool]:
    """The ``synchronous_commit`` a statement leaves its transaction with, and if it wrote."""
    async with conn.transaction(force_rollback=True):
        cursor = await conn.execute(statement, params)
        wrote = cursor.rowcount > 0
        setting = await (await conn.execute("SHOW synchronous_commit")).fetchone()
    assert setting is not None
    return str(setting[0]), wrote


async def test_a_leaders_lease_renewal_does_not_wait_for_the_disk(database_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        before = await (await conn.execute("SHOW synchronous_commit")).fetchone()
        row = await (await conn.execute("SELECT epoch FROM coordinator")).fetchone()
        assert row is not None
        inside, renewed = await synchronous_commit_inside(
            conn, _RENEW, {"lease": 3.0, "epoch": row[0]}
        )
        after = await (await conn.execute("SHOW synchronous_commit")).fetchone()
    assert (inside, renewed) == ("off", True)
    assert after == before, "the session's other writes are left as they were"


async def test_a_replicas_lease_renewal_does_not_wait_for_the_disk(database_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        before = await (await conn.execute("SHOW synchronous_commit")).fetchone()
        joined = await (
            await conn.execute(query("join_cluster"), {"key": COORDINATOR_LOCK_KEY})
        ).fetchone()
        assert joined is not None
        assert joined[0], "joined the cluster"
        member = {"replica_id": "r-disk", "lease": 3.0, "backend_start": joined[2]}
        await conn.execute(query("register_replica"), member)
        renewal = {**member, "shards": [], "epochs": []}
        inside, _ = await synchronous_commit_inside(conn, query("renew_membership"), renewal)
        after = await (await conn.execute("SHOW synchronous_commit")).fetchone()
        registered = await (await conn.execute(query("renew_membership"), renewal)).fetchone()
        await conn.execute(query("leave_cluster"), {"key": COORDINATOR_LOCK_KEY})
    assert inside == "off"
    assert after == before, "the session's other writes are left as they were"
    assert registered is not None
    assert registered[0], "the renewal found its replica"


async def test_a_taken_shards_lease_counts_from_the_take_not_from_its_waits(
    database_url: str, leases: list[PostgresShardLeases]
) -> None:
    # The take's transaction waits for the shard's row (another replica taking it) and for the
    # writes of the previous owner; a lease from now(), the transaction's start, began short.
    (member,) = await joined(database_url, leases, "r-wait", check_timeout=10)
    async with await psycopg.AsyncConnection.connect(database_url) as other:
        await other.execute("SELECT 1 FROM shards WHERE shard = 5 FOR UPDATE")
        async with anyio.create_task_group() as tg:
            taken: list[ShardFence | None] = []

            async def take() -> None:
                taken.append(await member.take(5))

            tg.start_soon(take)
            await anyio.sleep(0.5)  # the take waits for the row (its lock wait is 5 s)
            row = await (await other.execute("SELECT clock_timestamp()")).fetchone()
            assert row is not None
            released = row[0]
            await other.commit()
        row = await (
            await other.execute("SELECT taken_at, lease_expires_at FROM shards WHERE shard = 5")
        ).fetchone()
    assert taken == [ShardFence(5, 1)]
    assert row is not None
    taken_at, expires = row
    assert taken_at >= released, "the lease counts from the take, after the wait"
    assert expires - taken_at == timedelta(seconds=3)  # the default lease
