"""The agent runtime in the engine (SPEC §11): the loop, tools, budgets, the journal, resume.

In-memory store and fake clock; the mock model and in-process (``mock``) tools. Remote tool
calls are claimed and reported here through the store as a worker would; the real worker
process is in ``tests/e2e``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

import anyio
import anyio.lowlevel
import pytest

from tests.engine.harness import Harness, RunView, mock
from workload_domain.agent.journal import StepKind, StepRecord, StepStatus
from workload_domain.agent.llm import Model, ModelRequest, ModelResponse, Models
from workload_domain.approvals import ApprovalRecord, ApprovalStatus, Decision, arguments_digest
from workload_domain.errors import ApprovalDecided, StoreUnavailable
from workload_domain.events import EventType
from workload_domain.jsonvalues import JsonObject
from workload_domain.leases import token_digest
from workload_domain.ports import Store
from workload_domain.records import RunCommit
from workload_domain.telemetry import NO_TELEMETRY, Telemetry
from workload_domain.usage import Usage
from workload_domain.workers import Claim
from workload_engine.agent import AgentExecutor
from workload_engine.approvals import ApprovalDecisions
from workload_engine.clock import FakeClock
from workload_engine.local import LocalExecutors
from workload_engine.memory import InMemoryStore
from workload_engine.mock_executor import MockExecutor
from workload_engine.model_router import ModelRouter
from workload_engine.runs import request_cancel

pytestmark = pytest.mark.anyio

OBJECT: JsonObject = {"type": "object"}


class CountingModels:
    """The service's models, counting every call made (a model call is never repeated)."""

    def __init__(self) -> None:
        self.inner = ModelRouter()
        self.calls: list[int] = []  # the number of messages of each request

    def model(self, name: str, *, script: Sequence[JsonObject] | None = None) -> Model:
        model = self.inner.model(name, script=script)
        calls = self.calls

        class Counted:
            async def complete(self, request: ModelRequest) -> ModelResponse:
                calls.append(len(request.messages))
                return await model.complete(request)

        return Counted()


def harness(
    store: Store | None = None, clock: FakeClock | None = None, models: Models | None = None
) -> tuple[Harness, AgentExecutor]:
    clock = clock or FakeClock()
    store = store or InMemoryStore(clock)
    mock_executor = MockExecutor(clock)
    agent = AgentExecutor(
        store, models or ModelRouter(), clock, tools=mock_executor, poll_seconds=0.05
    )
    local = LocalExecutors(mock_executor, agent, resumable=frozenset({"agent"}))
    return Harness(store=store, clock=clock, executor=local, resumable=local.resumable), agent


def agent(
    key: str = "a",
    *,
    script: Sequence[JsonObject] = (),
    tools: Sequence[JsonObject] = (),
    depends_on: Sequence[str] = (),
    task: JsonObject | None = None,
    **fields: Any,
) -> JsonObject:
    spec: JsonObject = {"model": "mock", "prompt": "go", "script": list(script)}
    if tools:
        spec["tools"] = list(tools)
    spec.update(fields)
    return {
        "key": key,
        "action": "agent",
        "depends_on": list(depends_on),
        "input": spec,
        **(task or {}),
    }


def tool(name: str, action: str = "mock", **fields: Any) -> JsonObject:
    return {"name": name, "action": action, **fields}


def call(name: str, arguments: Any = None) -> JsonObject:
    return {"tool_calls": [{"name": name, "arguments": {} if arguments is None else arguments}]}


def say(content: str) -> JsonObject:
    return {"content": content}


def wf(*tasks: JsonObject) -> JsonObject:
    return {"id": "agents", "tasks": list(tasks)}


async def steps(h: Harness, run_id: str, attempt: int = 1) -> list[StepRecord]:
    return list(await h.store.list_steps(run_id, "a", attempt))


def error_of(view: RunView, key: str = "a") -> tuple[str, bool]:
    error = view.tasks[key].error
    assert error is not None
    return error.code, error.retryable


