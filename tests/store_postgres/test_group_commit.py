"""Group commit: transitions of runners ready at once share one transaction, each on its own terms.

See ``workload_store_postgres._group_commit``. The runs here are committed concurrently, as the
runners of one process commit them; what is asserted is what each runner is told and what the
database holds afterwards, row by row.
"""

from __future__ import annotations

import asyncio
import contextvars
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from tests.store_postgres.test_shards import joined
from tests.store_postgres.test_store_postgres import T0, WORKFLOW, new_run
from workload_domain.errors import Fenced, RevisionConflict, StoreIntegrityError
from workload_domain.events import EventType
from workload_domain.fencing import fenced
from workload_domain.records import (
    EventRecord,
    NewRun,
    RunCommit,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.shards import DEFAULT_SHARDS, shard_of
from workload_domain.statuses import RunStatus
from workload_domain.telemetry import NoTelemetry
from workload_store_postgres._db import Database
from workload_store_postgres._group_commit import GroupCommit
from workload_store_postgres.shard_leases import PostgresShardLeases
from workload_store_postgres.store import PostgresStore

pytestmark = pytest.mark.anyio

RUNS = 12


def started(
    made: NewRun, *, expected: int = 1, output: dict[str, object] | None = None
) -> RunCommit:
    """The transition of ``made`` from pending to running (or to succeeded with ``output``)."""
    status = RunStatus.RUNNING if output is None else RunStatus.SUCCEEDED
    return RunCommit(
        expected_revision=expected,
        run=replace(made.run, revision=expected + 1, status=status, started_at=T0, output=output),
        events=(EventRecord(2, EventType.RUN_STARTED, T0),),
    )


async def created(store: PostgresStore, n: int = RUNS) -> list[NewRun]:
    runs = [new_run() for _ in range(n)]
    for made in runs:
        await store.create_run(made)
    return runs


async def commit_all(
    store: PostgresStore, commits: list[RunCommit]
) -> dict[str, BaseException | None]:
    """Commit every transition concurrently; what each committer was told, by run id."""
    told: dict[str, BaseException | None] = {}

    async def one(commit: RunCommit) -> None:
        try:
            await store.commit(commit)
            told[commit.run.run_id] = None
        except Exception as error:
            told[commit.run.run_id] = error

    with anyio.fail_after(60):  # a hang guard, not a speed check
        async with anyio.create_task_group() as tg:
            for commit in commits:
                tg.start_soon(one, commit)
    return told


async def test_concurrent_transitions_are_written_in_fewer_transactions(
    store: PostgresStore,
) -> None:
    runs = await created(store)
    groups_before = store._commits.groups
    told = await commit_all(store, [started(made) for made in runs])
    assert told == {made.run.run_id: None for made in runs}
    for made in runs:
        stored = await store.get_run(made.run.run_id)
        assert (stored.revision, stored.status) == (2, RunStatus.RUNNING)
        events = await store.list_events(made.run.run_id)
        assert [e.type for e in events] == [EventType.RUN_CREATED, EventType.RUN_STARTED]
    groups = store._commits.groups - groups_before
    # The first commit goes alone at once; those made while it is written go together.
    assert 2 <= groups < RUNS


async def test_a_stale_row_is_refused_to_its_runner_only(store: PostgresStore) -> None:
    runs = await created(store)
    stale = runs[RUNS // 2]
    commits = [started(made, expected=5 if made is stale else 1) for made in runs]
    told = await commit_all(store, commits)
    assert isinstance(told.pop(stale.run.run_id), RevisionConflict)
    assert told == {made.run.run_id: None for made in runs if made is not stale}
    assert (await store.get_run(stale.run.run_id)).revision == 1
    for made in runs:
        if made is not stale:
            assert (await store.get_run(made.run.run_id)).status is RunStatus.RUNNING


async def test_a_row_for_a_missing_task_is_refused_to_its_runner_only(
    store: PostgresStore,
) -> None:
    runs = await created(store)
    odd = runs[3]
    ghost = TaskRecord("nope", 9, WORKFLOW_TASK.status, (), 0, 1)
    commits = [
        replace(started(made), tasks=(ghost,)) if made is odd else started(made) for made in runs
    ]
    told = await commit_all(store, commits)
    assert isinstance(told.pop(odd.run.run_id), StoreIntegrityError)
    assert told == {made.run.run_id: None for made in runs if made is not odd}
    assert (await store.get_run(odd.run.run_id)).revision == 1


async def test_a_statement_that_fails_rolls_back_its_group_and_the_others_commit_alone(
    store: PostgresStore,
) -> None:
    """A value PostgreSQL refuses fails the whole group's transaction; each then goes alone."""
    runs = await created(store)
    bad = runs[-1]
    # JSONB cannot hold \\u0000: the statement fails in PostgreSQL, not in a check before it.
    commits = [
        started(made, output={"x": "a\x00b"}) if made is bad else started(made) for made in runs
    ]
    told = await commit_all(store, commits)
    error = told.pop(bad.run.run_id)
    assert error is not None
    assert not isinstance(error, RevisionConflict)
    assert told == {made.run.run_id: None for made in runs if made is not bad}
    assert (await store.get_run(bad.run.run_id)).revision == 1
    for made in runs:
        if made is not bad:
            assert (await store.get_run(made.run.run_id)).revision == 2


class _StopsTheNextLeader(GroupCommit):
    """Stops the runner about to be told to write the next group: told while stopping."""

    def __init__(self, db: Database, scopes: dict[str, anyio.CancelScope], run_id: str) -> None:
        super().__init__(db)
        self._scopes = scopes
        self._run_id = run_id

    def _hand_on(self) -> None:
        if self._queue and str(self._queue[0].run_id) == self._run_id:
            self._scopes[self._run_id].cancel()  # delivered now: it is waiting
        super()._hand_on()


@pytest.mark.parametrize("when", ["waiting", "told to lead"])
async def test_a_runner_stopped_in_the_queue_is_not_written_and_the_queue_goes_on(
    store: PostgresStore, when: str
) -> None:
    runs = await created(store, 5)
    told: dict[str, str] = {}
    stopped = runs[1].run.run_id  # the first to queue behind the first group: the next leader
    scopes: dict[str, anyio.CancelScope] = {}
    if when == "told to lead":
        store._commits = _StopsTheNextLeader(store._db, scopes, stopped)

    async def one(commit: RunCommit) -> None:
        with anyio.CancelScope() as scope:
            scopes[commit.run.run_id] = scope
            await store.commit(commit)
            told[commit.run.run_id] = "written"
            return
        told[commit.run.run_id] = "stopped"

    with anyio.fail_after(60):  # a hang guard, not a speed check
        async with anyio.create_task_group() as tg:
            for made in runs:
                tg.start_soon(one, started(made))
            if when == "waiting":
                # Every task runs up to its first wait: the first is writing, the others queue.
                while len(store._commits._queue) < len(runs) - 1:
                    await anyio.lowlevel.checkpoint()
                scopes[stopped].cancel()
    assert told.pop(stopped) == "stopped"
    assert told == {made.run.run_id: "written" for made in runs if made.run.run_id != stopped}
    assert (await store.get_run(stopped)).revision == 1
    for made in runs:
        if made.run.run_id != stopped:
            assert (await store.get_run(made.run.run_id)).revision == 2


async def test_a_row_of_a_stale_shard_epoch_is_refused_to_its_runner_only(
    store: PostgresStore, database_url: str, leases: list[PostgresShardLeases]
) -> None:
    """Each row carries its own writer's shard fence; a stale one fails alone (SPEC §16)."""
    a, b = await joined(database_url, leases, "a", "b")
    told_fenced: list[Fenced] = []
    store.fence(None, told_fenced.append)
    runs = await created(store)
    stale_run = runs[2]
    shard = shard_of(stale_run.run.run_id, DEFAULT_SHARDS)
    old = await a.take(shard)
    assert old is not None
    await a.give(old)
    assert await b.take(shard) is not None  # the shard moved on: ``old`` is stale
    told: dict[str, BaseException | None] = {}

    async def one(made: NewRun) -> None:
        try:
            with fenced(old if made is stale_run else None):
                await store.commit(started(made))
            told[made.run.run_id] = None
        except Exception as error:
            told[made.run.run_id] = error

    with anyio.fail_after(60):  # a hang guard, not a speed check
        async with anyio.create_task_group() as tg:
            for made in runs:
                tg.start_soon(one, made)
    assert isinstance(told.pop(stale_run.run.run_id), Fenced)
    assert told == {made.run.run_id: None for made in runs if made is not stale_run}
    assert [(e.shard, e.epoch) for e in told_fenced] == [(shard, old.epoch)]
    assert (await store.get_run(stale_run.run.run_id)).revision == 1


_RUN: contextvars.ContextVar[str] = contextvars.ContextVar("run_committing", default="none")


class _StatementsSeen(NoTelemetry):
    """Traces: records each statement with the run whose runner's context it was made in."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    @property
    def tracing(self) -> bool:
        return True

    def traces_statements(self) -> bool:
        return True

    def statement(self, name: str, sql: str) -> AbstractContextManager[object]:
        self.seen.append((name, _RUN.get()))
        return super().statement(name, sql)


async def test_a_traced_statement_of_a_group_is_made_in_its_runners_context(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group is sent by one runner, but each statement's span is its own run's (SPEC §12)."""
    telemetry = _StatementsSeen()
    async with PostgresStore(database_url, telemetry=telemetry) as traced:
        await traced.create_workflow(
            WorkflowRecord("wf", 1, "", T0, T0),
            VersionRecord("wf", 1, WORKFLOW.definition_hash, 3, T0, WORKFLOW.document()),
        )
        runs = await created(traced)

        async def one(made: NewRun) -> None:
            _RUN.set(made.run.run_id)  # this task's context, as a runner's run span would be
            await traced.commit(started(made))

        # The group's statements are sent by its writer itself, not by a task each in its
        # runner's context: such tasks cost the group a turn of the event loop a statement.
        loop = asyncio.get_running_loop()
        tasks: list[str] = []
        create_task = loop.create_task

        def recorded(coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
            tasks.append(getattr(coro, "__qualname__", ""))
            return create_task(coro, **kwargs)

        monkeypatch.setattr(loop, "create_task", recorded)
        telemetry.seen.clear()
        with anyio.fail_after(60):  # a hang guard, not a speed check
            async with anyio.create_task_group() as tg:
                for made in runs:
                    tg.start_soon(one, made)
        assert traced._commits.groups < RUNS  # some were written together
        monkeypatch.undo()
    commits = [run for name, run in telemetry.seen if name == "commit_run"]
    assert sorted(commits) == sorted(made.run.run_id for made in runs)
    assert len(tasks) >= RUNS  # the runners' own tasks were seen
    assert [name for name in tasks if "execute" in name] == []


WORKFLOW_TASK = new_run(WORKFLOW).tasks[0]
