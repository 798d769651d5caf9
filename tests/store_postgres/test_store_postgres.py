"""PostgreSQL-specific guarantees: transactions, races, timeouts.

The contract suite (tests/contract) covers the behaviour shared with the in-memory store.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import anyio
import psycopg
import pytest

from workload_domain.compiler import CompiledWorkflow, compile_definition
from workload_domain.errors import (
    RevisionConflict,
    RunNotFound,
    StoreIntegrityError,
    StoreUnavailable,
    WorkflowExists,
)
from workload_domain.events import EventType
from workload_domain.idempotency import IdempotencyClaim, IdempotencyRecord, Outcome, Replayed
from workload_domain.ids import attempt_id, uuid7
from workload_domain.leases import token_digest
from workload_domain.records import (
    AttemptRecord,
    EventRecord,
    NewRun,
    RunCommit,
    RunRecord,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.run_listing import RunFilter
from workload_domain.statuses import AttemptStatus, RunStatus, TaskStatus
from workload_domain.workers import Claim
from workload_store_postgres import _idempotency
from workload_store_postgres.store import PostgresStore

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 3, 1, tzinfo=UTC)
_ids = itertools.count(1)
WORKFLOW = compile_definition(
    {"id": "wf", "tasks": [{"key": f"t{i}", "action": "mock"} for i in range(3)]}
)


def new_run(workflow: CompiledWorkflow = WORKFLOW, at: datetime = T0) -> NewRun:
    run_id = uuid7(int(at.timestamp() * 1000), next(_ids).to_bytes(10, "big"))
    run = RunRecord(run_id, workflow.workflow_id, 1, RunStatus.PENDING, 1, {}, False, at, at)
    tasks = tuple(
        TaskRecord(t.key, i, TaskStatus.PENDING, tuple(t.depends_on), 0, t.retry.max_attempts)
        for i, t in enumerate(workflow.tasks)
    )
    return NewRun(run, tasks, (EventRecord(1, EventType.RUN_CREATED, at),))


def count(url: str, table: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert row is not None
    return int(row[0])


async def test_a_failure_after_the_task_rows_rolls_back_run_and_idempotency_record(
    store: PostgresStore, database_url: str
) -> None:
    # The idempotency record is the last write of the transaction; an outcome its table's
    # CHECK refuses (a status code outside 200-599) fails it after the run, task and event
    # rows were written.
    unstorable = Outcome(700, {"detail": "refused by the CHECK"})
    claim = IdempotencyClaim("op", "key-1", "create_run", "h")
    run = new_run()
    with pytest.raises(StoreIntegrityError):
        await store.create_run(run, IdempotencyRecord(claim, unstorable))
    for table in ("workflow_runs", "task_runs", "state_events", "idempotency_records"):
        assert count(database_url, table) == 0, table
    with pytest.raises(RunNotFound):
        await store.get_run(run.run.run_id)
    assert await store.find_outcome(claim) is None


async def test_concurrent_duplicates_create_exactly_one_run(
    store: PostgresStore, database_url: str
) -> None:
    claim = IdempotencyClaim("op", "same-key", "create_run", "same-request")
    outcomes: list[Outcome] = []

    async def create() -> None:
        run = new_run()
        outcome = Outcome(202, {"run_id": run.run.run_id})
        created = await store.create_run(run, IdempotencyRecord(claim, outcome))
        outcomes.append(created.outcome if isinstance(created, Replayed) else outcome)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(create)
    assert count(database_url, "workflow_runs") == 1
    assert count(database_url, "idempotency_records") == 1
    assert len(outcomes) == 20
    assert len({o.body["run_id"] for o in outcomes}) == 1


async def test_concurrent_creations_of_one_workflow_replay_or_conflict(
    store: PostgresStore,
) -> None:
    """Duplicates race on the workflow's own key: the same key replays, another key is 409."""
    definition = compile_definition({"id": "raced", "tasks": [{"key": "a", "action": "mock"}]})
    version = VersionRecord("raced", 1, definition.definition_hash, 1, T0, definition.document())
    workflow = WorkflowRecord("raced", 1, "", T0, T0)

    async def race(keys: list[str]) -> list[object]:
        answers: list[object] = []

        async def create(key: str) -> None:
            claim = IdempotencyClaim("op", key, "create_workflow", "same-body")
            record = IdempotencyRecord(claim, Outcome(201, {"key": key}))
            try:
                answers.append(await store.create_workflow(workflow, version, record))
            except WorkflowExists as exc:
                answers.append(exc)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for key in keys:
                    tg.start_soon(create, key)
        return answers

    same = await race(["same"] * 20)
    assert sum(isinstance(a, VersionRecord) for a in same) == 1
    # Every loser's whole transaction rolled back and it replays the winner (never a 409).
    assert [a for a in same if not isinstance(a, VersionRecord)] == [
        Replayed(Outcome(201, {"key": "same"}))
    ] * 19
    others = await race([f"other-{i}" for i in range(5)])
    assert all(isinstance(a, WorkflowExists) for a in others)
    names = [w.workflow_id for w in (await store.page_workflows(None, 10)).items]
    assert names.count("raced") == 1


