"""The ``JournalStore`` contract (SPEC §11), on both stores: agent steps, their usage, and the
leases of remote tool calls."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tests.engine.harness import Harness
from workload_domain.agent.journal import StepKind, StepRecord, StepStatus
from workload_domain.agent.llm import ModelRequest, ModelResponse, Role, TokenUsage, ToolCall
from workload_domain.compiler import compile_definition
from workload_domain.errors import InvalidCursor, RunNotFound, TaskNotFound
from workload_domain.leases import LeaseLostReason, token_digest, tool_call_lease_lost
from workload_domain.ports import Store
from workload_domain.statuses import AttemptStatus
from workload_domain.usage import Usage
from workload_domain.workers import Claim
from workload_engine.agent import AgentExecutor
from workload_engine.cancellation import cancel_commit
from workload_engine.clock import FakeClock
from workload_engine.local import LocalExecutors
from workload_engine.mock_executor import MockExecutor
from workload_engine.planner import AttemptOutcome, plan

pytestmark = pytest.mark.anyio
_tokens = itertools.count()
LOCAL = frozenset({"mock", "agent"})
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
AGENT = {"key": "a", "action": "agent", "input": {"model": "mock", "prompt": "hi"}}


async def agent_run(
    store: Store, clock: FakeClock, *extra: dict[str, Any], traceparent: str | None = None
) -> str:
    """A run whose agent task's attempt 1 is running (as its runner commits it)."""
    definition = {"id": "wf", "tasks": [AGENT, *extra]}
    h = Harness(store=store, clock=clock)
    run_id = await h.create(definition, traceparent=traceparent)
    snapshot = await store.load_run(run_id)
    decided = plan(
        snapshot,
        compile_definition(definition),
        now=clock.now(),
        slots={"a"},
        executing=(),
        local_actions=LOCAL,
    )
    assert decided.commit is not None
    await store.commit(decided.commit)
    return run_id


def model_step(run_id: str, sequence: int, clock: FakeClock, attempt: int = 1) -> StepRecord:
    return StepRecord(
        run_id,
        "a",
        attempt,
        sequence,
        StepKind.MODEL_CALL,
        StepStatus.RUNNING,
        {"messages": [{"role": "user", "content": "hi"}], "n": 1.5},
        "sha256:" + "0" * 64,
        clock.now(),
    )


def tool_step(
    run_id: str, sequence: int, clock: FakeClock, *, schedule: float | None = None
) -> StepRecord:
    return StepRecord(
        run_id,
        "a",
        1,
        sequence,
        StepKind.TOOL_CALL,
        StepStatus.RUNNING,
        {"tool": "search", "action": "search", "arguments": {"q": "x"}},
        "sha256:" + "1" * 64,
        clock.now(),
        tool_call_id="call_1",
        action="search",
        queue="default",
        heartbeat_timeout_seconds=10,
        deadline=clock.now() + timedelta(seconds=300),
        schedule_deadline=None if schedule is None else clock.now() + timedelta(seconds=schedule),
    )


def claim(n: int = 1, actions: tuple[str, ...] = ("search",)) -> tuple[Claim, list[str]]:
    tokens = [f"token-{next(_tokens)}" for _ in range(n)]
    return Claim("w1", ("default",), actions, n, tuple(token_digest(t) for t in tokens)), tokens


def ended(step: StepRecord, clock: FakeClock, **fields: Any) -> StepRecord:
    values: dict[str, Any] = {
        "status": StepStatus.SUCCEEDED,
        "response": {"output": {"ok": True}},
        "finished_at": clock.now(),
        **fields,
    }
    return replace(step, **values)


