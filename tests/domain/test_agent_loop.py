"""The agent loop's functional core (SPEC §11): ``max_seconds`` is checked before tool steps too.

A journal is built the way the runtime builds it: the first model step from the move
:func:`decide` returns for an empty journal, answered with tool calls.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from workload_domain.agent.journal import StepKind, StepRecord, StepStatus
from workload_domain.agent.llm import ModelResponse, ToolCall
from workload_domain.agent.loop import CallModel, CallTools, Fail, decide, sanitized, tool_output
from workload_domain.agent.spec import AgentSpec, parse_agent

AT = datetime(2026, 1, 1, tzinfo=UTC)


def spec(max_seconds: float = 10) -> AgentSpec:
    return parse_agent(
        {
            "model": "mock",
            "prompt": "go",
            "tools": [{"name": "t", "action": "mock"}],
            "budget": {"max_seconds": max_seconds},
        }
    )


def journal(agent: AgentSpec, calls: int, *, running: int = 0, done: int = 0) -> list[StepRecord]:
    """A model step answered with ``calls`` calls of ``t``; ``done`` ended, then ``running``."""
    first = decide(agent, "go", [], elapsed_seconds=0)
    assert isinstance(first, CallModel)
    answer = ModelResponse(None, tuple(ToolCall(f"c{i}", "t", {}) for i in range(calls)))
    steps = [
        StepRecord(
            "r",
            "a",
            1,
            sequence=1,
            kind=StepKind.MODEL_CALL,
            status=StepStatus.SUCCEEDED,
            request=first.journaled,
            request_hash=first.request_hash,
            started_at=AT,
            response=answer.to_json(),
            usage={"input_tokens": 1, "output_tokens": 1},
            finished_at=AT,
        )
    ]
    for index in range(done + running):
        ended = index < done
        steps.append(
            StepRecord(
                "r",
                "a",
                1,
                sequence=2 + index,
                kind=StepKind.TOOL_CALL,
                status=StepStatus.SUCCEEDED if ended else StepStatus.RUNNING,
                request={
                    "tool": "t",
                    "action": "mock",
                    "arguments": {},
                    "model_step": 1,
                    "index": index,
                },
                request_hash="sha256:x",
                started_at=AT,
                response=tool_output({}) if ended else None,
                tool_call_id=f"c{index}",
                finished_at=AT if ended else None,
            )
        )
    return steps


def test_new_tool_calls_are_refused_once_max_seconds_has_passed() -> None:
    agent = spec(max_seconds=10)
    steps = journal(agent, 3)
    allowed = decide(agent, "go", steps, elapsed_seconds=9.99)
    assert isinstance(allowed, CallTools)
    assert [p.index for p in allowed.calls] == [0, 1, 2]
    for elapsed in (10, 11.5):
        refused = decide(agent, "go", steps, elapsed_seconds=elapsed)
        assert isinstance(refused, Fail)
        assert (refused.error.code, refused.error.retryable) == ("budget_exceeded", False)
        assert refused.error.message == "budget exceeded: max_seconds (10) has passed"


def test_a_call_already_begun_is_not_refused_but_the_next_one_is() -> None:
    agent = spec(max_seconds=10)
    # Call 0 ended, call 1 was begun (running at a restart), call 2 was never begun.
    steps = journal(agent, 3, done=1, running=1)
    move = decide(agent, "go", steps, elapsed_seconds=60)
    assert isinstance(move, CallTools)
    assert [(p.index, p.step is not None) for p in move.calls] == [(1, True)]
    finished = replace(
        steps[-1], status=StepStatus.SUCCEEDED, response=tool_output({}), finished_at=AT
    )
    ended = [*steps[:-1], finished]
    after = decide(agent, "go", ended, elapsed_seconds=60)
    assert isinstance(after, Fail)
    assert after.error.message == "budget exceeded: max_seconds (10) has passed"


@pytest.mark.parametrize(
    "given",
    [
        ["call_3_1", "", "x", "x"],  # the id made for the second is the first's
        ["", "call_3_0", "call_3_0"],
        ["a", "a", "a", "call_3_1", "call_3_2"],
        ["", "", ""],
    ],
)
def test_sanitized_tool_call_ids_are_unique_and_keep_the_good_ones(given: list[str]) -> None:
    # Each tool message answers exactly one call: two calls with one id would be two answers
    # to one call (a provider refuses it; a replay cannot tell them apart).
    calls = tuple(ToolCall(call_id, "t", {}) for call_id in given)
    ids = [c.id for c in sanitized(ModelResponse(None, calls), 3).tool_calls]
    assert len(set(ids)) == len(ids)
    # Every good id is kept as it is (the first of a repeated one).
    firsts = [i for i, c in enumerate(given) if c and given.index(c) == i]
    assert all(ids[i] == given[i] for i in firsts)