async def test_an_agent_calls_tools_and_answers_with_structured_output() -> None:
    h, _ = harness()
    calc = tool(
        "calc",
        parameters={"type": "object", "properties": {"output": OBJECT}, "required": ["output"]},
    )
    definition = wf(
        mock("fetch", output={"text": "hello"}),
        agent(
            depends_on=["fetch"],
            instructions="Be brief.",
            prompt="Count {{upstream.fetch}} for {{input.who}}",
            tools=[calc],
            output_schema={"type": "object", "required": ["answer"]},
            script=[
                call("calc", {"output": {"n": 5}}),
                say('```json\n{"answer": 5}\n```'),
            ],
        ),
    )
    view = await h.run(definition, {"who": "ann"})
    assert view.status == "succeeded"
    output = view.tasks["a"].output
    assert output is not None
    assert output["content"] == '```json\n{"answer": 5}\n```'
    assert output["structured"] == {"answer": 5}
    journal = await steps(h, view.snapshot.run.run_id)
    assert [(s.sequence, s.kind, s.status) for s in journal] == [
        (1, StepKind.MODEL_CALL, StepStatus.SUCCEEDED),
        (2, StepKind.TOOL_CALL, StepStatus.SUCCEEDED),
        (3, StepKind.MODEL_CALL, StepStatus.SUCCEEDED),
    ]
    first = journal[0].request["messages"]
    assert first == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": 'Count {"text":"hello"} for ann'},
    ]
    assert journal[1].response == {"output": {"n": 5}}
    assert journal[1].tool_call_id == "call_1_1"
    tool_message = journal[2].request["messages"][1]
    assert tool_message == {"role": "tool", "content": '{"n":5}', "tool_call_id": "call_1_1"}
    tokens = [s.usage for s in journal if s.kind is StepKind.MODEL_CALL]
    assert all(t and t["input_tokens"] > 0 and t["output_tokens"] > 0 for t in tokens)
    usage = Usage(
        model_calls=2,
        tool_calls=1,
        input_tokens=sum(t["input_tokens"] for t in tokens if t),
        output_tokens=sum(t["output_tokens"] for t in tokens if t),
    )
    assert output["usage"] == usage.to_json()
    assert view.tasks["a"].usage == usage
    assert view.snapshot.run.usage == usage


async def test_refused_tool_calls_are_answered_to_the_model_and_counted() -> None:
    h, _ = harness()
    strict = tool(
        "lookup",
        parameters={
            "type": "object",
            "properties": {"id": {"type": "integer"}},
            "required": ["id"],
            "additionalProperties": False,
        },
    )
    turn = {
        "tool_calls": [
            {"name": "nope", "arguments": {}},
            {"name": "lookup", "arguments": {"id": "seven"}},
            {"name": "lookup", "arguments": [1, 2]},
            {"name": "lookup", "arguments": {"id": 7, "output": {"found": True}}},
        ]
    }
    view = await h.run(wf(agent(tools=[strict], script=[turn, say("done")])))
    assert view.status == "succeeded"
    journal = await steps(h, view.snapshot.run.run_id)
    tools = [s for s in journal if s.kind is StepKind.TOOL_CALL]
    assert [s.status for s in tools] == [StepStatus.FAILED] * 4
    errors = [str((s.response or {})["error"]) for s in tools]
    assert errors[0].startswith("unknown tool 'nope'")
    assert errors[1].startswith("invalid arguments: /id:")
    assert errors[2] == "invalid arguments: they must be a JSON object"
    assert "output" in errors[3]  # additionalProperties: the schema is enforced exactly
    answered = journal[-1].request["messages"]
    assert [m["role"] for m in answered] == ["assistant", "tool", "tool", "tool", "tool"]
    assert answered[1]["content"].startswith('{"error":"unknown tool')
    assert view.tasks["a"].usage.tool_calls == 4


@pytest.mark.parametrize("limit", [0, 1, 3])
async def test_max_model_calls_allows_exactly_n_calls(limit: int) -> None:
    models = CountingModels()
    h, _ = harness(models=models)
    endless = [call("t")] * 10
    view = await h.run(
        wf(agent(tools=[tool("t")], script=endless, budget={"max_model_calls": limit}))
    )
    assert view.status == "failed"
    assert error_of(view) == ("budget_exceeded", False)
    assert len(models.calls) == limit
    assert view.tasks["a"].usage.model_calls == limit
    assert "max_model_calls" in (view.tasks["a"].error.message if view.tasks["a"].error else "")


@pytest.mark.parametrize("limit", [0, 2, 3])
async def test_max_tool_calls_allows_exactly_n_calls(limit: int) -> None:
    h, _ = harness()
    two_at_once = {"tool_calls": [{"name": "t", "arguments": {}}, {"name": "t", "arguments": {}}]}
    view = await h.run(
        wf(
            agent(
                tools=[tool("t")],
                script=[two_at_once, two_at_once, say("never")],
                budget={"max_tool_calls": limit},
            )
        )
    )
    assert view.status == "failed"
    assert error_of(view) == ("budget_exceeded", False)
    journal = await steps(h, view.snapshot.run.run_id)
    assert sum(1 for s in journal if s.kind is StepKind.TOOL_CALL) == limit