async def test_a_step_begins_once_and_ends_once_adding_its_usage(
    store: Store, clock: FakeClock
) -> None:
    run_id = await agent_run(store, clock)
    begun = await store.begin_step(model_step(run_id, 1, clock))
    assert begun is not None
    assert (begun.status, begun.request["n"], begun.finished_at) == (StepStatus.RUNNING, 1.5, None)
    assert await store.begin_step(model_step(run_id, 1, clock)) is None  # the sequence is taken
    assert [s.sequence for s in await store.list_steps(run_id, "a", 1)] == [1]

    clock.advance(2)
    usage = {"input_tokens": 7, "output_tokens": 3}
    done = await store.finish_step(ended(begun, clock, response={"content": "x"}, usage=usage))
    assert done is not None
    assert (done.status, done.response, done.usage) == (
        StepStatus.SUCCEEDED,
        {"content": "x"},
        usage,
    )
    assert done.finished_at == clock.now()
    assert await store.finish_step(ended(begun, clock)) is None  # a step ends once
    expected = Usage(model_calls=1, input_tokens=7, output_tokens=3)
    assert (await store.get_task(run_id, "a")).usage == expected
    assert (await store.get_run(run_id)).usage == expected
    assert (await store.load_run(run_id)).run.usage == expected


async def test_no_step_begins_outside_a_running_attempt(store: Store, clock: FakeClock) -> None:
    run_id = await agent_run(store, clock)
    assert await store.begin_step(model_step(run_id, 1, clock, attempt=2)) is None
    snapshot = await store.load_run(run_id)
    commit, _ = cancel_commit(snapshot, now=clock.now(), local_actions=LOCAL)
    await store.commit(commit)
    # The runner converges the run: the attempt is canceled.
    decided = plan(
        await store.load_run(run_id),
        compile_definition({"id": "wf", "tasks": [AGENT]}),
        now=clock.now(),
        executing=(),
        local_actions=LOCAL,
    )
    assert decided.commit is not None
    await store.commit(decided.commit)
    assert await store.begin_step(model_step(run_id, 1, clock)) is None
    assert await store.list_steps(run_id, "a", 1) == []
    assert await store.list_steps("not-a-run", "a", 1) == []


@pytest.mark.parametrize(
    ("ended_as", "told"),
    [(AttemptStatus.FAILED, "finished"), (AttemptStatus.TIMED_OUT, "timed_out")],
)
async def test_a_commit_that_ends_the_attempt_closes_its_running_steps(
    store: Store, clock: FakeClock, ended_as: AttemptStatus, told: str
) -> None:
    # A tool call's worker learns at its next report why its attempt ended.
    run_id = await agent_run(store, clock)
    first = await store.begin_step(model_step(run_id, 1, clock))
    assert first is not None
    await store.finish_step(ended(first, clock, usage={"input_tokens": 5, "output_tokens": 1}))
    assert await store.begin_step(model_step(run_id, 2, clock)) is not None
    assert await store.begin_step(tool_step(run_id, 3, clock)) is not None
    clock.advance(1)
    snapshot = await store.load_run(run_id)
    outcome = AttemptOutcome("a", 1, ended_as, clock.now())
    decided = plan(
        snapshot,
        compile_definition({"id": "wf", "tasks": [AGENT]}),
        now=clock.now(),
        outcomes=[outcome],
        executing=(),
        local_actions=LOCAL,
    )
    assert decided.commit is not None
    await store.commit(decided.commit)
    steps = await store.list_steps(run_id, "a", 1)
    assert [(s.status, s.lease_end) for s in steps] == [
        (StepStatus.SUCCEEDED, None),
        (StepStatus.FAILED, told),
        (StepStatus.FAILED, told),
    ]
    assert steps[1].response == {"error": f"the attempt ended ({ended_as.value})"}
    assert steps[2].finished_at == clock.now()
    usage = Usage(model_calls=2, tool_calls=1, input_tokens=5, output_tokens=1)
    assert (await store.get_task(run_id, "a")).usage == usage
    assert (await store.get_run(run_id)).usage == usage


