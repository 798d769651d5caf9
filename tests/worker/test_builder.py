"""The workflow builder (SPEC §17): every field of §3, §10 and §11 lands in the definition.

Only the worker SDK is needed here; ``tests/authoring`` holds what the builder produces against
the server's compiler (same normalized definition, same hash).
"""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, Field

from workload_worker import (
    Context,
    DefinitionError,
    TaskHandle,
    Tool,
    Worker,
    Workflow,
    agent,
    tool,
)


class FetchIn(BaseModel):
    url: str
    depth: int = Field(default=1, ge=1)


class Page(BaseModel):
    url: str
    text: str


class Verdict(BaseModel):
    ok: bool
    reasons: list[str]


worker = Worker(queues=["etl"])


@worker.action("fetch")
async def fetch(ctx: Context, input: FetchIn) -> Page:
    """Fetch one page."""
    return Page(url=input.url, text="")


@worker.action("summarize")
def summarize(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    return {}


def count(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """Count the words of a text.

    Args:
        ctx: The attempt.
        input: ``{"text": ...}``.
    """
    return {"words": len(input["text"].split())}


worker.action("text.count")(count)

DEFAULT_RETRY = {
    "max_attempts": 1,
    "initial_backoff_seconds": 1,
    "backoff_multiplier": 2,
    "max_backoff_seconds": 60,
}
DEFAULT_TASK = {
    "input": {},
    "depends_on": [],
    "timeout_seconds": 300,
    "retry": DEFAULT_RETRY,
    "queue": "default",
    "heartbeat_timeout_seconds": 30,
    "schedule_to_start_timeout_seconds": None,
}


def only_task(workflow: Workflow) -> dict[str, Any]:
    tasks: list[dict[str, Any]] = workflow.definition()["tasks"]
    return tasks[-1]


def test_the_spec_example_builds_its_definition() -> None:
    etl = Workflow("etl", description="fetch and summarize")
    a = etl.task(
        "fetch", fetch, input={"url": "https://example.org"}, max_attempts=3, timeout_seconds=60
    )
    b = etl.task("summarize", summarize, depends_on=[a], queue="etl")
    c = etl.agent(
        "review",
        model="mock",
        prompt="Review {{upstream.summarize}}",
        tools=[fetch],
        output_type=Verdict,
        depends_on=[b],
    )
    assert [t.key for t in etl.tasks] == ["fetch", "summarize", "review"]
    assert (a.action, b.action, c.action, c.output_type) == ("fetch", "summarize", "agent", Verdict)
    definition = etl.definition()
    assert definition["id"] == "etl"
    assert definition["description"] == "fetch and summarize"
    fetch_task, summarize_task, review = definition["tasks"]
    assert fetch_task == {
        **DEFAULT_TASK,
        "key": "fetch",
        "action": "fetch",
        "input": {"url": "https://example.org"},
        "timeout_seconds": 60,
        "retry": {**DEFAULT_RETRY, "max_attempts": 3},
    }
    assert summarize_task == {
        **DEFAULT_TASK,
        "key": "summarize",
        "action": "summarize",
        "depends_on": ["fetch"],
        "queue": "etl",
    }
    assert review["action"] == "agent"
    assert review["depends_on"] == ["summarize"]
    assert review["input"] == {
        "model": "mock",
        "prompt": "Review {{upstream.summarize}}",
        "tools": [
            {
                "name": "fetch",
                "action": "fetch",
                "description": "Fetch one page.",
                "parameters": FetchIn.model_json_schema(),
                "requires_approval": False,
            }
        ],
        "output_schema": Verdict.model_json_schema(),
    }


# -- every task field (SPEC §3, §10) ---------------------------------------------------------

TASK_FIELDS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("nothing", {}, {}),
    (
        "input",
        {"input": {"n": [1, 2.5, None, True, "x"]}},
        {"input": {"n": [1, 2.5, None, True, "x"]}},
    ),
    ("input-model", {"input": FetchIn(url="u")}, {"input": {"url": "u", "depth": 1}}),
    ("depends_on-keys", {"depends_on": ["first"]}, {"depends_on": ["first"]}),
    ("timeout_seconds", {"timeout_seconds": 12.5}, {"timeout_seconds": 12.5}),
    ("timeout_seconds-integral", {"timeout_seconds": 60.0}, {"timeout_seconds": 60}),
    (
        "retry",
        {"retry": {"max_attempts": 4, "initial_backoff_seconds": 0.5}},
        {"retry": {**DEFAULT_RETRY, "max_attempts": 4, "initial_backoff_seconds": 0.5}},
    ),
    ("max_attempts", {"max_attempts": 5}, {"retry": {**DEFAULT_RETRY, "max_attempts": 5}}),
    (
        "initial_backoff_seconds",
        {"initial_backoff_seconds": 2.0},
        {"retry": {**DEFAULT_RETRY, "initial_backoff_seconds": 2}},
    ),
    (
        "backoff_multiplier",
        {"backoff_multiplier": 1.5},
        {"retry": {**DEFAULT_RETRY, "backoff_multiplier": 1.5}},
    ),
    (
        "max_backoff_seconds",
        {"max_backoff_seconds": 600},
        {"retry": {**DEFAULT_RETRY, "max_backoff_seconds": 600}},
    ),
    (
        "retry-and-single-fields",
        {"retry": {"max_attempts": 2}, "max_backoff_seconds": 5, "initial_backoff_seconds": 0},
        {
            "retry": {
                **DEFAULT_RETRY,
                "max_attempts": 2,
                "initial_backoff_seconds": 0,
                "max_backoff_seconds": 5,
            }
        },
    ),
    ("queue", {"queue": "gpu"}, {"queue": "gpu"}),
    (
        "heartbeat_timeout_seconds",
        {"heartbeat_timeout_seconds": 5},
        {"heartbeat_timeout_seconds": 5},
    ),
    (
        "schedule_to_start_timeout_seconds",
        {"schedule_to_start_timeout_seconds": 90.0},
        {"schedule_to_start_timeout_seconds": 90},
    ),
    (
        "schedule_to_start_timeout_seconds-none",
        {"schedule_to_start_timeout_seconds": None},
        {"schedule_to_start_timeout_seconds": None},
    ),
    (
        "jsonb-numbers",
        {"input": {"big": 1e20, "zero": -0.0}},
        {"input": {"big": 10**20, "zero": 0.0}},
    ),
]


@pytest.mark.parametrize(
    ("given", "expected"), [(g, e) for _, g, e in TASK_FIELDS], ids=[i for i, _, _ in TASK_FIELDS]
)
def test_every_task_field_lands_in_the_task(
    given: dict[str, Any], expected: dict[str, Any]
) -> None:
    workflow = Workflow("fields")
    workflow.task("first", "mock")
    workflow.task("t", "remote.action", **given)
    assert only_task(workflow) == {
        **DEFAULT_TASK,
        "key": "t",
        "action": "remote.action",
        **expected,
    }


def test_depends_on_takes_handles_and_keys_in_order() -> None:
    workflow = Workflow("deps")
    a = workflow.task("a", "mock")
    workflow.task("b", "mock")
    c = workflow.task("c", "mock", depends_on=["b", a])
    assert isinstance(c, TaskHandle)
    assert (c.workflow_id, c.key) == ("deps", "c")
    assert only_task(workflow)["depends_on"] == ["b", "a"]


def test_a_dependency_on_a_later_key_or_a_cycle_is_left_to_the_server() -> None:
    workflow = Workflow("cycle")
    workflow.task("a", "mock", depends_on=["b"])
    workflow.task("b", "mock", depends_on=["a"])
    assert [t["depends_on"] for t in workflow.definition()["tasks"]] == [["b"], ["a"]]


def test_the_definition_is_a_fresh_copy_with_a_stable_hash() -> None:
    workflow = Workflow("copy")
    workflow.task("a", "mock", input={"nested": {"n": 1}})
    first = workflow.definition()
    before = copy.deepcopy(first)
    first["tasks"][0]["input"]["nested"]["n"] = 2
    assert workflow.definition() == before
    digest = workflow.definition_hash()
    assert digest.startswith("sha256:")
    assert len(digest) == len("sha256:") + 64
    assert workflow.definition_hash() == digest
    workflow.task("b", "mock")
    assert workflow.definition_hash() != digest


# -- agent tasks (SPEC §11) ------------------------------------------------------------------

SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "fetch", "arguments": {"url": "https://example.org", "depth": 2}}]},
    {"content": '{"ok": true, "reasons": ["fine"]}'},
]