async def test_token_limits_refuse_the_next_model_call_once_reached() -> None:
    models = CountingModels()
    h, _ = harness(models=models)
    first = await h.run(wf(agent(tools=[tool("t")], script=[call("t"), say("x")])))
    used = first.tasks["a"].usage
    assert used.model_calls == 2
    journal = await steps(h, first.snapshot.run.run_id)
    after_one = (journal[0].usage or {})["input_tokens"]
    models.calls.clear()
    # A limit equal to what the first call used refuses the second; one more allows it.
    for limit, expected in ((after_one, "failed"), (after_one + 1, "succeeded")):
        h2, _ = harness(models=models)
        view = await h2.run(
            wf(
                agent(
                    tools=[tool("t")],
                    script=[call("t"), say("x")],
                    budget={"max_input_tokens": limit},
                )
            )
        )
        assert view.status == expected
    out_limit = (journal[0].usage or {})["output_tokens"]
    h3, _ = harness()
    view = await h3.run(
        wf(
            agent(
                tools=[tool("t")],
                script=[call("t"), say("x")],
                budget={"max_output_tokens": out_limit},
            )
        )
    )
    assert error_of(view) == ("budget_exceeded", False)


async def test_max_seconds_refuses_the_next_step_once_passed() -> None:
    h, _ = harness()
    slow = {"tool_calls": [{"name": "t", "arguments": {"sleep_ms": 5000}}]}
    view = await h.run(
        wf(agent(tools=[tool("t")], script=[slow, say("x")], budget={"max_seconds": 5}))
    )
    assert error_of(view) == ("budget_exceeded", False)
    assert "max_seconds" in (view.tasks["a"].error.message if view.tasks["a"].error else "")
    h2, _ = harness()
    view = await h2.run(
        wf(agent(tools=[tool("t")], script=[slow, say("x")], budget={"max_seconds": 5.5}))
    )
    assert view.status == "succeeded"


async def test_max_seconds_refuses_the_next_call_of_a_turn_once_passed() -> None:
    h, _ = harness()
    three = {
        "tool_calls": [
            {"name": "t", "arguments": {"sleep_ms": 1500}},
            {"name": "t", "arguments": {}},
            {"name": "t", "arguments": {}},
        ]
    }
    view = await h.run(
        wf(agent(tools=[tool("t")], script=[three, say("x")], budget={"max_seconds": 1}))
    )
    assert error_of(view) == ("budget_exceeded", False)
    error = view.tasks["a"].error
    assert error is not None
    assert error.message == "budget exceeded: max_seconds (1) has passed"
    # The first call (begun in time) ran; the 2nd and 3rd were refused, never made.
    journal = await steps(h, view.snapshot.run.run_id)
    assert [s.kind for s in journal] == [StepKind.MODEL_CALL, StepKind.TOOL_CALL]
    assert journal[1].status is StepStatus.SUCCEEDED
    assert view.tasks["a"].usage.tool_calls == 1


async def test_a_model_that_never_stops_ends_on_its_budget() -> None:
    h, _ = harness()
    view = await h.run(
        wf(agent(tools=[tool("t")], script=[call("t")] * 60))  # the default budget: 50 calls
    )
    assert error_of(view) == ("budget_exceeded", False)
    assert view.tasks["a"].usage.model_calls == 50
    assert view.tasks["a"].usage.tool_calls == 50


async def test_a_script_that_runs_out_fails_with_model_error() -> None:
    h, _ = harness()
    view = await h.run(wf(agent(tools=[tool("t")], script=[call("t")])))
    code, retryable = error_of(view)
    assert (code, retryable) == ("model_error", False)
    journal = await steps(h, view.snapshot.run.run_id)
    assert journal[-1].status is StepStatus.FAILED


async def test_templates_fail_clearly_on_a_missing_field_or_dependency() -> None:
    for prompt in ("{{input.missing}}", "{{upstream.nowhere}}"):
        h, _ = harness()
        view = await h.run(wf(agent(prompt=prompt, script=[say("x")])))
        assert error_of(view) == ("template_error", False)
        assert await steps(h, view.snapshot.run.run_id) == []  # no model call was made


async def test_output_that_does_not_fit_the_schema_is_retried_then_fails() -> None:
    models = CountingModels()
    h, _ = harness(models=models)
    view = await h.run(
        wf(
            agent(
                script=[say("not json")],
                output_schema={"type": "object"},
                task={"retry": {"max_attempts": 2, "initial_backoff_seconds": 0}},
            )
        )
    )
    assert error_of(view) == ("invalid_model_output", True)
    assert view.attempt_statuses("a") == ["failed", "failed"]
    assert len(models.calls) == 2  # each attempt has its own journal
    assert view.tasks["a"].usage.model_calls == 2


