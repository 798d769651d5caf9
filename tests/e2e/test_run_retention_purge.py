"""Run retention on PostgreSQL (SPEC §5): every row of a purged run, batches, locks, the metric.

The contract suite (tests/contract/test_retention_contract.py) proves what both stores delete
and keep; here the real database proves that no table keeps a row of a purged run, that the
duty works through a backlog batch by batch counting ``workload_runs_purged_total``, and that a
purge skips a run another transaction holds instead of waiting for it. (Here, not under
tests/api: the API's own session installs no PostgreSQL server.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import anyio
import psycopg
import pytest

from tests.contract.test_retention_contract import canceled_agent_run
from tests.engine.harness import Harness, mock, workflow
from workload_api.container import _retention
from workload_api.retention import RunRetention
from workload_api.settings import Settings
from workload_api.telemetry import Metrics
from workload_domain.errors import RunNotFound
from workload_domain.statuses import RunStatus
from workload_engine.clock import FakeClock
from workload_engine.memory import InMemoryStore
from workload_store_postgres import _retention as postgres_retention
from workload_store_postgres.store import PostgresStore

pytestmark = pytest.mark.anyio

DAY = 86400.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store(database_url: str, clock: FakeClock) -> AsyncIterator[PostgresStore]:
    async with PostgresStore(database_url, max_size=4, clock=clock) as postgres:
        yield postgres


async def rows_of(database_url: str, run_ids: list[str]) -> dict[str, int]:
    """For every table with a ``run_id`` column: how many of its rows belong to ``run_ids``."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        tables = await (
            await conn.execute(
                "SELECT table_name FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND column_name = 'run_id'"
                " ORDER BY table_name"
            )
        ).fetchall()
        counts = {}
        for (table,) in tables:
            query = psycopg.sql.SQL("SELECT count(*) FROM {} WHERE run_id = ANY(%s::uuid[])")
            found = await (
                await conn.execute(query.format(psycopg.sql.Identifier(table)), [run_ids])
            ).fetchone()
            assert found is not None
            counts[str(table)] = int(found[0])
        return counts


async def test_the_duty_deletes_every_row_of_old_finished_runs_and_counts_them(
    store: PostgresStore, clock: FakeClock, database_url: str
) -> None:
    h = Harness(store=store, clock=clock)
    agent, _ = await canceled_agent_run(store, clock)
    old = [agent]
    for i in range(4):
        old.append(
            (
                await h.run(workflow(mock("a"), mock("b", ["a"]), workflow_id=f"w{i}"))
            ).snapshot.run.run_id
        )
    failing = mock("f", fail_always=True, retry={"max_attempts": 2, "initial_backoff_seconds": 0})
    old.append((await h.run(workflow(failing, workflow_id="bad"))).snapshot.run.run_id)
    unfinished = [await h.create(workflow(mock("p"), workflow_id="waiting"))]
    clock.advance(30 * DAY)
    recent = [(await h.run(workflow(mock("a"), workflow_id="later"))).snapshot.run.run_id]
    before = await rows_of(database_url, old)
    # Every child table holds rows of the old runs: the purge has something to delete in each.
    assert {t for t, n in before.items() if n} >= {
        "workflow_runs",
        "task_runs",
        "attempts",
        "state_events",
        "agent_steps",
        "approvals",
    }
    metrics = Metrics()
    retention = RunRetention(store, clock, 7, on_purged=metrics.runs_purged.inc, batch=4)

    assert await retention.purge_due() == len(old)  # a batch of 4, then one of 2

    assert set((await rows_of(database_url, old)).values()) == {0}
    kept = await rows_of(database_url, unfinished + recent)
    assert (kept["workflow_runs"], kept["task_runs"] > 0, kept["state_events"] > 0) == (
        2,
        True,
        True,
    )
    assert metrics.registry.get_sample_value("workload_runs_purged_total") == len(old)
    assert await retention.purge_due() == 0
    assert metrics.registry.get_sample_value("workload_runs_purged_total") == len(old)
    # The unfinished run is never due, however old it gets.
    clock.advance(365 * DAY)
    assert await retention.purge_due() == 1  # the recent run, now old too
    assert (await store.get_run(unfinished[0])).status is RunStatus.PENDING