async def test_a_commit_from_an_older_snapshot_never_overwrites_usage(
    store: Store, clock: FakeClock
) -> None:
    run_id = await agent_run(store, clock, {"key": "b", "action": "mock"})
    stale = await store.load_run(run_id)
    step = await store.begin_step(model_step(run_id, 1, clock))
    assert step is not None
    await store.finish_step(ended(step, clock, usage={"input_tokens": 2, "output_tokens": 2}))
    decided = plan(
        stale,
        compile_definition({"id": "wf", "tasks": [AGENT, {"key": "b", "action": "mock"}]}),
        now=clock.now(),
        slots={"b"},
        executing=[("a", 1)],
        local_actions=LOCAL,
    )
    assert decided.commit is not None
    await store.commit(decided.commit)
    assert (await store.get_run(run_id)).usage.input_tokens == 2
    assert (await store.get_task(run_id, "a")).usage.model_calls == 1


async def test_a_remote_tool_call_is_claimed_leased_and_fenced(
    store: Store, clock: FakeClock
) -> None:
    run_id = await agent_run(store, clock)
    begun = await store.begin_step(tool_step(run_id, 1, clock))
    assert begun is not None
    assert begun.queued
    stats = {q.queue: q for q in await store.queue_stats()}
    assert (stats["default"].queued, stats["default"].running) == (1, 0)
    clock.advance(1)
    request, tokens = claim(n=3)
    (item,) = await store.claim(request, clock.now())
    assert (item.kind, item.attempt_id, item.tool_call_id, item.tool) == (
        "tool_call",
        begun.step_id,
        "call_1",
        "search",
    )
    assert (item.run_id, item.task_key, item.attempt, item.action) == (run_id, "a", 1, "search")
    assert (item.input, item.arguments, item.upstream, item.token_index) == (
        {"q": "x"},
        {"q": "x"},
        {},
        0,
    )
    assert item.lease_expires_at == clock.now() + timedelta(seconds=10)
    assert item.timeout_at == begun.deadline
    assert await store.claim(claim()[0], clock.now()) == []  # handed out once
    stats = {q.queue: q for q in await store.queue_stats()}
    assert (stats["default"].queued, stats["default"].running) == (0, 1)
    (worker,) = (await store.page_workers(None, 10)).items
    assert worker.in_flight == 1

    found = await store.find_tool_call(begun.step_id)
    assert found is not None
    assert found.step.worker_id == "w1"
    assert tool_call_lease_lost(found, tokens[0], clock.now()) is None
    assert tool_call_lease_lost(found, "forged", clock.now()) is LeaseLostReason.UNKNOWN
    assert await store.find_tool_call(model_step(run_id, 9, clock).step_id) is None

    clock.advance(5)
    renewed = await store.heartbeat(begun.step_id, token_digest(tokens[0]), clock.now(), {"p": 1})
    assert renewed == clock.now() + timedelta(seconds=10)
    assert await store.heartbeat(begun.step_id, token_digest("x"), clock.now(), None) is None
    clock.advance(1)
    report = ended(begun, clock, report_hash="h1")
    assert await store.finish_step(report, token_digest=token_digest("forged")) is None
    done = await store.finish_step(report, token_digest=token_digest(tokens[0]))
    assert done is not None
    assert done.report_hash == "h1"
    assert done.progress == {"p": 1}
    again = await store.find_tool_call(begun.step_id)
    assert tool_call_lease_lost(again, tokens[0], clock.now()) is LeaseLostReason.FINISHED
    assert (await store.get_run(run_id)).usage == Usage(tool_calls=1)