class CrashingJournal(InMemoryStore):
    """Fails like a lost database right after its N-th step end (a process crash there)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.ends = 0
        self.crash_after: int | None = None

    async def finish_step(self, step: StepRecord, **conditions: Any) -> StepRecord | None:
        done = await super().finish_step(step, **conditions)
        self.ends += 1
        if self.crash_after is not None and self.ends >= self.crash_after:
            self.crash_after = None
            raise StoreUnavailable("the database went away")
        return done


@pytest.mark.parametrize(
    ("crash_after", "label"), [(1, "after a model step"), (2, "after a tool step")]
)
async def test_a_restart_resumes_the_attempt_from_its_journal(crash_after: int, label: str) -> None:
    clock = FakeClock()
    store = CrashingJournal(clock)
    models = CountingModels()
    tools_run: list[JsonObject] = []

    class CountingTools(MockExecutor):
        async def execute(self, request: Any) -> Any:
            tools_run.append(request.input)
            return await super().execute(request)

    h, _ = harness(store, clock, models)
    script = [call("t", {"output": {"v": 1}}), say("done")]
    run_id = await h.create(wf(agent(tools=[tool("t")], script=script)))
    store.crash_after = crash_after
    with pytest.raises(StoreUnavailable):
        await h.execute(run_id)
    interrupted = await h.view(run_id)
    assert interrupted.attempt_statuses("a") == ["running"], label

    agent2 = AgentExecutor(store, models, clock, tools=CountingTools(clock), poll_seconds=0.05)
    local = LocalExecutors(MockExecutor(clock), agent2, resumable=frozenset({"agent"}))
    view = await h.restarted(local, local.resumable).execute(run_id)
    assert view.status == "succeeded"
    assert view.attempt_statuses("a") == ["succeeded"]  # resumed, not interrupted
    assert len(models.calls) == 2  # no model call was repeated
    assert len(tools_run) == (1 if crash_after == 1 else 0)  # nor a completed tool call
    recovered = [e for e in view.events if e.type == "run.recovered"]
    assert [e.data for e in recovered] == [{"interrupted_attempts": 0, "resumed_attempts": 1}]
    journal = await steps(h, run_id)
    assert [s.sequence for s in journal] == [1, 2, 3]
    assert view.tasks["a"].usage.model_calls == 2


async def test_a_model_call_in_flight_at_a_crash_is_issued_again() -> None:
    clock = FakeClock()
    store = InMemoryStore(clock)
    models = CountingModels()
    h, _ = harness(store, clock, models)
    run_id = await h.create(wf(agent(script=[say("done")])))

    class Hanging:
        def model(self, name: str, *, script: Sequence[JsonObject] | None = None) -> Model:
            class Never:
                async def complete(self, request: ModelRequest) -> ModelResponse:
                    await anyio.sleep_forever()
                    raise AssertionError

            return Never()

    stuck, _ = harness(store, clock, Hanging())
    with anyio.move_on_after(0.5):  # the process stops while the call is in flight
        await stuck.engine.execute(run_id)
    (in_flight,) = await steps(h, run_id)
    assert in_flight.status is StepStatus.RUNNING
    view = await harness(store, clock, models)[0].execute(run_id)
    assert view.status == "succeeded"
    (step,) = await steps(h, run_id)
    assert (step.sequence, step.status, step.request_hash) == (
        1,
        StepStatus.SUCCEEDED,
        in_flight.request_hash,
    )
    assert len(models.calls) == 1


async def worker_claims(store: Store, clock: FakeClock, action: str = "search") -> Any:
    token = "secret-token"
    for _ in range(200):
        items = await store.claim(
            Claim("w1", ("default",), (action,), 1, (token_digest(token),)), clock.now()
        )
        if items:
            return items[0], token
        await anyio.sleep(0.01)
    raise AssertionError("no tool call was queued")


async def test_a_remote_tool_call_waits_for_its_worker() -> None:
    h, executor = harness()
    run_id = await h.create(
        wf(agent(tools=[tool("search", "search")], script=[call("search", {"q": "x"}), say("ok")]))
    )
    result: dict[str, Any] = {}

    async def execute() -> None:
        result["view"] = await h.engine.execute(run_id)

    async with anyio.create_task_group() as tg:
        tg.start_soon(execute)
        item, token = await worker_claims(h.store, h.clock)
        assert (item.kind, item.tool, item.input) == ("tool_call", "search", {"q": "x"})
        leased = await h.store.find_tool_call(item.attempt_id)
        assert leased is not None
        done = replace(
            leased.step,
            status=StepStatus.SUCCEEDED,
            response={"output": {"hits": 3}},
            finished_at=h.clock.now(),
        )
        assert await h.store.finish_step(done, token_digest=token_digest(token)) is not None
        executor.step_signal.notify((run_id, "a", 1))
    view = await h.view(run_id)
    assert view.status == "succeeded"
    journal = await steps(h, run_id)
    assert journal[1].response == {"output": {"hits": 3}}
    assert journal[2].request["messages"][1]["content"] == '{"hits":3}'


async def test_cancel_while_a_tool_call_is_queued_closes_it() -> None:
    h, _ = harness()
    run_id = await h.create(
        wf(agent(tools=[tool("search", "search")], script=[call("search"), say("ok")]))
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.engine.run)
        await anyio.lowlevel.checkpoint()
        h.engine.submit(run_id)
        for _ in range(200):
            journal = await steps(h, run_id)
            if any(s.kind is StepKind.TOOL_CALL for s in journal):
                break
            await anyio.sleep(0.01)
        await request_cancel(h.store, h.clock, run_id, local_actions=h.engine.local_actions)
        h.engine.notify(run_id)
        await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    view = await h.view(run_id)
    assert view.status == "canceled"
    assert view.attempt_statuses("a") == ["canceled"]
    queued = (await steps(h, run_id))[1]
    assert (queued.status, queued.lease_end) == (StepStatus.FAILED, "canceled")
    assert (
        await h.store.claim(
            Claim("w1", ("default",), ("search",), 1, (token_digest("t"),)), h.clock.now()
        )
        == []
    )


# -- approvals (SPEC §11) -------------------------------------------------------------------


def guarded(name: str = "deploy", action: str = "mock", **fields: Any) -> JsonObject:
    return tool(name, action, requires_approval=True, **fields)


async def run_until(h: Harness, run_id: str, status: str) -> RunView:
    """Execute the run in the background until it reaches ``status`` (the engine keeps going)."""
    for _ in range(500):
        view = await h.view(run_id)
        if view.status == status:
            return view
        await anyio.sleep(0.01)
    raise AssertionError(f"the run never became {status}: {(await h.view(run_id)).status}")


async def only_approval(h: Harness, run_id: str) -> Any:
    (approval,) = (await h.store.page_approvals(None, None, 10)).items
    assert approval.run_id == run_id
    return approval


async def test_an_approved_tool_call_runs_once_with_exactly_its_arguments() -> None:

    tools_run: list[JsonObject] = []

    class CountingTools(MockExecutor):
        async def execute(self, request: Any) -> Any:
            tools_run.append(request.input)
            return await super().execute(request)

    clock = FakeClock()
    store = InMemoryStore(clock)
    tools = CountingTools(clock)
    executor = AgentExecutor(store, ModelRouter(), clock, tools=tools, poll_seconds=0.05)
    local = LocalExecutors(tools, executor, resumable=frozenset({"agent"}))
    h = Harness(store=store, clock=clock, executor=local, resumable=local.resumable)
    arguments = {"env": "prod", "output": {"deployed": True}}
    run_id = await h.create(
        wf(agent(tools=[guarded()], script=[call("deploy", arguments), say("done")]))
    )
    decisions = ApprovalDecisions(store, h.engine)
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        h.engine.submit(run_id)
        view = await run_until(h, run_id, "waiting_approval")
        assert view.tasks["a"].status.value == "waiting_approval"
        assert view.attempt_statuses("a") == ["running"]
        approval = await only_approval(h, run_id)
        assert (approval.status, approval.tool, approval.arguments) == (
            ApprovalStatus.PENDING,
            "deploy",
            arguments,
        )
        assert approval.arguments_digest == arguments_digest(arguments)
        assert tools_run == []
        decided = await decisions.decide(
            approval.approval_id,
            Decision.APPROVE,
            approval.arguments_digest,
            decided_by="operator:abc",
            comment="go",
        )
        assert isinstance(decided, ApprovalRecord)
        assert decided.status is ApprovalStatus.APPROVED
        await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    view = await h.view(run_id)
    assert view.status == "succeeded"
    assert tools_run == [arguments]
    types = view.event_types()
    for expected in ("approval.requested", "task.waiting_approval", "approval.approved"):
        assert types.count(expected) == 1
    stored = await store.find_approval(approval.approval_id)
    assert stored is not None
    assert (stored.status, stored.decided_by, stored.comment) == (
        ApprovalStatus.APPROVED,
        "operator:abc",
        "go",
    )


class RecordingTelemetry:
    """No telemetry, except that it keeps every commit the engine is told of."""

    def __init__(self) -> None:
        self.commits: list[RunCommit] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(NO_TELEMETRY, name)

    def committed(self, commit: RunCommit) -> None:
        self.commits.append(commit)


@pytest.mark.parametrize("how", ["reject", "expire", "approve-too-late"])
async def test_a_rejected_or_expired_call_is_answered_to_the_model(how: str) -> None:

    h, _ = harness()
    telemetry = RecordingTelemetry()  # every commit passes through Engine.committed once
    h.engine.telemetry = cast(Telemetry, telemetry)
    run_id = await h.create(
        wf(
            agent(
                tools=[guarded(approval_timeout_seconds=60)],
                script=[call("deploy", {"env": "prod"}), say("ok, not deployed")],
            )
        )
    )
    decisions = ApprovalDecisions(h.store, h.engine)
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        h.engine.submit(run_id)
        await run_until(h, run_id, "waiting_approval")
        approval = await only_approval(h, run_id)
        if how == "reject":
            await decisions.decide(
                approval.approval_id,
                Decision.REJECT,
                approval.arguments_digest,
                decided_by="operator:abc",
                comment="not on a Friday",
            )
        elif how == "expire":
            assert await decisions.expire_due() == 0
            h.clock.advance(61)
            assert await decisions.expire_due() == 1
        else:  # approved after expires_at, before the reaper's next pass: too late
            h.clock.advance(60)
            with pytest.raises(ApprovalDecided, match="already expired"):
                await decisions.decide(
                    approval.approval_id,
                    Decision.APPROVE,
                    approval.arguments_digest,
                    decided_by="operator:abc",
                )
            assert await decisions.expire_due() == 0  # the decision expired it already
        await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    view = await h.view(run_id)
    assert view.status == "succeeded"
    tool_step = (await steps(h, run_id))[1]
    error = str((tool_step.response or {})["error"])
    if how == "reject":
        assert error == "rejected by operator:abc: not on a Friday"
        assert "approval.rejected" in view.event_types()
    else:
        assert error.startswith("expired:")
        assert "approval.expired" in view.event_types()
    decision = EventType.APPROVAL_REJECTED if how == "reject" else EventType.APPROVAL_EXPIRED
    told = [c for c in telemetry.commits if any(e.type is decision for e in c.events)]
    assert len(told) == 1  # the decision's commit, as every other writer's
    assert any(EventType.RUN_SUCCEEDED in {e.type for e in c.events} for c in telemetry.commits)
    model_saw = (await steps(h, run_id))[2].request["messages"][1]["content"]
    assert "rejected" in model_saw or "expired" in model_saw


class LosesTheRefusalsEnd(InMemoryStore):
    """Fails like a lost database as the end of a refused call's step is written (once)."""

    armed = True

    async def finish_step(self, step: StepRecord, **conditions: Any) -> StepRecord | None:
        refused = "rejected" in str((step.response or {}).get("error", ""))
        if self.armed and refused:
            self.armed = False
            raise StoreUnavailable("the database went away before the refusal was written")
        return await super().finish_step(step, **conditions)


