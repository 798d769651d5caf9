"""Run retention (SPEC §5, amended 2026-12-01) on both stores: what a purge deletes and keeps.

Terminal runs finished before the cut-off go with every row they own (tasks, attempts, events,
agent steps, approvals), oldest first, at most a batch per call; newer terminal runs and every
unfinished run, however old, stay whole.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from tests.contract.runs import start_first_attempt
from tests.contract.test_journal_contract import AGENT, LOCAL, agent_run, model_step
from tests.engine.harness import Harness, mock, workflow
from workload_domain.approvals import ApprovalRecord, ApprovalStatus, approval_id, arguments_digest
from workload_domain.compiler import compile_definition
from workload_domain.errors import RunNotFound
from workload_domain.ports import Store
from workload_domain.records import RunCommit
from workload_domain.run_listing import RunFilter
from workload_domain.statuses import RunStatus
from workload_engine.cancellation import cancel_commit
from workload_engine.clock import FakeClock
from workload_engine.planner import plan

pytestmark = pytest.mark.anyio


async def canceled_agent_run(store: Store, clock: FakeClock) -> tuple[str, str]:
    """A canceled run whose agent attempt has a step and an approval; and the approval's id."""
    run_id = await agent_run(store, clock)
    assert await store.begin_step(model_step(run_id, 1, clock)) is not None
    snapshot = await store.load_run(run_id)
    approval = ApprovalRecord(
        approval_id(run_id, "a", 1, 1, 0),
        run_id,
        "a",
        1,
        "search",
        "call_1",
        {"q": "x"},
        arguments_digest({"q": "x"}),
        ApprovalStatus.PENDING,
        clock.now(),
        clock.now() + timedelta(hours=1),
    )
    run = replace(snapshot.run, revision=snapshot.run.revision + 1)
    await store.commit(RunCommit(snapshot.run.revision, run, approvals=(approval,)))
    commit, _ = cancel_commit(await store.load_run(run_id), now=clock.now(), local_actions=LOCAL)
    await store.commit(commit)
    decided = plan(
        await store.load_run(run_id),
        compile_definition({"id": "wf", "tasks": [AGENT]}),
        now=clock.now(),
        executing=(),
        local_actions=LOCAL,
    )
    if decided.commit is not None:
        await store.commit(decided.commit)
    assert (await store.get_run(run_id)).status is RunStatus.CANCELED
    return run_id, approval.approval_id


async def assert_whole(store: Store, run_id: str) -> None:
    """The run and its rows are all still there."""
    await store.get_run(run_id)
    assert await store.list_tasks(run_id)
    assert await store.list_events(run_id)


async def assert_gone(store: Store, run_id: str) -> None:
    for read in (store.get_run, store.list_tasks, store.list_events, store.load_run):
        with pytest.raises(RunNotFound):
            await read(run_id)
    assert all(
        run.run_id != run_id for run, _ in (await store.page_runs(RunFilter(), None, 200)).items
    )


async def test_a_purge_deletes_old_finished_runs_whole_and_keeps_the_rest(
    store: Store, clock: FakeClock
) -> None:
    h = Harness(store=store, clock=clock)
    agent, approval = await canceled_agent_run(store, clock)
    succeeded = (await h.run(workflow(mock("a"), mock("b", ["a"]), workflow_id="ok"))).snapshot
    failing = mock("f", fail_always=True, retry={"max_attempts": 2, "initial_backoff_seconds": 0})
    failed = (await h.run(workflow(failing, workflow_id="bad"))).snapshot
    assert (succeeded.run.status, failed.run.status) == (RunStatus.SUCCEEDED, RunStatus.FAILED)
    old_pending = await h.create(workflow(mock("p"), workflow_id="waiting"))
    old_running = await h.create(workflow(mock("r"), workflow_id="busy"))
    await start_first_attempt(store, clock, old_running)
    clock.advance(10 * 86400)
    recent = (await h.run(workflow(mock("a"), workflow_id="later"))).snapshot.run.run_id
    cutoff = clock.now() - timedelta(days=5)

    # Three runs are due: a batch of two, then the last, then nothing.
    assert await store.purge_finished_runs(cutoff, 2) == 2
    assert await store.purge_finished_runs(cutoff, 2) == 1
    assert await store.purge_finished_runs(cutoff, 2) == 0

    for run_id in (agent, succeeded.run.run_id, failed.run.run_id):
        await assert_gone(store, run_id)
    assert await store.list_steps(agent, "a", 1) == []
    assert await store.find_approval(approval) is None
    assert (await store.page_approvals(None, None, 10)).items == ()
    with pytest.raises(RunNotFound):
        await store.list_run_attempts(failed.run.run_id, 10)
    for run_id in (old_pending, old_running, recent):
        await assert_whole(store, run_id)
    assert (await store.get_run(old_running)).status is RunStatus.RUNNING
    assert await store.list_attempts(old_running, "r")


async def test_a_run_finished_exactly_at_the_cutoff_is_kept(store: Store, clock: FakeClock) -> None:
    h = Harness(store=store, clock=clock)
    run = (await h.run(workflow(mock("a")))).snapshot.run
    assert run.finished_at is not None
    assert await store.purge_finished_runs(run.finished_at, 10) == 0  # finished *before* only
    await assert_whole(store, run.run_id)
    later = run.finished_at + timedelta(microseconds=1)
    assert await store.purge_finished_runs(later, 10) == 1
    await assert_gone(store, run.run_id)