async def test_a_tool_call_heartbeat_renews_only_a_held_lease(
    store: Store, clock: FakeClock
) -> None:
    run_id = await agent_run(store, clock)
    short = replace(tool_step(run_id, 1, clock), deadline=clock.now() + timedelta(seconds=25))
    begun = await store.begin_step(short)
    assert begun is not None
    request, (token,) = claim()
    (item,) = await store.claim(request, clock.now())
    digest = token_digest(token)
    clock.advance(5)
    assert await store.heartbeat(item.attempt_id, digest, clock.now(), {"p": 1}) == (
        clock.now() + timedelta(seconds=10)
    )
    clock.advance(5)
    renewed = await store.heartbeat(item.attempt_id, digest, clock.now(), None)
    assert renewed == clock.now() + timedelta(seconds=10)
    found = await store.find_tool_call(begun.step_id)
    assert found is not None
    # No progress in a heartbeat keeps the one reported before.
    assert (found.step.lease_expires_at, found.step.progress) == (renewed, {"p": 1})
    clock.advance(9)
    assert await store.heartbeat(item.attempt_id, digest, clock.now(), None) is not None
    clock.advance(7)  # the lease is held until 29 s, but the deadline (25 s) has passed
    assert await store.heartbeat(item.attempt_id, digest, clock.now(), {"p": 2}) is None
    found = await store.find_tool_call(begun.step_id)
    assert found is not None
    assert found.step.progress == {"p": 1}


async def test_a_tool_call_heartbeat_does_not_revive_a_lost_lease(
    store: Store, clock: FakeClock
) -> None:
    run_id = await agent_run(store, clock)
    begun = await store.begin_step(tool_step(run_id, 1, clock))
    assert begun is not None
    request, (token,) = claim()
    (item,) = await store.claim(request, clock.now())
    clock.advance(10)  # the lease ran out (10 s), long before the deadline
    assert await store.heartbeat(item.attempt_id, token_digest(token), clock.now(), None) is None
    found = await store.find_tool_call(begun.step_id)
    assert found is not None
    assert found.step.lease_expires_at == clock.now()


async def test_tool_calls_and_task_attempts_are_one_fifo_by_ready_time(
    store: Store, clock: FakeClock
) -> None:
    """SPEC §10: claims are FIFO by ready time, whatever the kind of work."""
    remote = {"id": "remote", "tasks": [{"key": "r", "action": "search"}]}
    h = Harness(store=store, clock=clock)

    async def queued_task() -> str:
        run_id = await h.create(remote)
        decided = plan(
            await store.load_run(run_id), compile_definition(remote), now=clock.now(), executing=()
        )
        assert decided.commit is not None
        await store.commit(decided.commit)
        return run_id

    older = await queued_task()
    clock.advance(1)
    agent = await agent_run(store, clock, traceparent=TRACEPARENT)
    clock.advance(1)
    tool = await store.begin_step(tool_step(agent, 1, clock))
    assert tool is not None
    clock.advance(1)
    newer = await queued_task()
    clock.advance(1)
    first = await store.claim(claim(n=2)[0], clock.now())
    assert [(i.kind, i.run_id, i.token_index) for i in first] == [
        ("task", older, 0),
        ("tool_call", agent, 1),
    ]
    assert (first[1].traceparent, first[1].queued_at) == (TRACEPARENT, tool.started_at)
    (last,) = await store.claim(claim(n=2)[0], clock.now())
    assert (last.kind, last.run_id, last.token_index) == ("task", newer, 0)


async def test_tool_calls_past_their_deadlines_are_due(store: Store, clock: FakeClock) -> None:
    run_id = await agent_run(store, clock)
    leased = await store.begin_step(tool_step(run_id, 1, clock))
    clock.advance(0.001)  # claims are FIFO: the first queued is the first claimed
    waiting = await store.begin_step(tool_step(run_id, 2, clock, schedule=30))
    assert leased is not None
    assert waiting is not None
    request, tokens = claim()
    (item,) = await store.claim(request, clock.now())
    assert item.attempt_id == leased.step_id
    assert await store.due_tool_calls(clock.now(), 10) == []
    # Too early: the reaper's end is refused while no deadline has passed.
    assert await store.finish_step(ended(leased, clock), deadline_passed=True) is None
    clock.advance(11)  # the lease ran out
    due = await store.due_tool_calls(clock.now(), 10)
    assert [s.sequence for s in due] == [1]
    assert (
        await store.finish_step(ended(leased, clock), token_digest=token_digest(tokens[0])) is None
    )
    expired = ended(leased, clock, status=StepStatus.FAILED, lease_end="expired")
    assert await store.finish_step(expired, deadline_passed=True) is not None
    found = await store.find_tool_call(leased.step_id)
    assert tool_call_lease_lost(found, tokens[0], clock.now()) is LeaseLostReason.EXPIRED
    clock.advance(20)  # the queued one waited past its schedule-to-start time
    assert [s.sequence for s in await store.due_tool_calls(clock.now(), 10)] == [2]
    # Until the reaper fails it, no claim may take it (SPEC §10).
    assert await store.claim(claim()[0], clock.now()) == []