@pytest.mark.parametrize("action", ["mock", "deploy"], ids=["in-process", "worker-action"])
async def test_a_rejected_call_begun_before_a_crash_stays_rejected_after_it(action: str) -> None:
    clock = FakeClock()
    store = LosesTheRefusalsEnd(clock)
    h, _ = harness(store, clock)
    script = [call("deploy", {"output": {"deployed": True}}), say("not deployed")]
    run_id = await h.create(wf(agent(tools=[guarded(action=action)], script=script)))
    decisions = ApprovalDecisions(store, h.engine)

    async def first_process() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(h.engine.run)
            h.engine.submit(run_id)
            await run_until(h, run_id, "waiting_approval")
            approval = await only_approval(h, run_id)
            await decisions.decide(
                approval.approval_id,
                Decision.REJECT,
                approval.arguments_digest,
                decided_by="operator:abc",
                comment="no",
            )
            await h.engine.wait_finished(run_id)

    with pytest.raises(BaseExceptionGroup) as stopped:
        await first_process()
    assert stopped.group_contains(StoreUnavailable)
    # The refused call's step was begun, its end lost: a restart resumes the attempt.
    assert [s.status for s in await steps(h, run_id)][-1] is StepStatus.RUNNING
    ran: list[Any] = []

    class CountingTools(MockExecutor):
        async def execute(self, request: Any) -> Any:
            ran.append((request.action, request.input))
            return await super().execute(request)

    agent2 = AgentExecutor(
        store, ModelRouter(), clock, tools=CountingTools(clock), poll_seconds=0.05
    )
    local = LocalExecutors(MockExecutor(clock), agent2, resumable=frozenset({"agent"}))
    view = await h.restarted(local, local.resumable).execute(run_id)
    assert view.status == "succeeded"
    assert ran == []  # the rejected tool never ran
    tool_step = (await steps(h, run_id))[1]
    assert tool_step.status is StepStatus.FAILED
    assert str((tool_step.response or {})["error"]) == "rejected by operator:abc: no"


