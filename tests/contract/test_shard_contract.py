"""Shards on both stores (SPEC §16): listings by shard, ``executed_by``, the cluster's members."""

from __future__ import annotations

import pytest

from tests.contract.runs import start_first_attempt
from tests.engine.harness import Harness, mock, workflow
from workload_domain.ports import Store
from workload_domain.shards import DEFAULT_SHARDS, shard_of
from workload_engine.clock import FakeClock

pytestmark = pytest.mark.anyio


async def test_unfinished_runs_of_some_shards_only(store: Store, clock: FakeClock) -> None:
    h = Harness(store=store, clock=clock)
    ids = [await h.create(workflow(mock("x"))) for _ in range(24)]
    shards = {shard_of(i, DEFAULT_SHARDS) for i in ids}
    chosen = set(sorted(shards)[: len(shards) // 2])
    expected = sorted(i for i in ids if shard_of(i, DEFAULT_SHARDS) in chosen)
    seen: list[str] = []
    after = None
    while True:
        page = await store.list_unfinished_runs(after, 3, chosen)
        seen.extend(page)
        if len(page) < 3:
            break
        after = page[-1]
    assert seen == expected
    assert await store.list_unfinished_runs(None, 100, set()) == []
    assert await store.list_unfinished_runs(None, 100) == sorted(ids)


async def test_running_attempts_by_shard_and_who_executed_them(
    store: Store, clock: FakeClock
) -> None:
    h = Harness(store=store, clock=clock)
    run_id = await h.create(workflow(mock("x")))
    task_key = await start_first_attempt(store, clock, run_id, executed_by="replica-a.1")
    mine = shard_of(run_id, DEFAULT_SHARDS)
    other = (mine + 1) % DEFAULT_SHARDS
    assert await store.runs_with_running_attempts({"mock"}, {mine}) == [run_id]
    assert await store.runs_with_running_attempts({"mock"}, {other}) == []
    assert await store.runs_with_running_attempts({"mock"}) == [run_id]
    (attempt,) = await store.list_attempts(run_id, task_key)
    assert attempt.executed_by == "replica-a.1"
    (live,) = (await store.load_run(run_id)).live_attempts
    assert live.executed_by == "replica-a.1"


async def test_nobody_is_a_member_of_a_cluster_nobody_executes(store: Store) -> None:
    total, members = await store.cluster()
    assert (total, members) == (DEFAULT_SHARDS, ())