async def test_a_tool_call_is_claimable_until_its_schedule_deadline(
    store: Store, clock: FakeClock
) -> None:
    run_id = await agent_run(store, clock)
    assert await store.begin_step(tool_step(run_id, 1, clock, schedule=5)) is not None
    clock.advance(0.001)
    later = await store.begin_step(tool_step(run_id, 2, clock, schedule=5))
    assert later is not None
    clock.advance(4.999)  # exactly at the first one's deadline: too late for it
    request, _ = claim(n=2)
    (item,) = await store.claim(request, clock.now())
    assert (item.kind, item.attempt_id) == ("tool_call", later.step_id)


async def test_no_tool_call_of_a_run_whose_cancel_was_requested_is_handed_out(
    store: Store, clock: FakeClock
) -> None:
    # The cancel request is recorded while the agent (a local attempt) still runs: until its
    # runner stops it and closes its steps, its queued tool call must not reach a worker.
    canceled, other = await agent_run(store, clock), await agent_run(store, clock)
    assert await store.begin_step(tool_step(canceled, 1, clock)) is not None
    clock.advance(0.001)
    kept = await store.begin_step(tool_step(other, 1, clock))
    assert kept is not None
    commit, after = cancel_commit(
        await store.load_run(canceled), now=clock.now(), local_actions=LOCAL
    )
    assert after.run.cancel_requested
    assert after.run.status.value == "running"  # the agent's runner has yet to act
    await store.commit(commit)
    clock.advance(1)
    request, _ = claim(n=2)
    (item,) = await store.claim(request, clock.now())
    assert (item.kind, item.attempt_id) == ("tool_call", kept.step_id)
    assert await store.claim(claim(n=2)[0], clock.now()) == []


async def test_a_tool_calls_lease_is_lost_canceled_once_its_runs_cancel_is_requested(
    store: Store, clock: FakeClock
) -> None:
    # SPEC §10: the worker learns of the cancel at its next heartbeat or report (409,
    # canceled), even while the agent — a local attempt — has yet to be stopped by its runner.
    run_id = await agent_run(store, clock)
    begun = await store.begin_step(tool_step(run_id, 1, clock))
    assert begun is not None
    request, tokens = claim()
    (item,) = await store.claim(request, clock.now())
    digest = token_digest(tokens[0])
    clock.advance(1)
    commit, _ = cancel_commit(await store.load_run(run_id), now=clock.now(), local_actions=LOCAL)
    await store.commit(commit)
    clock.advance(1)
    assert await store.heartbeat(item.attempt_id, digest, clock.now(), {"p": 1}) is None
    found = await store.find_tool_call(begun.step_id)
    assert found is not None
    assert found.step.status is StepStatus.RUNNING  # the runner has yet to close it
    assert found.step.progress is None
    assert tool_call_lease_lost(found, tokens[0], clock.now()) is LeaseLostReason.CANCELED
    assert tool_call_lease_lost(found, "forged", clock.now()) is LeaseLostReason.UNKNOWN
    report = ended(begun, clock, report_hash="h1")
    assert await store.finish_step(report, token_digest=digest) is None
    assert (await store.get_run(run_id)).usage == Usage()