async def test_cancel_cancels_pending_approvals() -> None:

    h, _ = harness()
    run_id = await h.create(wf(agent(tools=[guarded()], script=[call("deploy"), say("x")])))
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        h.engine.submit(run_id)
        await run_until(h, run_id, "waiting_approval")
        await request_cancel(h.store, h.clock, run_id, local_actions=h.engine.local_actions)
        h.engine.notify(run_id)
        await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    view = await h.view(run_id)
    assert view.status == "canceled"
    approval = await only_approval(h, run_id)
    assert approval.status is ApprovalStatus.CANCELED
    assert "approval.canceled" in view.event_types()


async def test_a_cancel_request_cancels_pending_approvals_before_the_runner_acts() -> None:
    h, _ = harness()
    run_id = await h.create(wf(agent(tools=[guarded()], script=[call("deploy"), say("x")])))
    decisions = ApprovalDecisions(h.store, h.engine)
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        h.engine.submit(run_id)
        await run_until(h, run_id, "waiting_approval")
        # Requested through another process, whose runner has not acted yet (a failover): the
        # approval is canceled by the request itself, so nobody can approve it meanwhile.
        await request_cancel(h.store, h.clock, run_id, local_actions=h.engine.local_actions)
        approval = await only_approval(h, run_id)
        assert approval.status is ApprovalStatus.CANCELED
        with pytest.raises(ApprovalDecided, match="canceled"):
            await decisions.decide(
                approval.approval_id,
                Decision.APPROVE,
                approval.arguments_digest,
                decided_by="operator:abc",
            )
        h.engine.notify(run_id)
        await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    view = await h.view(run_id)
    assert view.status == "canceled"
    assert (await only_approval(h, run_id)).status is ApprovalStatus.CANCELED
    assert view.event_types().count("approval.canceled") == 1
    assert "approval.approved" not in view.event_types()


