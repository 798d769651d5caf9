"""The engine's adapters: mock executor, fake clock and the in-memory store's transactions."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest

from tests.engine.harness import Harness, mock, workflow
from workload_domain.errors import RevisionConflict, RunNotFound, TaskNotFound
from workload_domain.events import EventType
from workload_domain.ids import attempt_id
from workload_domain.records import (
    AttemptRecord,
    EventRecord,
    ExecutorFailure,
    ExecutorRequest,
    ExecutorSuccess,
    RunCommit,
)
from workload_domain.statuses import AttemptStatus, RunStatus
from workload_engine.clock import FakeClock, SystemClock, wait_until_idle
from workload_engine.memory import InMemoryStore, StoreIntegrityError
from workload_engine.mock_executor import MAX_SLEEP_MS, MockExecutor

pytestmark = pytest.mark.anyio


def request(action: str = "mock", attempt: int = 1, **fields: Any) -> ExecutorRequest:
    return ExecutorRequest("r", "t", attempt, action, fields, {})


async def test_mock_executor_behaviours() -> None:
    ex = MockExecutor(FakeClock())
    assert await ex.execute(request(output={"a": [1]})) == ExecutorSuccess({"a": [1]})
    assert await ex.execute(request()) == ExecutorSuccess({})
    first = await ex.execute(request(fail_first=2, attempt=2))
    assert isinstance(first, ExecutorFailure)
    assert (first.error.code, first.error.retryable) == ("mock_failure", True)
    assert await ex.execute(request(fail_first=2, attempt=3)) == ExecutorSuccess({})
    always = await ex.execute(request(fail_always=True, attempt=50))
    assert isinstance(always, ExecutorFailure)
    assert always.error.code == "mock_failure"
    unknown = await ex.execute(request(action="shell", cmd="rm -rf /"))
    assert isinstance(unknown, ExecutorFailure)
    assert (unknown.error.code, unknown.error.retryable) == ("unknown_action", False)


@pytest.mark.parametrize(
    "fields",
    [
        {"sleep_ms": -1},
        {"sleep_ms": "5"},
        {"sleep_ms": True},
        {"sleep_ms": 1.5},
        {"sleep_ms": MAX_SLEEP_MS + 1},
        {"fail_first": -3},
        {"fail_always": 1},
        {"output": []},
        {"command": "ls"},
    ],
)
async def test_mock_executor_rejects_malformed_input(fields: dict[str, Any]) -> None:
    result = await MockExecutor(FakeClock()).execute(request(**fields))
    assert isinstance(result, ExecutorFailure)
    assert (result.error.code, result.error.retryable) == ("invalid_input", False)


async def test_mock_sleep_follows_the_clock_and_is_cancellable() -> None:
    clock = FakeClock()
    ex = MockExecutor(clock)
    results: list[object] = []
    async with anyio.create_task_group() as tg:

        async def call() -> None:
            results.append(await ex.execute(request(sleep_ms=1500)))

        tg.start_soon(call)
        await wait_until_idle()
        clock.advance(1.499)
        await wait_until_idle()
        assert results == []
        clock.advance(0.001)
    assert results == [ExecutorSuccess({})]

    with anyio.move_on_after(5) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ex.execute, request(sleep_ms=MAX_SLEEP_MS))
            await wait_until_idle()
            tg.cancel_scope.cancel()
    assert not scope.cancelled_caught
    assert clock.next_deadline() is None


async def test_fake_clock_wakes_sleepers_in_deadline_order() -> None:
    clock = FakeClock(datetime(2030, 1, 1, tzinfo=UTC))
    woke: list[int] = []
    async with anyio.create_task_group() as tg:
        for seconds in (3, 1, 2):

            async def sleeper(s: int = seconds) -> None:
                await clock.sleep_until(clock.now() + timedelta(seconds=s))
                woke.append(s)

            tg.start_soon(sleeper)
        await wait_until_idle()
        assert clock.next_deadline() == datetime(2030, 1, 1, 0, 0, 1, tzinfo=UTC)
        clock.advance(2)
        await wait_until_idle()
        assert woke == [1, 2]
        clock.advance(1)
    assert woke == [1, 2, 3]
    assert clock.now() == datetime(2030, 1, 1, 0, 0, 3, tzinfo=UTC)
    assert clock.next_deadline() is None
    clock.advance_to(datetime(2029, 1, 1, tzinfo=UTC))  # never backwards
    assert clock.now() == datetime(2030, 1, 1, 0, 0, 3, tzinfo=UTC)


async def test_autojump_moves_time_to_each_deadline_only_when_idle() -> None:
    clock = FakeClock()
    start = clock.now()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(clock.autojump)
            await clock.sleep_until(start + timedelta(hours=5))
            assert clock.now() == start + timedelta(hours=5)
            await clock.sleep_until(start + timedelta(hours=6))
            tg.cancel_scope.cancel()
    assert clock.now() == start + timedelta(hours=6)


async def test_system_clock_is_utc_and_sleeps_until_the_deadline() -> None:
    clock = SystemClock()
    start = clock.now()
    assert start.tzinfo is UTC
    await clock.sleep_until(start + timedelta(milliseconds=20))
    assert clock.now() >= start + timedelta(milliseconds=20)
    await clock.sleep_until(start)  # already past: returns at once


async def test_fake_clock_cancels_a_block_when_time_reaches_its_deadline() -> None:
    clock = FakeClock(datetime(2030, 1, 1, tzinfo=UTC))
    deadline = clock.now() + timedelta(seconds=10)
    reached: list[str] = []
    async with anyio.create_task_group() as tg:

        async def bounded() -> None:
            with clock.cancel_at(deadline) as block:
                await anyio.sleep_forever()
            reached.append(f"after, expired={block.expired}")

        tg.start_soon(bounded)
        await wait_until_idle()
        assert clock.next_deadline() == deadline
        clock.advance(9)
        await wait_until_idle()
        assert reached == []
        clock.advance(1)
    assert reached == ["after, expired=True"]
    assert clock.next_deadline() is None


async def test_fake_clock_block_that_ends_in_time_is_not_expired_and_leaves_no_deadline() -> None:
    clock = FakeClock()
    with clock.cancel_at(clock.now() + timedelta(seconds=5)) as block:
        await anyio.lowlevel.checkpoint()
    assert not block.expired
    assert clock.next_deadline() is None  # autojump will not move time to it
    clock.advance(10)  # its deadline passes after the block: nothing to cancel
    assert not block.expired


async def test_a_passed_deadline_cancels_the_block_at_its_first_wait() -> None:
    for clock in (FakeClock(), SystemClock()):
        with clock.cancel_at(clock.now() - timedelta(seconds=1)) as block:
            await anyio.lowlevel.checkpoint()
            pytest.fail("not cancelled")  # pragma: no cover - the checkpoint raises
        assert block.expired


async def test_an_outer_cancellation_goes_through_a_block_and_is_not_its_expiry() -> None:
    clock = FakeClock()
    with anyio.CancelScope() as outer:
        with clock.cancel_at(clock.now() + timedelta(seconds=5)) as block:
            outer.cancel()
            await anyio.lowlevel.checkpoint()
    assert outer.cancelled_caught
    assert not block.expired


async def test_system_clock_cancels_a_block_at_its_deadline() -> None:
    clock = SystemClock()
    start = clock.now()
    with clock.cancel_at(start + timedelta(milliseconds=20)) as block:
        await anyio.sleep(30)
    assert block.expired
    assert clock.now() >= start + timedelta(milliseconds=20)
    with clock.cancel_at(clock.now() + timedelta(seconds=30)) as block:
        await anyio.lowlevel.checkpoint()
    assert not block.expired


async def _created(store: InMemoryStore) -> str:
    h = Harness(store=store)
    return await h.create(workflow(mock("a"), mock("b", ["a"])))


async def test_store_commit_from_a_stale_revision_changes_nothing() -> None:
    store = InMemoryStore()
    run_id = await _created(store)
    snapshot = await store.load_run(run_id)
    now = snapshot.run.created_at
    first = RunCommit(
        expected_revision=1,
        run=replace(snapshot.run, revision=2, status=RunStatus.RUNNING, started_at=now),
        events=(EventRecord(2, EventType.RUN_STARTED, now),),
    )
    stale = replace(
        first,
        run=replace(first.run, status=RunStatus.CANCELED),
        events=(EventRecord(2, EventType.RUN_CANCELED, now),),
    )
    await store.commit(first)
    before = (await store.get_run(run_id), await store.list_events(run_id))
    with pytest.raises(RevisionConflict):
        await store.commit(stale)
    assert (await store.get_run(run_id), await store.list_events(run_id)) == before


async def test_store_commit_is_all_or_nothing() -> None:
    store = InMemoryStore()
    run_id = await _created(store)
    snapshot = await store.load_run(run_id)
    now = snapshot.run.created_at
    attempt = AttemptRecord(
        "a", 1, AttemptStatus.RUNNING, now, attempt_id=attempt_id(run_id, "a", 1), action="mock"
    )
    bad_sequence = RunCommit(
        expected_revision=1,
        run=replace(snapshot.run, revision=2),
        tasks=(replace(snapshot.tasks[0], attempt_count=1),),
        attempts=(attempt,),
        events=(EventRecord(5, EventType.ATTEMPT_STARTED, now, "a", 1),),
    )
    with pytest.raises(StoreIntegrityError):
        await store.commit(bad_sequence)
    unknown_task = replace(
        bad_sequence,
        attempts=(replace(attempt, task_key="zzz"),),
        events=(EventRecord(2, EventType.ATTEMPT_STARTED, now, "a", 1),),
    )
    with pytest.raises(StoreIntegrityError):
        await store.commit(unknown_task)
    with pytest.raises(StoreIntegrityError):
        await store.commit(replace(bad_sequence, run=replace(snapshot.run, revision=3)))
    assert await store.load_run(run_id) == snapshot
    assert await store.list_attempts(run_id, "a") == []


async def test_store_returns_copies_so_callers_cannot_alias_state() -> None:
    store = InMemoryStore()
    h = Harness(store=store)
    run_id = await h.create(workflow(mock("a")), {"nested": {"k": 1}})
    run = await store.get_run(run_id)
    run.input["nested"]["k"] = 2
    assert (await store.get_run(run_id)).input == {"nested": {"k": 1}}


async def test_store_reads_of_missing_things_raise_not_found() -> None:
    store = InMemoryStore()
    run_id = await _created(store)
    with pytest.raises(RunNotFound):
        await store.load_run("nope")
    with pytest.raises(RunNotFound):
        await store.list_events("nope")
    with pytest.raises(TaskNotFound):
        await store.list_attempts(run_id, "zzz")
    events = await store.list_events(run_id, after_sequence=0, limit=1)
    assert [e.type for e in events] == [EventType.RUN_CREATED]
    assert await store.list_events(run_id, after_sequence=1) == []