async def test_two_commits_from_the_same_revision_exactly_one_wins(
    store: PostgresStore,
) -> None:
    created = new_run()
    await store.create_run(created)
    snapshot = await store.load_run(created.run.run_id)

    def commit(event: EventType) -> RunCommit:
        return RunCommit(
            expected_revision=1,
            run=replace(snapshot.run, revision=2, status=RunStatus.RUNNING, started_at=T0),
            events=(EventRecord(2, event, T0),),
        )

    results: list[str] = []

    async def attempt(event: EventType) -> None:
        try:
            await store.commit(commit(event))
            results.append(event.value)
        except RevisionConflict:
            results.append("conflict")

    async with anyio.create_task_group() as tg:
        for event in (EventType.RUN_STARTED, EventType.RUN_RECOVERED) * 5:
            tg.start_soon(attempt, event)
    assert sorted(results).count("conflict") == 9
    winner = next(r for r in results if r != "conflict")
    events = await store.list_events(created.run.run_id)
    assert [e.type.value for e in events] == ["run.created", winner]
    assert (await store.get_run(created.run.run_id)).revision == 2


async def test_pagination_returns_every_row_once_under_concurrent_inserts(
    store: PostgresStore,
) -> None:
    first = [new_run(at=T0 + timedelta(seconds=i)) for i in range(9)]
    for run in first:
        await store.create_run(run)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = await store.page_runs(RunFilter(), cursor, 2)
        seen.extend(r.run_id for r, _ in page.items)
        pages += 1
        # Meanwhile, rows keep arriving, before and after the reader's position.
        await store.create_run(new_run(at=T0 + timedelta(seconds=100 + pages)))
        await store.create_run(new_run(at=T0 - timedelta(seconds=pages)))
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(seen) == len(set(seen))
    assert seen[:9] == [r.run.run_id for r in first]
    assert pages >= 5
    assert seen == sorted(seen, key=seen.index)  # keyset order held throughout


async def test_pool_connections_have_a_statement_timeout(database_url: str) -> None:
    async with (
        PostgresStore(database_url, statement_timeout_ms=1234) as store,
        store._db.tx() as conn,
    ):
        row = await (await conn.execute("SHOW statement_timeout")).fetchone()
        assert row is not None
        assert row["statement_timeout"] == "1234ms"
        with pytest.raises(StoreUnavailable):
            async with store._db.tx() as slow:
                await slow.execute("SELECT pg_sleep(5)")


async def test_an_unreachable_server_is_unavailable_not_a_driver_error() -> None:
    store = PostgresStore("postgresql://postgres@/x?host=/nonexistent", pool_timeout_seconds=1)
    with anyio.fail_after(10), pytest.raises(StoreUnavailable):
        await store.open()
    await store.close()


def queue_commit(made: NewRun, at: datetime) -> RunCommit:
    """The commit that starts a new run and queues its one remote task (as a planner would)."""
    run = replace(made.run, status=RunStatus.RUNNING, revision=2, started_at=at, updated_at=at)
    (task,) = made.tasks
    attempt = AttemptRecord(
        task.task_key,
        1,
        AttemptStatus.QUEUED,
        at,
        attempt_id=attempt_id(run.run_id, task.task_key, 1),
        action="resize",
        queue="default",
        heartbeat_timeout_seconds=30,
        timeout_seconds=300,
    )
    return RunCommit(
        1,
        run,
        tasks=(replace(task, status=TaskStatus.RUNNING, attempt_count=1, started_at=at),),
        attempts=(attempt,),
        events=(
            EventRecord(2, EventType.RUN_STARTED, at),
            EventRecord(3, EventType.ATTEMPT_QUEUED, at, task.task_key, 1, {"queue": "default"}),
        ),
    )


async def test_claimers_on_two_pools_never_share_an_attempt(
    store: PostgresStore, database_url: str
) -> None:
    """Two stores (as two API processes would) claim concurrently: each attempt exactly once."""
    remote_definition = {"id": "wf", "tasks": [{"key": "r", "action": "resize"}]}
    compiled = compile_definition(remote_definition)
    now = T0
    await store.create_workflow(
        WorkflowRecord("remote", 1, "", now, now),
        VersionRecord("remote", 1, compiled.definition_hash, 1, now, compiled.document()),
    )
    for i in range(60):
        made = new_run(compile_definition({**remote_definition, "id": "remote"}), at=now)
        await store.create_run(made)
        await store.commit(queue_commit(made, now + timedelta(milliseconds=i)))
    claimed: list[str] = []

    async def claimer(other: PostgresStore, worker: str) -> None:
        while True:
            digests = tuple(token_digest(f"{worker}-{len(claimed)}-{i}") for i in range(3))
            items = await other.claim(Claim(worker, ("default",), ("resize",), 3, digests), now)
            if not items:
                return
            claimed.extend(item.attempt_id for item in items)

    async with PostgresStore(database_url, max_size=4) as second:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for i in range(4):
                    tg.start_soon(claimer, store, f"a{i}")
                    tg.start_soon(claimer, second, f"b{i}")
    assert len(claimed) == len(set(claimed)) == 60
    assert count(database_url, "attempts WHERE status = 'running'") == 60


async def test_the_idempotency_purge_deletes_a_backlog_in_bounded_statements(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A backlog (a day down, then a busy hour) is millions of records: one DELETE of them all
    # ran past the statement timeout, and the process fail-stopped at each start (exit 5).
    monkeypatch.setattr(_idempotency, "PURGE_BATCH", 3)
    for n in range(7):
        claim = IdempotencyClaim("op", f"purged-{n}", "cancel_run", "h")
        assert await store.save_outcome(IdempotencyRecord(claim, Outcome(200, {}))) is None
    batches: list[int] = []
    purge_batch = store._purge_batch

    async def counted(older_than: datetime, limit: int) -> int:
        deleted = await purge_batch(older_than, limit)
        batches.append(deleted)
        return deleted

    monkeypatch.setattr(store, "_purge_batch", counted)
    assert await store.purge_outcomes(datetime.now(UTC) + timedelta(hours=1)) == 7
    assert batches == [3, 3, 1]
    assert await store.find_outcome(IdempotencyClaim("op", "purged-0", "cancel_run", "h")) is None