async def test_a_call_waiting_for_approval_leaves_no_gap_in_the_journal() -> None:
    # The first call of a turn waits for its approval; the second runs meanwhile: it takes the
    # next number, and the first the one after once it is approved.
    h, _ = harness()
    both = {
        "tool_calls": [
            {"name": "deploy", "arguments": {"output": {"deployed": True}}},
            {"name": "echo", "arguments": {"output": {"x": 1}}},
        ]
    }
    run_id = await h.create(wf(agent(tools=[guarded(), tool("echo")], script=[both, say("ok")])))
    decisions = ApprovalDecisions(h.store, h.engine)
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        h.engine.submit(run_id)
        await run_until(h, run_id, "waiting_approval")
        approval = await only_approval(h, run_id)
        await decisions.decide(
            approval.approval_id, Decision.APPROVE, approval.arguments_digest, decided_by="op"
        )
        await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    assert (await h.view(run_id)).status == "succeeded"
    journal = await steps(h, run_id)
    assert [s.sequence for s in journal] == [1, 2, 3, 4]
    assert [(s.kind, s.request.get("tool")) for s in journal] == [
        (StepKind.MODEL_CALL, None),
        (StepKind.TOOL_CALL, "echo"),
        (StepKind.TOOL_CALL, "deploy"),
        (StepKind.MODEL_CALL, None),
    ]


async def test_time_waiting_for_approval_counts_toward_no_timeout() -> None:

    h, _ = harness()
    run_id = await h.create(
        wf(
            agent(
                tools=[guarded()],
                script=[call("deploy"), say("done")],
                budget={"max_seconds": 30},
                task={"timeout_seconds": 60},
            )
        )
    )
    decisions = ApprovalDecisions(h.store, h.engine)
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        h.engine.submit(run_id)
        await run_until(h, run_id, "waiting_approval")
        h.clock.advance(3600)  # an hour: past both the timeout and max_seconds
        approval = await only_approval(h, run_id)
        await decisions.decide(
            approval.approval_id, Decision.APPROVE, approval.arguments_digest, decided_by="op"
        )
        await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    view = await h.view(run_id)
    assert view.status == "succeeded", view.tasks["a"].error
    (attempt,) = view.attempts["a"]
    assert attempt.paused_seconds == 3600


def search_and_deploy() -> JsonObject:
    """An agent whose one turn calls a remote tool and a tool that requires approval."""
    both = {
        "tool_calls": [
            {"name": "search", "arguments": {"q": "x"}},
            {"name": "deploy", "arguments": {"output": {"deployed": True}}},
        ]
    }
    return wf(agent(tools=[tool("search", "search"), guarded()], script=[both, say("done")]))


async def worker_reports(
    h: Harness, attempt_id: str, token: str, executor: AgentExecutor
) -> StepRecord:
    """The worker holding a remote tool call reports its success now; the loop is woken."""
    leased = await h.store.find_tool_call(attempt_id)
    assert leased is not None
    reported = replace(
        leased.step,
        status=StepStatus.SUCCEEDED,
        response={"output": {"hits": 3}},
        finished_at=h.clock.now(),
    )
    assert await h.store.finish_step(reported, token_digest=token_digest(token)) is not None
    executor.step_signal.notify((leased.step.run_id, leased.step.task_key, leased.step.attempt))
    return reported