def test_every_agent_field_lands_in_the_agent_input() -> None:
    workflow = Workflow("agents")
    handle = workflow.agent(
        "review",
        model="mock",
        prompt="Review {{input.doc}}",
        instructions="Be brief.",
        tools=[
            fetch,
            tool(count, name="words", requires_approval=True, approval_timeout_seconds=60),
            tool("mcp.fs.read", name="read", description="Read a file."),
            {"name": "raw", "action": "search", "parameters": {"type": "object"}},
        ],
        budget={"max_model_calls": 5, "max_tool_calls": 3, "max_seconds": 30},
        model_settings={"temperature": 0.2, "max_output_tokens": 200, "top_p": 0.9},
        output_schema={"type": "object", "required": ["ok"]},
        script=SCRIPT,
        timeout_seconds=120,
        max_attempts=2,
        queue="agents",
    )
    assert handle.output_type is None
    task = only_task(workflow)
    assert task == {
        **DEFAULT_TASK,
        "key": "review",
        "action": "agent",
        "timeout_seconds": 120,
        "retry": {**DEFAULT_RETRY, "max_attempts": 2},
        "queue": "agents",
        "input": {
            "model": "mock",
            "instructions": "Be brief.",
            "prompt": "Review {{input.doc}}",
            "tools": [
                {
                    "name": "fetch",
                    "action": "fetch",
                    "description": "Fetch one page.",
                    "parameters": FetchIn.model_json_schema(),
                    "requires_approval": False,
                },
                {
                    "name": "words",
                    "action": "text.count",
                    "description": inspect.getdoc(count),
                    "parameters": {"type": "object"},
                    "requires_approval": True,
                    "approval_timeout_seconds": 60,
                },
                {
                    "name": "read",
                    "action": "mcp.fs.read",
                    "description": "Read a file.",
                    "parameters": {"type": "object"},
                    "requires_approval": False,
                },
                {"name": "raw", "action": "search", "parameters": {"type": "object"}},
            ],
            "budget": {"max_model_calls": 5, "max_tool_calls": 3, "max_seconds": 30},
            "model_settings": {"temperature": 0.2, "max_output_tokens": 200, "top_p": 0.9},
            "output_schema": {"type": "object", "required": ["ok"]},
            "script": SCRIPT,
        },
    }
    assert agent(model="mock", prompt="p") == {"model": "mock", "prompt": "p"}


