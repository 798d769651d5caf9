"""Cancellation, interruption, recovery and revision conflicts (SPEC §4)."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from tests.engine.harness import CrashAfter, CrashingStore, Harness, mock, no_running_left, workflow
from workload_domain.errors import (
    PreconditionFailed,
    RevisionConflict,
    RunFinished,
    RunNotFound,
    StoreUnavailable,
)
from workload_domain.idempotency import IdempotencyClaim, IdempotencyRecord, Outcome, Replayed
from workload_domain.records import RunCommit
from workload_domain.statuses import RunStatus
from workload_engine.clock import wait_until_idle
from workload_engine.memory import InMemoryStore
from workload_engine.runs import CancelResult, request_cancel

pytestmark = pytest.mark.anyio

CHAIN = workflow(
    mock("a", sleep_ms=1000),
    mock(
        "b",
        ["a"],
        sleep_ms=1000,
        fail_first=1,
        retry={"max_attempts": 3, "initial_backoff_seconds": 1},
    ),
    mock("c", ["a"], sleep_ms=500, retry={"max_attempts": 2}),
    mock("d", ["b", "c"], sleep_ms=1000),
)


async def test_cancel_of_a_pending_run_cancels_it_at_once() -> None:
    h = Harness()
    run_id = await h.create(CHAIN)
    result = await request_cancel(h.store, h.clock, run_id)
    assert not result.already_canceled
    view = await h.view(run_id)
    assert view.status == "canceled"
    assert view.snapshot.run.cancel_requested
    assert set(view.task_statuses().values()) == {"canceled"}
    assert view.event_types() == [
        "run.created",
        "run.cancel_requested",
        "task.canceled",
        "task.canceled",
        "task.canceled",
        "task.canceled",
        "run.canceled",
    ]
    # Executing a canceled run does nothing; canceling again is a no-op.
    assert (await h.engine.execute(run_id)).run.status is RunStatus.CANCELED
    again = await request_cancel(h.store, h.clock, run_id)
    assert again.already_canceled
    assert (await h.view(run_id)).snapshot.run.revision == view.snapshot.run.revision


async def test_cancel_of_a_running_run_converges_to_canceled() -> None:
    h = Harness()
    run_id = await h.create(CHAIN)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.engine.run)
        await wait_until_idle()
        h.engine.submit(run_id)
        await wait_until_idle()
        h.clock.advance(1.2)  # a done; b (attempt 1) and c running
        await wait_until_idle()
        assert (await h.view(run_id)).task_statuses()["b"] == "running"
        result = await request_cancel(h.store, h.clock, run_id)
        assert result.run.cancel_requested
        assert result.run.status is RunStatus.RUNNING
        h.engine.notify(run_id)
        with anyio.fail_after(5):
            await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()

    view = await h.view(run_id)
    assert view.status == "canceled"
    assert view.task_statuses() == {
        "a": "succeeded",
        "b": "canceled",
        "c": "canceled",
        "d": "canceled",
    }
    assert view.attempt_statuses("b") == ["canceled"]
    assert view.attempt_statuses("c") == ["canceled"]
    assert no_running_left(view)
    assert "task.skipped" not in view.event_types()
    assert view.event_types()[-1] == "run.canceled"


async def test_a_runner_reads_its_run_again_when_announcements_may_have_been_missed() -> None:
    h = Harness()
    run_id = await h.create(CHAIN)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.engine.run)
        await wait_until_idle()
        h.engine.submit(run_id)
        await wait_until_idle()
        with h.engine.work_signal.listen(["default"], ["echo"]) as claim:
            waiting = claim.waiter()
            # Canceled through another process while this one's listener reconnected: the
            # announcement is lost, and the runner, busy with "a", does not know.
            await request_cancel(h.store, h.clock, run_id)
            await wait_until_idle()
            assert (await h.view(run_id)).task_statuses()["a"] == "running"
            assert not waiting.is_set()
            h.engine.look_again()  # the listener listens again
            assert waiting.is_set()  # a waiting claim looks for work again too
        with anyio.fail_after(5):
            await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    view = await h.view(run_id)
    assert view.status == "canceled"
    assert view.attempt_statuses("a") == ["canceled"]
    assert no_running_left(view)


async def test_cancel_of_a_finished_run_is_refused() -> None:
    h = Harness()
    run_id = await h.create(workflow(mock("x")))
    await h.execute(run_id)
    with pytest.raises(RunFinished) as caught:
        await request_cancel(h.store, h.clock, run_id)
    assert caught.value.code == "run_finished"
    with pytest.raises(RunNotFound):
        await request_cancel(h.store, h.clock, "missing")


async def test_cancel_with_a_stale_revision_is_a_failed_precondition() -> None:
    h = Harness()
    run_id = await h.create(CHAIN)
    before = await h.store.get_run(run_id)
    with pytest.raises(PreconditionFailed):
        await request_cancel(h.store, h.clock, run_id, if_revision=before.revision + 1)
    assert await h.store.get_run(run_id) == before
    result = await request_cancel(h.store, h.clock, run_id, if_revision=before.revision)
    assert result.run.status is RunStatus.CANCELED


async def test_cancel_given_several_revisions_needs_the_run_at_one_of_them() -> None:
    h = Harness()
    run_id = await h.create(CHAIN)
    before = await h.store.get_run(run_id)
    others = {before.revision - 1, before.revision + 1}
    with pytest.raises(PreconditionFailed) as refused:
        await request_cancel(h.store, h.clock, run_id, if_revision=others)
    assert f"not {before.revision - 1} or {before.revision + 1}" in str(refused.value)
    assert await h.store.get_run(run_id) == before
    result = await request_cancel(h.store, h.clock, run_id, if_revision={*others, before.revision})
    assert result.run.status is RunStatus.CANCELED


async def test_interruption_writes_nothing_as_canceled_and_resume_completes() -> None:
    h = Harness()
    run_id = await h.create(CHAIN)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.engine.run)
        await wait_until_idle()
        h.engine.submit(run_id)
        await wait_until_idle()
        h.clock.advance(1.2)
        await wait_until_idle()
        tg.cancel_scope.cancel()  # shutdown: interruption, not cancellation

    interrupted = await h.view(run_id)
    assert interrupted.status == "running"
    assert "canceled" not in interrupted.all_statuses()
    assert not any("cancel" in t for t in interrupted.event_types())
    assert interrupted.attempt_statuses("b") == ["running"]

    resumed = await h.restarted().execute(run_id)
    assert resumed.status == "succeeded"
    assert "canceled" not in resumed.all_statuses()
    # The interrupted attempt counts: b had fail_first=1, so attempt 2 succeeds.
    assert resumed.attempt_statuses("b") == ["interrupted", "succeeded"]
    assert resumed.attempt_statuses("c") == ["interrupted", "succeeded"]
    interrupted_errors = [a.error for a in resumed.attempts["b"] if a.status.value == "interrupted"]
    assert interrupted_errors[0] is not None
    assert (interrupted_errors[0].code, interrupted_errors[0].retryable) == ("interrupted", True)
    recovered = [e for e in resumed.events if e.type == "run.recovered"]
    assert len(recovered) == 1
    assert recovered[0].data == {"interrupted_attempts": 2}


async def test_interrupted_attempt_without_attempts_left_fails_the_task() -> None:
    h = Harness()
    run_id = await h.create(workflow(mock("only", sleep_ms=1000), mock("next", ["only"])))
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.engine.execute, run_id)
        await wait_until_idle()
        tg.cancel_scope.cancel()
    view = await h.restarted().execute(run_id)
    assert view.status == "failed"
    assert view.task_statuses() == {"only": "failed", "next": "skipped"}
    assert view.attempt_statuses("only") == ["interrupted"]


def _final(view_statuses: dict[str, str], attempts: dict[str, list[str]]) -> tuple[object, ...]:
    return (
        tuple(sorted(view_statuses.items())),
        tuple(sorted((k, len(v)) for k, v in attempts.items())),
    )


RECOVERY = workflow(
    mock("a", sleep_ms=100, retry={"max_attempts": 6}),
    mock(
        "b",
        ["a"],
        sleep_ms=300,
        fail_first=1,
        retry={"max_attempts": 6, "initial_backoff_seconds": 1},
    ),
    mock("c", ["a"], sleep_ms=200, retry={"max_attempts": 6, "initial_backoff_seconds": 0}),
    mock("d", ["b", "c"], sleep_ms=100, retry={"max_attempts": 6}),
    mock("e", fail_always=True, retry={"max_attempts": 2, "initial_backoff_seconds": 2}),
    mock("f", ["e"]),
)


async def test_resume_after_a_crash_at_every_commit_point_converges() -> None:
    baseline = await Harness().run(RECOVERY)
    assert baseline.status == "failed"
    expected_tasks = baseline.task_statuses()
    total_commits = baseline.snapshot.run.revision - 1  # revision 1 is the creation

    for crash_after in range(1, total_commits + 1):
        store = CrashingStore()
        h = Harness(store=store)
        run_id = await h.create(RECOVERY)
        store.crash_after = store.commits + crash_after
        with pytest.raises(CrashAfter):
            await h.execute(run_id)
        crashed = await h.view(run_id)
        view = await h.restarted().execute(run_id)
        assert view.status == "failed", crash_after
        assert view.task_statuses() == expected_tasks, crash_after
        assert "canceled" not in view.all_statuses(), crash_after
        assert no_running_left(view)
        for key, attempts in view.attempts.items():
            assert len(attempts) <= view.tasks[key].max_attempts
            assert [a.attempt for a in attempts] == list(range(1, len(attempts) + 1))
            assert view.tasks[key].attempt_count == len(attempts)
        assert [e.sequence for e in view.events] == list(range(1, len(view.events) + 1))
        # Every interrupted attempt is visible and was followed by the retry rule.
        interrupted = sum(view.attempt_statuses(k).count("interrupted") for k in view.attempts)
        recovered = [e for e in view.events if e.type == "run.recovered"]
        if crashed.snapshot.run.status.is_terminal:
            assert recovered == []
            assert view.events == crashed.events
        else:
            assert len(recovered) == 1
            assert recovered[0].data == {"interrupted_attempts": interrupted}


async def test_a_stale_commit_is_rejected_and_the_runner_reconciles() -> None:
    class Spying(InMemoryStore):
        conflicts = 0

        async def commit(
            self, commit: RunCommit, idempotency: IdempotencyRecord | None = None
        ) -> Replayed | None:
            try:
                return await super().commit(commit, idempotency)
            except RevisionConflict:
                Spying.conflicts += 1
                raise

    store = Spying()
    h = Harness(store=store)
    run_id = await h.create(workflow(mock("a", sleep_ms=1000), mock("b", ["a"], sleep_ms=1000)))
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.engine.run)
        await wait_until_idle()
        h.engine.submit(run_id)
        await wait_until_idle()
        # Another writer records a cancel request; the runner is not told.
        await request_cancel(h.store, h.clock, run_id)
        before = await h.store.get_run(run_id)
        h.clock.advance(1)  # a finishes: the runner commits from a stale revision
        with anyio.fail_after(5):
            await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()

    assert Spying.conflicts == 1
    view = await h.view(run_id)
    # The stale commit changed nothing; the re-read saw the request and converged: the cancel,
    # committed while a was running, cancels it (SPEC §4) — its late success is not recorded,
    # so no run ends canceled with every task succeeded.
    assert view.snapshot.run.revision == before.revision + 1
    assert view.status == "canceled"
    assert view.task_statuses() == {"a": "canceled", "b": "canceled"}
    assert view.attempt_statuses("a") == ["canceled"]
    assert "attempt.succeeded" not in view.event_types()
    assert [e.sequence for e in view.events] == list(range(1, len(view.events) + 1))


async def test_a_store_fault_stops_execution_and_is_never_recorded() -> None:
    class Failing(InMemoryStore):
        fail = False

        async def commit(
            self, commit: RunCommit, idempotency: IdempotencyRecord | None = None
        ) -> Replayed | None:
            if self.fail:
                raise StoreUnavailable("the database went away")
            return await super().commit(commit, idempotency)

    store = Failing()
    h = Harness(store=store)
    run_id = await h.create(workflow(mock("a", sleep_ms=1000), mock("b", ["a"])))

    async def serve() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.engine.run)
            await wait_until_idle()
            h.engine.submit(run_id)
            await wait_until_idle()
            store.fail = True
            h.clock.advance(1)
            await anyio.sleep_forever()

    with pytest.RaisesGroup(StoreUnavailable):
        await serve()
    view = await h.view(run_id)
    assert view.status == "running"
    assert view.attempt_statuses("a") == ["running"]
    assert "failed" not in view.all_statuses()
    assert "canceled" not in view.all_statuses()
    store.fail = False
    assert (await h.restarted().execute(run_id)).status == "failed"  # a: 1 attempt, interrupted


async def test_recover_hands_every_unfinished_run_to_the_engine() -> None:
    h = Harness()
    unfinished = [await h.create(workflow(mock("x", sleep_ms=10))) for _ in range(7)]
    done = await h.create(workflow(mock("x")))
    await h.execute(done)
    assert await h.store.list_unfinished_runs(None, 100) == sorted(unfinished)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.clock.autojump)
        await tg.start(h.engine.run)
        assert await h.engine.recover(page_size=3) == 7
        with anyio.fail_after(5):
            for run_id in unfinished:
                await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    for run_id in unfinished:
        assert (await h.view(run_id)).status == "succeeded"


async def test_cancel_with_an_idempotency_claim_saves_and_replays_its_outcome() -> None:
    h = Harness()
    running = await h.create(CHAIN)
    pending = await h.create(CHAIN)
    claim = IdempotencyClaim("op", "cancel-key", "cancel_run", "hash")

    def saving(key: IdempotencyClaim) -> Callable[[CancelResult], IdempotencyRecord]:
        def save_with(result: CancelResult) -> IdempotencyRecord:
            status = 200 if result.already_canceled else 202
            return IdempotencyRecord(key, Outcome(status, {"status": result.run.status.value}))

        return save_with

    result = await request_cancel(h.store, h.clock, pending, save_with=saving(claim))
    assert isinstance(result, CancelResult)
    assert result.run.status is RunStatus.CANCELED
    assert await h.store.find_outcome(claim) == Outcome(202, {"status": "canceled"})
    replayed = await request_cancel(h.store, h.clock, running, save_with=saving(claim))
    assert replayed == Replayed(Outcome(202, {"status": "canceled"}))
    assert not (await h.store.get_run(running)).cancel_requested
    # A cancel that writes nothing (already canceled) still records its outcome.
    other = IdempotencyClaim("op", "cancel-again", "cancel_run", "hash")
    again = await request_cancel(h.store, h.clock, pending, save_with=saving(other))
    assert isinstance(again, CancelResult)
    assert again.already_canceled
    assert await h.store.find_outcome(other) == Outcome(200, {"status": "canceled"})


async def test_cancel_while_a_task_waits_to_retry_clears_its_retry_time() -> None:
    h = Harness()
    run_id = await h.create(
        workflow(
            mock("t", fail_always=True, retry={"max_attempts": 3, "initial_backoff_seconds": 60})
        )
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.engine.run)
        await wait_until_idle()
        h.engine.submit(run_id)
        await wait_until_idle()
        waiting = await h.view(run_id)
        assert waiting.status == "waiting_retry"
        assert waiting.tasks["t"].next_attempt_at is not None
        await request_cancel(h.store, h.clock, run_id)
        h.engine.notify(run_id)
        with anyio.fail_after(5):
            await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    view = await h.view(run_id)
    assert view.status == "canceled"
    assert view.tasks["t"].status.value == "canceled"
    assert view.tasks["t"].next_attempt_at is None
    assert view.attempt_statuses("t") == ["failed"]


async def test_recover_marks_leftover_attempts_interrupted_before_it_returns() -> None:
    h = Harness()
    busy = await h.create(workflow(mock("a", sleep_ms=1000, retry={"max_attempts": 2})))
    idle = [await h.create(workflow(mock("a"))) for _ in range(3)]
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.engine.execute, busy)
        await wait_until_idle()
        tg.cancel_scope.cancel()  # a stop while attempt 1 of "a" runs
    assert await h.store.runs_with_running_attempts({"mock"}) == [busy]

    restarted = h.restarted()
    async with anyio.create_task_group() as tg:
        await tg.start(restarted.engine.run)
        assert await restarted.engine.recover() == 4
        # Returned: the leftover is already interrupted, whatever else is still starting.
        assert await h.store.runs_with_running_attempts({"mock"}) == []
        view = await h.view(busy)
        assert view.attempt_statuses("a")[0] == "interrupted"
        tg.start_soon(h.clock.autojump)
        with anyio.fail_after(5):
            for run_id in [busy, *idle]:
                await restarted.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    assert (await h.view(busy)).status == "succeeded"