async def test_approvals_wait_for_the_remote_calls_of_the_same_turn() -> None:

    h, executor = harness()
    run_id = await h.create(search_and_deploy())
    decisions = ApprovalDecisions(h.store, h.engine)
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        h.engine.submit(run_id)
        item, token = await worker_claims(h.store, h.clock)
        assert item.tool == "search"
        h.clock.advance(5)  # the worker takes 5 s: the attempt stays running meanwhile
        reported = await worker_reports(h, item.attempt_id, token, executor)
        await run_until(h, run_id, "waiting_approval")
        approval = await only_approval(h, run_id)
        # Asked once the remote call had ended, not while a worker was still running it.
        assert approval.requested_at == reported.finished_at
        await decisions.decide(
            approval.approval_id, Decision.APPROVE, approval.arguments_digest, decided_by="op"
        )
        await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    view = await h.view(run_id)
    assert view.status == "succeeded", view.tasks["a"].error
    waiting = [
        e
        for e in view.events
        if e.type in (EventType.APPROVAL_REQUESTED, EventType.TASK_WAITING_APPROVAL)
    ]
    assert len(waiting) == 2
    finished = reported.finished_at
    assert finished is not None
    assert all(e.occurred_at >= finished for e in waiting)
    journal = await steps(h, run_id)
    assert [(s.request.get("tool"), s.status) for s in journal[1:3]] == [
        ("search", StepStatus.SUCCEEDED),
        ("deploy", StepStatus.SUCCEEDED),
    ]
    assert journal[1].response == {"output": {"hits": 3}}
    (attempt,) = view.attempts["a"]
    assert attempt.paused_seconds == 0  # approved at once: only waiting for the person pauses


async def test_cancel_while_a_remote_call_runs_before_an_approval_is_asked() -> None:

    h, _ = harness()
    run_id = await h.create(search_and_deploy())
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        h.engine.submit(run_id)
        await worker_claims(h.store, h.clock)
        view = await h.view(run_id)
        assert (view.status, view.tasks["a"].status.value) == ("running", "running")
        await request_cancel(h.store, h.clock, run_id, local_actions=h.engine.local_actions)
        h.engine.notify(run_id)
        await h.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    view = await h.view(run_id)
    assert view.status == "canceled"
    assert view.attempt_statuses("a") == ["canceled"]
    search = (await steps(h, run_id))[1]
    assert (search.status, search.lease_end) == (StepStatus.FAILED, "canceled")
    assert not (await h.store.page_approvals(None, None, 10)).items
    assert "approval.requested" not in view.event_types()


async def test_a_restart_while_the_remote_call_runs_asks_for_the_approval_after_it() -> None:

    h, _ = harness()
    run_id = await h.create(search_and_deploy())
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        h.engine.submit(run_id)
        item, token = await worker_claims(h.store, h.clock)
        tg.cancel_scope.cancel()  # the coordinator stops; the worker goes on
    stopped = await h.view(run_id)
    assert (stopped.status, stopped.attempt_statuses("a")) == ("running", ["running"])
    assert not (await h.store.page_approvals(None, None, 10)).items

    h2, executor2 = harness(h.store, h.clock)
    decisions = ApprovalDecisions(h2.store, h2.engine)
    async with anyio.create_task_group() as tg:
        await tg.start(h2.engine.run)
        h2.engine.submit(run_id)
        h.clock.advance(5)
        # Its lease survived the restart: the worker's report is taken.
        reported = await worker_reports(h, item.attempt_id, token, executor2)
        await run_until(h2, run_id, "waiting_approval")
        approval = await only_approval(h2, run_id)
        assert approval.requested_at == reported.finished_at
        await decisions.decide(
            approval.approval_id, Decision.APPROVE, approval.arguments_digest, decided_by="op"
        )
        await h2.engine.wait_finished(run_id)
        tg.cancel_scope.cancel()
    view = await h2.view(run_id)
    assert view.status == "succeeded", view.tasks["a"].error
    assert view.attempt_statuses("a") == ["succeeded"]  # resumed, not interrupted
    journal = await steps(h2, run_id)
    assert [(s.kind, s.status) for s in journal] == [
        (StepKind.MODEL_CALL, StepStatus.SUCCEEDED),
        (StepKind.TOOL_CALL, StepStatus.SUCCEEDED),
        (StepKind.TOOL_CALL, StepStatus.SUCCEEDED),
        (StepKind.MODEL_CALL, StepStatus.SUCCEEDED),
    ]
    assert journal[2].response == {"output": {"deployed": True}}
