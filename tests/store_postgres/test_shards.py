"""Shards in PostgreSQL (SPEC §16): the SQL hash, the number fixed at the first migration, the
shard fence, and a replica's membership (``PostgresShardLeases``) against a real server."""

from __future__ import annotations

import random
import uuid

import anyio
import psycopg
import pytest

from tests.store_postgres.test_store_postgres import T0, new_run, queue_commit
from workload_domain.compiler import compile_definition
from workload_domain.errors import Fenced, ModeConflict, ShardsLost
from workload_domain.fencing import fenced
from workload_domain.records import VersionRecord, WorkflowRecord
from workload_domain.shards import DEFAULT_SHARDS, ShardFence, shard_of
from workload_store_postgres.lock import PostgresCoordinatorLock
from workload_store_postgres.migrations import ShardsFixed, migrate_up, stored_shards
from workload_store_postgres.shard_leases import PostgresShardLeases
from workload_store_postgres.store import PostgresStore

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("total", [1, 7, 64, 4096])
def test_the_database_hashes_run_ids_as_the_domain_does(database_url: str, total: int) -> None:
    rng = random.Random(total)
    ids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(2000)]
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT i::text, workload_shard_of(i::uuid, %s) FROM unnest(%s::text[]) AS i",
            (total, ids),
        ).fetchall()
    assert dict(rows) == {i: shard_of(i, total) for i in ids}


REMOTE = compile_definition({"id": "remote", "tasks": [{"key": "r", "action": "resize"}]})


async def remote_runs(store: PostgresStore, n: int) -> list[str]:
    """``n`` new runs of a one-task remote workflow (created, not started)."""
    await store.create_workflow(
        WorkflowRecord("remote", 1, "", T0, T0),
        VersionRecord("remote", 1, REMOTE.definition_hash, 1, T0, REMOTE.document()),
    )
    ids = []
    for _ in range(n):
        made = new_run(REMOTE)
        await store.create_run(made)
        ids.append(made.run.run_id)
    return ids


async def test_a_new_run_is_stored_in_its_shard(database_url: str) -> None:
    async with PostgresStore(database_url) as store:
        ids = await remote_runs(store, 10)
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT run_id::text, shard FROM workflow_runs").fetchall()
    assert dict(rows) == {i: shard_of(i, DEFAULT_SHARDS) for i in ids}


async def test_the_number_of_shards_is_fixed_by_the_first_migration(
    empty_database_url: str,
) -> None:
    await migrate_up(empty_database_url, shards=16)
    assert await stored_shards(empty_database_url) == 16
    with psycopg.connect(empty_database_url) as conn:
        shards = [s for (s,) in conn.execute("SELECT shard FROM shards ORDER BY shard")]
    assert shards == list(range(16))
    assert await migrate_up(empty_database_url, shards=16) == ()  # the same: nothing to do
    assert await migrate_up(empty_database_url) == ()  # unset: the stored one stands
    with pytest.raises(ShardsFixed, match="has 16 shards") as refused:
        await migrate_up(empty_database_url, shards=32)
    assert (refused.value.stored, refused.value.wanted) == (16, 32)
    store = PostgresStore(empty_database_url, verify_schema=True, expected_shards=8)
    with pytest.raises(ShardsFixed, match="WORKLOAD_SHARDS=8"):
        await store.open()


def replica(
    database_url: str, made: list[PostgresShardLeases], name: str, **kw: float
) -> PostgresShardLeases:
    membership = PostgresShardLeases(database_url, name, **kw)
    made.append(membership)
    return membership


async def joined(
    database_url: str, made: list[PostgresShardLeases], *names: str, **kw: float
) -> list[PostgresShardLeases]:
    """Replicas ``names`` (the first with ``kw``), each joined to the cluster."""
    members = [
        replica(database_url, made, n, **(kw if i == 0 else {})) for i, n in enumerate(names)
    ]
    for member in members:
        assert await member.join() == DEFAULT_SHARDS
    return members


async def test_replicas_join_take_free_shards_and_see_each_other(
    database_url: str, leases: list[PostgresShardLeases]
) -> None:
    a, b = await joined(database_url, leases, "a", "b")
    first = await a.take(3)
    assert first == ShardFence(3, 1)
    assert await b.take(3) is None  # held: never taken from a live replica
    picture = await b.renew([])
    assert picture.members == ("a", "b")
    assert 3 not in picture.free
    assert len(picture.free) == DEFAULT_SHARDS - 1
    assert picture.owned == {"a": 1}
    await a.give(first)
    again = await b.take(3)
    assert again == ShardFence(3, 2)  # every acquisition is a new epoch
    with pytest.raises(ShardsLost, match="lost shards \\[3\\]"):
        await a.renew([first])