async def test_a_run_held_by_another_transaction_is_skipped_not_waited_for(
    store: PostgresStore, clock: FakeClock, database_url: str
) -> None:
    h = Harness(store=store, clock=clock)
    held, other = [(await h.run(workflow(mock("a")))).snapshot.run.run_id for _ in range(2)]
    clock.advance(2 * DAY)
    retention = RunRetention(store, clock, 1)
    async with await psycopg.AsyncConnection.connect(database_url) as conn, conn.transaction():
        await conn.execute("SELECT 1 FROM workflow_runs WHERE run_id = %s FOR UPDATE", [held])
        with anyio.fail_after(30):  # a hang guard: a purge that waited would never return
            assert await retention.purge_due() == 1
    assert (await rows_of(database_url, [other]))["workflow_runs"] == 0
    assert await retention.purge_due() == 1  # released: purged at the next pass
    assert (await rows_of(database_url, [held]))["workflow_runs"] == 0


def test_the_duty_exists_only_when_a_retention_is_set(clock: FakeClock) -> None:
    store, metrics = InMemoryStore(clock), Metrics()
    assert _retention(Settings(), store, clock, metrics) is None
    duty = _retention(Settings(run_retention_days=30), store, clock, metrics)
    assert isinstance(duty, RunRetention)


async def test_a_batch_stops_once_its_runs_own_enough_events(
    store: PostgresStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 500 runs of 1,000 tasks each (1.5M events) in one transaction outlasted the statement
    # timeout: the purge failed, the process fail-stopped (exit 5), and did at every start.
    h = Harness(store=store, clock=clock)
    views = [await h.run(workflow(mock("a"), mock("b", ["a"]))) for _ in range(4)]
    events = [v.snapshot.last_sequence for v in views]
    assert all(n > 2 for n in events)
    # Two runs' events are over the budget, one run's are not.
    monkeypatch.setattr(postgres_retention, "PURGE_ROWS", events[0] + 1)
    clock.advance(10 * 86400)
    cutoff = clock.now() - timedelta(days=1)
    assert await store.purge_finished_runs(cutoff, 500) == 1
    with pytest.raises(RunNotFound):
        await store.get_run(views[0].snapshot.run.run_id)
    assert (await store.get_run(views[1].snapshot.run.run_id)).run_id  # left for later
    # A run larger than the budget goes whole, alone.
    monkeypatch.setattr(postgres_retention, "PURGE_ROWS", 1)
    assert await store.purge_finished_runs(cutoff, 500) == 1
    # The retention pass goes on while batches come back short of their limit.
    retention = RunRetention(store, clock, days=1)
    assert await retention.purge_due() == 2
    assert await store.purge_finished_runs(cutoff, 500) == 0


async def test_an_agents_steps_count_toward_a_batchs_rows(
    store: PostgresStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent may make 10,000 model and 10,000 tool calls in a run of a few events: its steps
    # are rows the batch deletes too.
    plain = (await Harness(store=store, clock=clock).run(workflow(mock("a")))).snapshot
    clock.advance(1)
    agent, _ = await canceled_agent_run(store, clock)  # finished after plain, with a step
    chatty = await store.load_run(agent)
    assert chatty.run.usage.model_calls >= 1
    events = plain.last_sequence + chatty.last_sequence
    monkeypatch.setattr(postgres_retention, "PURGE_ROWS", events)  # both runs' events, no more
    clock.advance(10 * 86400)
    cutoff = clock.now() - timedelta(days=1)
    assert await store.purge_finished_runs(cutoff, 500) == 1  # the agent's step is over it
    assert await store.purge_finished_runs(cutoff, 500) == 1