def test_a_tool_is_named_after_its_function_and_described_by_its_docstring() -> None:
    entry = tool(count).entry()
    assert (entry["name"], entry["action"]) == ("count", "text.count")
    assert entry["description"].startswith("Count the words of a text.\n\nArgs:")
    assert entry["parameters"] == {"type": "object"}  # a plain-dict handler
    overridden = tool(fetch, name="get", description="Get.", parameters={"type": "object"})
    assert overridden == Tool("get", "fetch", "Get.", {"type": "object"})
    assert tool(fetch, parameters=Page).entry()["parameters"] == Page.model_json_schema()
    assert tool(summarize).entry()["description"] == ""


def test_output_type_sets_the_output_schema_and_the_handle_parses_structured_output() -> None:
    workflow = Workflow("typed")
    handle = workflow.agent("a", model="mock", prompt="p", output_type=Verdict)
    assert only_task(workflow)["input"]["output_schema"] == Verdict.model_json_schema()
    assert handle.output_type is Verdict
    output = {"content": "…", "structured": {"ok": True, "reasons": ["r"]}, "usage": {}}
    assert handle.output_type.model_validate(output["structured"]) == Verdict(
        ok=True, reasons=["r"]
    )


# -- what the builder refuses ----------------------------------------------------------------


def undeclared(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    return input


def served_twice(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    return input


other = Worker()
other.action("one")(served_twice)
other.action("two")(served_twice)
ELSEWHERE = Workflow("elsewhere").task("x", "mock")


class Unbounded(BaseModel):
    """An output type whose schema holds what JSON cannot (an infinite default)."""

    score: float = math.inf


class Unschemable(BaseModel, arbitrary_types_allowed=True):
    """A model pydantic can validate but cannot write a JSON schema for."""

    when: Callable[[], None]


REFUSED: list[tuple[str, Any, type[Exception], str]] = [
    ("unknown-keyword", lambda w: w.task("t", "mock", timeout=3), TypeError, "unknown keyword"),
    (
        "unknown-agent-keyword",
        lambda w: w.agent("t", model="mock", prompt="p", input={}),
        TypeError,
        "unknown keyword",
    ),
    ("duplicate-key", lambda w: w.task("first", "mock"), DefinitionError, "used already"),
    ("undeclared-handler", lambda w: w.task("t", undeclared), DefinitionError, "not declared"),
    (
        "undeclared-tool",
        lambda w: w.agent("t", model="mock", prompt="p", tools=[undeclared]),
        DefinitionError,
        "not declared",
    ),
    ("handler-of-two-actions", lambda w: w.task("t", served_twice), DefinitionError, "several"),
    ("no-input-for-a-model", lambda w: w.task("t", fetch), DefinitionError, "url"),
    (
        "input-model-not-the-handler-s",
        lambda w: w.task("t", fetch, input=Verdict(ok=True, reasons=[])),
        DefinitionError,
        "not a valid FetchIn",
    ),
    (
        "input-not-the-model",
        lambda w: w.task("t", fetch, input={"url": 3}),
        DefinitionError,
        "not a valid FetchIn",
    ),
    (
        "input-not-json",
        lambda w: w.task("t", "m", input={"s": {1, 2}}),
        DefinitionError,
        "not JSON",
    ),
    ("input-not-object", lambda w: w.task("t", "m", input=[1]), DefinitionError, "JSON object"),
    (
        "dependency-elsewhere",
        lambda w: w.task("t", "mock", depends_on=[ELSEWHERE]),
        DefinitionError,
        "same workflow",
    ),
    (
        "depends_on-a-string",
        lambda w: w.task("t", "m", depends_on="first"),
        DefinitionError,
        "list",
    ),
    (
        "retry-field-twice",
        lambda w: w.task("t", "m", retry={"max_attempts": 2}, max_attempts=3),
        TypeError,
        "both",
    ),
    (
        "unknown-retry-field",
        lambda w: w.task("t", "m", retry={"tries": 2}),
        DefinitionError,
        "tries",
    ),
    (
        "unknown-budget-field",
        lambda w: w.agent("t", model="mock", prompt="p", budget={"calls": 1}),
        DefinitionError,
        "calls",
    ),
    (
        "unknown-model-setting",
        lambda w: w.agent("t", model="mock", prompt="p", model_settings={"seed": 1}),
        DefinitionError,
        "seed",
    ),
    (
        "output-type-and-schema",
        lambda w: w.agent("t", model="m", prompt="p", output_type=Verdict, output_schema={}),
        DefinitionError,
        "not both",
    ),
    (
        "output-type-not-a-model",
        lambda w: w.agent("t", model="m", prompt="p", output_type=dict),
        DefinitionError,
        "not a pydantic model",
    ),
    (
        "output-type-schema-not-json",
        lambda w: w.agent("t", model="m", prompt="p", output_type=Unbounded),
        DefinitionError,
        "output_type Unbounded's JSON schema is not JSON",
    ),
    (
        "output-type-without-a-schema",
        lambda w: w.agent("t", model="m", prompt="p", output_type=Unschemable),
        DefinitionError,
        "output_type Unschemable has no JSON schema",
    ),
    (
        "tool-parameters-without-a-schema",
        lambda w: w.agent("t", model="m", prompt="p", tools=[tool("x", parameters=Unschemable)]),
        DefinitionError,
        "parameters Unschemable has no JSON schema",
    ),
    (
        "tool-by-bare-name",
        lambda w: w.agent("t", model="m", prompt="p", tools=["search"]),
        DefinitionError,
        "tool(action, name=...)",
    ),
]


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [(b, e, m) for _, b, e, m in REFUSED],
    ids=[i for i, _, _, _ in REFUSED],
)
def test_the_builder_refuses_what_it_can_know(
    build: Any, error: type[Exception], message: str
) -> None:
    workflow = Workflow("refusals")
    workflow.task("first", "mock")
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        build(workflow)
    assert [t.key for t in workflow.tasks] == ["first"]  # nothing half-added


def test_an_input_its_model_refuses_is_said_without_its_values() -> None:
    # The refusal is printed by `workload workflows apply`: a value may be a secret.
    flow = Workflow("secretive")
    with pytest.raises(DefinitionError) as refused:
        flow.task("t", fetch, input={"url": ["sk-not-to-be-said"]})
    message = str(refused.value)
    assert "not a valid FetchIn: url: " in message
    assert "sk-not-to-be-said" not in message