async def test_a_tasks_steps_page_by_attempt_and_sequence(store: Store, clock: FakeClock) -> None:
    run_id = await agent_run(store, clock)
    for sequence in (1, 2, 3):
        assert await store.begin_step(model_step(run_id, sequence, clock)) is not None
    first = await store.page_steps(run_id, "a", None, 2)
    assert [s.sequence for s in first.items] == [1, 2]
    assert first.next_cursor is not None
    second = await store.page_steps(run_id, "a", first.next_cursor, 2)
    assert [s.sequence for s in second.items] == [3]
    assert second.next_cursor is None
    with pytest.raises(InvalidCursor):
        await store.page_steps(run_id, "other", first.next_cursor, 2)
    with pytest.raises(TaskNotFound):
        await store.page_steps(run_id, "nope", None, 2)
    with pytest.raises(RunNotFound):
        await store.page_steps("00000000-0000-7000-8000-000000000000", "a", None, 2)


class HostileModels:
    """A model whose answers carry what JSONB refuses and what a protocol forbids."""

    def model(self, name: str, *, script: Any = None) -> Any:
        class Hostile:
            async def complete(self, request: ModelRequest) -> ModelResponse:
                turn = sum(1 for m in request.messages if m.role is Role.ASSISTANT)
                if turn == 0:
                    return ModelResponse(
                        content="nul \x00 and a lone \ud800 surrogate",
                        tool_calls=(
                            ToolCall("", "t", {"k\x00": float("nan"), "deep": [[[[1]]]]}),
                            ToolCall("same", "t", "not an object \x00"),
                            ToolCall("same", "t\x00", {}),
                            ToolCall("x" * 5000, "t", {"n": 1e308 * 10}),
                        ),
                        usage=TokenUsage(5, 7),
                        finish_reason="tool_calls\x00",
                    )
                return ModelResponse(content="done \x00", usage=TokenUsage(1, 1))

        return Hostile()


async def test_hostile_model_output_is_stored_safely(store: Store, clock: FakeClock) -> None:
    mock_executor = MockExecutor(clock)
    agent = AgentExecutor(store, HostileModels(), clock, tools=mock_executor, poll_seconds=0.05)
    local = LocalExecutors(mock_executor, agent, resumable=frozenset({"agent"}))
    h = Harness(store=store, clock=clock, executor=local, resumable=local.resumable)
    definition = {
        "id": "hostile",
        "tasks": [
            {
                "key": "a",
                "action": "agent",
                "input": {
                    "model": "mock",
                    "prompt": "go",
                    "tools": [{"name": "t", "action": "mock"}],
                },
            }
        ],
    }
    # No autojump: time stands still while PostgreSQL answers (nothing here sleeps).
    run_id = await h.create(definition)
    await h.engine.execute(run_id)
    view = await h.view(run_id)
    assert view.status == "succeeded", view.tasks["a"].error
    output = view.tasks["a"].output
    assert output is not None
    assert output["content"] == "done \ufffd"
    steps = await store.list_steps(view.snapshot.run.run_id, "a", 1)
    answer = steps[0].response or {}
    assert answer["content"] == "nul \ufffd and a lone \ufffd surrogate"
    ids = [c["id"] for c in answer["tool_calls"]]
    assert ids == ["call_1_0", "same", "call_1_2", "call_1_3"]  # named, unique, bounded
    assert answer["tool_calls"][0]["arguments"] == {"k\ufffd": None, "deep": [[[[1]]]]}
    # The mock tool refuses fields it does not know; the others are refused before any tool.
    errors = [str((s.response or {}).get("error")) for s in steps[1:5]]
    assert [s.status for s in steps[1:5]] == [StepStatus.FAILED] * 4
    assert errors[0].startswith("invalid_input:")
    assert errors[1] == "invalid arguments: they must be a JSON object"
    assert errors[2].startswith("unknown tool 't\ufffd'")