async def test_a_departing_replica_is_no_member_to_share_with_but_keeps_what_it_holds(
    database_url: str, leases: list[PostgresShardLeases]
) -> None:
    a, b = await joined(database_url, leases, "a", "b")
    one, two = await a.take(1), await a.take(2)
    assert one is not None
    assert two is not None
    assert (await b.renew([])).members == ("a", "b")
    await a.depart()  # a stop: it hands its shards over from now on
    picture = await b.renew([])
    assert picture.members == ("b",)  # b's share is every shard: it takes each one given up
    assert 1 not in picture.free
    assert 2 not in picture.free
    assert picture.owned == {"a": 2}
    assert await b.take(1) is None  # still a's, and renewed by it
    assert (await a.renew([one, two])).members == ("a", "b")  # it sees itself, as ever
    await a.give(one)
    assert 1 in (await b.renew([])).free
    assert await b.take(1) == ShardFence(1, 2)
    await a.leave()
    again = replica(database_url, leases, "a")
    await again.join()  # a new incarnation of the id is not leaving
    assert (await b.renew([ShardFence(1, 2)])).members == ("a", "b")


async def test_a_dead_replicas_shards_are_free_at_once_and_its_id_reusable(
    database_url: str, leases: list[PostgresShardLeases]
) -> None:
    a, b = await joined(database_url, leases, "a", "b", lease_seconds=60)
    held = await a.take(5)
    assert held is not None
    with pytest.raises(ModeConflict, match="already has the id 'a'"):
        await replica(database_url, leases, "a").join()
    await a.leave()  # its session ends (as a killed replica's does), with a minute of lease
    assert 5 in (await b.renew([])).free
    assert await b.take(5) == ShardFence(5, 2)
    again = replica(database_url, leases, "a")
    await again.join()  # its id is free again
    assert "a" in (await b.renew([ShardFence(5, 2)])).members


async def test_replicas_and_a_coordinator_never_share_a_database(
    database_url: str, leases: list[PostgresShardLeases]
) -> None:
    coordinator = PostgresCoordinatorLock(database_url)
    assert await coordinator.acquire()
    with pytest.raises(ModeConflict, match="a coordinator") as refused:
        await replica(database_url, leases, "a").join()
    assert refused.value.mode_in_use == "coordinator"
    await coordinator.release()

    await replica(database_url, leases, "b").join()
    for take_over in (False, True):  # a plain coordinator, and a --standby one
        lock = PostgresCoordinatorLock(database_url, take_over_stale=take_over)
        with pytest.raises(ModeConflict, match="replicas") as refused:
            await lock.acquire()
        assert refused.value.mode_in_use == "replicas"
        await lock.release()


async def test_a_write_of_a_stale_shard_epoch_is_refused(
    database_url: str, leases: list[PostgresShardLeases]
) -> None:
    a, b = await joined(database_url, leases, "a", "b")
    told: list[Fenced] = []
    async with PostgresStore(database_url) as store:
        store.fence(None, told.append)
        await remote_runs(store, 0)
        made = new_run(REMOTE)
        await store.create_run(made)
        run_id = made.run.run_id
        commit = queue_commit(made, T0)
        shard = shard_of(run_id, DEFAULT_SHARDS)
        old = await a.take(shard)
        assert old is not None
        await a.give(old)
        new = await b.take(shard)
        assert new == ShardFence(shard, old.epoch + 1)
        with fenced(old), pytest.raises(Fenced, match=f"shard {shard}"):
            await store.commit(commit)
        # The process is told which fence refused it: the shard's, not a coordinator epoch.
        assert [(e.shard, e.epoch) for e in told] == [(shard, old.epoch)]
        assert (await store.load_run(run_id)).run.revision == 1  # nothing written
        with fenced(new):
            await store.commit(commit)
        after = await store.load_run(run_id)
        assert after.run.revision == 2
    with psycopg.connect(database_url) as conn:
        epochs = {e for (e,) in conn.execute("SELECT epoch FROM state_events WHERE sequence > 1")}
    assert epochs == {new.epoch}  # the events carry the shard epoch of their writer


async def test_a_replica_joining_fences_out_a_coordinator_whose_lock_vanished(
    database_url: str, leases: list[PostgresShardLeases]
) -> None:
    lock = PostgresCoordinatorLock(database_url)
    told: list[Fenced] = []
    try:
        assert await lock.acquire()
        async with PostgresStore(database_url) as store:
            store.fence(lock.epoch, told.append)
            await remote_runs(store, 0)
            made = new_run(REMOTE)
            await store.create_run(made)
            # Its lock's session ends (terminated), and a replica joins before the coordinator's
            # next lock check would notice: from then on it must write nothing (SPEC §14).
            with psycopg.connect(database_url, autocommit=True) as conn:
                ended = conn.execute(
                    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                    " WHERE application_name = 'workload-coordinator-lock'"
                ).fetchall()
            assert ended == [(True,)]
            await joined(database_url, leases, "a")
            with pytest.raises(Fenced):
                await store.commit(queue_commit(made, T0))
            assert [e.shard for e in told] == [None]  # the coordinator epoch refused it
            assert (await store.load_run(made.run.run_id)).run.revision == 1  # nothing written
    finally:
        await lock.release()


async def test_replicas_joining_at_once_all_join(
    database_url: str, leases: list[PostgresShardLeases]
) -> None:
    # Each join takes the coordinator's fence exclusively a moment (ADR 0051): the others wait
    # for it; none ends another's session as it ends a stale coordinator's writes.
    members = [replica(database_url, leases, f"r{i}") for i in range(8)]
    totals: list[int] = []

    async def join(member: PostgresShardLeases) -> None:
        totals.append(await member.join())

    for _ in range(3):
        async with anyio.create_task_group() as tg:
            for member in members:
                tg.start_soon(join, member)
        assert totals == [DEFAULT_SHARDS] * len(members)
        assert (await members[0].renew([])).members == tuple(sorted(m.replica_id for m in members))
        for member in members:
            await member.leave()
        totals.clear()
        members = [replica(database_url, leases, m.replica_id) for m in members]


async def test_taking_a_shard_ends_the_old_owners_writes_in_flight(
    database_url: str, leases: list[PostgresShardLeases]
) -> None:
    a, b = await joined(database_url, leases, "a", "b", lease_seconds=0.2)
    old = await a.take(9)
    assert old is not None
    # A frozen owner's transaction holds the shard's fence (it passed it, never committed).
    frozen = await psycopg.AsyncConnection.connect(database_url, autocommit=False)
    try:
        await frozen.execute("SELECT workload_shard_fence(9, %s)", (old.epoch,))
        with psycopg.connect(database_url) as conn:  # its lease runs out (0.2 s), unrenewed
            conn.execute("SELECT pg_sleep(0.3)")
        taken = await b.take(9)
        assert taken == ShardFence(9, old.epoch + 1)
        with pytest.raises(psycopg.OperationalError):
            await frozen.execute("SELECT 1")  # ended: it could never commit anyway
    finally:
        await frozen.close()


async def test_a_coordinator_alone_is_the_one_member(database_url: str) -> None:
    lock = PostgresCoordinatorLock(database_url, leader="solo-1")
    assert await lock.acquire()
    try:
        async with PostgresStore(database_url) as store:
            total, members = await store.cluster()
        assert total == DEFAULT_SHARDS
        (member,) = members
        assert member.replica_id == "solo-1"
        assert member.shards == tuple(range(DEFAULT_SHARDS))
        assert member.started_at <= member.last_seen_at
    finally:
        await lock.release()


async def test_the_cluster_shows_live_replicas_with_their_shards(
    database_url: str, leases: list[PostgresShardLeases]
) -> None:
    a, b = await joined(database_url, leases, "a", "b")
    for shard in (0, 2):
        assert await a.take(shard)
    assert await b.take(1)
    async with PostgresStore(database_url) as store:
        total, members = await store.cluster()
        assert total == DEFAULT_SHARDS
        assert [(m.replica_id, m.shards) for m in members] == [("a", (0, 2)), ("b", (1,))]
        await a.leave()
        _, members = await store.cluster()
        assert [m.replica_id for m in members] == ["b"]


async def test_renewing_without_a_connection_is_shards_lost(database_url: str) -> None:
    membership = PostgresShardLeases(database_url, "lonely")
    with pytest.raises(ShardsLost, match="connection is closed"):
        await membership.renew([])


def test_hostile_replica_ids_are_refused_before_connecting(database_url: str) -> None:
    for bad in ("", "a b", "x" * 129, "a;DROP TABLE shards"):
        with pytest.raises(ValueError, match="replica id"):
            PostgresShardLeases(database_url, bad)
    with pytest.raises(ValueError, match="positive"):
        PostgresShardLeases(database_url, "a", lease_seconds=0)


async def test_a_coordinator_refuses_a_database_replicas_used_moments_ago(
    database_url: str, leases: list[PostgresShardLeases]
) -> None:
    """Replicas that all died hold no lock while they restart: their rows still refuse it."""
    (dead,) = await joined(database_url, leases, "dead")
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(  # its session ends as a SIGKILLed replica's does: the row stays
            "SELECT pg_terminate_backend(backend_pid) FROM replicas WHERE replica_id = 'dead'"
        )
        for take_over in (False, True):  # a plain coordinator, and a --standby one
            lock = PostgresCoordinatorLock(database_url, take_over_stale=take_over)
            with pytest.raises(ModeConflict, match="less than 30 s ago") as refused:
                await lock.acquire()
            assert refused.value.mode_in_use == "replicas"
            await lock.release()
        # Its lease ran out 29 s ago: still within the grace; 31 s ago: the database is free.
        conn.execute("UPDATE replicas SET lease_expires_at = now() - interval '29 seconds'")
        with pytest.raises(ModeConflict, match="may be restarting"):
            await PostgresCoordinatorLock(database_url).acquire()
        conn.execute("UPDATE replicas SET lease_expires_at = now() - interval '31 seconds'")
    coordinator = PostgresCoordinatorLock(database_url)
    assert await coordinator.acquire()
    await coordinator.release()
    assert dead in leases


async def test_a_coordinator_takes_a_database_whose_replicas_left_at_once(
    database_url: str, leases: list[PostgresShardLeases]
) -> None:
    a, b = await joined(database_url, leases, "a", "b")
    await a.leave()
    await b.leave()  # SIGTERM: each deleted its row and released the shared lock
    coordinator = PostgresCoordinatorLock(database_url)
    assert await coordinator.acquire()
    await coordinator.release()
