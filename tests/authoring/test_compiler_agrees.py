"""What the builder produces is what the server's compiler normalizes: same JSON, same hash.

The builder (``workload_worker``) has no server dependency: it writes the normalized form
itself. These tests hold it to the compiler's (``workload_domain.compiler``) — for random task
fields, for agents whose tools come from typed handlers, and for the JSON Schemas pydantic
writes (the server compiles them with ``jsonschema-rs``, which must accept them and validate
the arguments a model sends with them).
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Annotated, Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from tests.json_values import json_objects
from workload_domain.agent.spec import ENDPOINT_NAME_PATTERN, SamplingSettings
from workload_domain.agent.validation import compile_schema
from workload_domain.compiler import compile_definition
from workload_domain.definition import QUEUE_PATTERN, TASK_KEY_PATTERN, WORKFLOW_ID_PATTERN
from workload_domain.jsonvalues import canonical_json
from workload_worker import Context, TaskHandle, Worker, Workflow, tool
from workload_worker._agent import MODEL_SETTINGS_FIELDS


def _positive(maximum: float) -> st.SearchStrategy[float]:
    return st.floats(0, maximum, allow_nan=False, allow_infinity=False, exclude_min=True)


_seconds = st.one_of(st.integers(1, 86400), _positive(86400), st.sampled_from([60.0, 0.5, 1e-7]))
_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)


@st.composite
def retry_options(draw: st.DrawFn) -> dict[str, Any]:
    """Some of the retry fields, valid together, given alone or as ``retry=``."""
    low, high = sorted(
        draw(st.lists(st.floats(0, 604800, allow_nan=False), min_size=2, max_size=2))
    )
    chosen: dict[str, Any] = {}
    if draw(st.booleans()):
        chosen["max_attempts"] = draw(st.integers(1, 100))
    if draw(st.booleans()):
        chosen["backoff_multiplier"] = draw(st.sampled_from([1, 1.5, 2.0, 1000]))
    initial, maximum = draw(st.booleans()), draw(st.booleans())
    if initial and maximum:
        chosen |= {"initial_backoff_seconds": low, "max_backoff_seconds": high}
    elif initial:
        chosen["initial_backoff_seconds"] = min(low, 60)  # under the default maximum
    elif maximum:
        chosen["max_backoff_seconds"] = max(high, 1)  # over the default initial
    if draw(st.booleans()) and chosen:
        return {"retry": chosen}
    return chosen


@st.composite
def task_options(draw: st.DrawFn, earlier: list[TaskHandle]) -> dict[str, Any]:
    """Any of the §3/§10 task fields, each with a valid value."""
    options: dict[str, Any] = draw(retry_options())
    if draw(st.booleans()) and earlier:
        chosen = draw(st.lists(st.sampled_from(earlier), unique_by=lambda h: h.key, max_size=3))
        options["depends_on"] = [h if draw(st.booleans()) else h.key for h in chosen]
    if draw(st.booleans()):
        options["timeout_seconds"] = draw(_seconds)
    if draw(st.booleans()):
        options["queue"] = draw(st.from_regex(QUEUE_PATTERN, fullmatch=True))
    if draw(st.booleans()):
        options["heartbeat_timeout_seconds"] = draw(
            st.one_of(st.integers(1, 3600), _positive(3600))
        )
    if draw(st.booleans()):
        options["schedule_to_start_timeout_seconds"] = draw(st.none() | _seconds)
    return options


@st.composite
def workflows(draw: st.DrawFn) -> Workflow:
    workflow = Workflow(
        draw(st.from_regex(WORKFLOW_ID_PATTERN, fullmatch=True)),
        description=draw(_text),
    )
    keys = draw(
        st.lists(
            st.from_regex(TASK_KEY_PATTERN, fullmatch=True), min_size=1, max_size=6, unique=True
        )
    )
    for key in keys:
        action = draw(st.sampled_from(["mock", "resize", "text.count"]))
        input = draw(st.none() | json_objects)
        workflow.task(key, action, input=input, **draw(task_options(list(workflow.tasks))))
    return workflow


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workflows())
def test_the_builder_writes_what_the_compiler_normalizes(workflow: Workflow) -> None:
    definition = workflow.definition()
    compiled = compile_definition(definition)
    assert compiled.document() == definition
    assert compiled.canonical == canonical_json(definition)  # 1 and 1.0 differ here
    assert compiled.definition_hash == workflow.definition_hash()


# -- agents from typed handlers ---------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: float
    y: float


class Circle(BaseModel):
    kind: Literal["circle"]
    radius: float = Field(gt=0)


class Square(BaseModel):
    kind: Literal["square"]
    side: float


class Node(BaseModel):
    name: str
    children: list[Node] = []


class Everything(BaseModel):
    """Fields of many kinds: what pydantic's JSON Schemas use."""

    text: Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[a-z]+\d*$")]
    count: int = Field(default=1, ge=0, le=10)
    ratio: float | None = None
    color: Color = Color.RED
    mode: Literal["fast", "slow"] = "fast"
    at: datetime | None = None
    points: list[Point] = []
    shape: Annotated[Circle | Square, Field(discriminator="kind")] | None = None
    labels: dict[str, int] = {}
    tree: Node | None = None


class FetchIn(BaseModel):
    url: str
    depth: int = Field(default=1, ge=1, le=5)


class Verdict(BaseModel):
    ok: bool
    reasons: list[str]


worker = Worker()


@worker.action("fetch")
async def fetch(ctx: Context, input: FetchIn) -> dict[str, Any]:
    """Fetch one page."""
    return {"url": input.url}


@worker.action("everything")
def everything(ctx: Context, input: Everything) -> dict[str, Any]:
    return input.model_dump(mode="json")


@worker.action("plain")
def plain(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    return input


def test_an_agent_with_tools_from_typed_handlers_and_an_output_type_compiles() -> None:
    workflow = Workflow("agents")
    first = workflow.task("fetch", fetch, input={"url": "https://example.org"})
    workflow.agent(
        "review",
        model="mock",
        prompt="Review {{upstream.fetch}}",
        instructions="Be brief.",
        tools=[fetch, tool(everything, requires_approval=True), tool(plain, name="echo")],
        budget={"max_model_calls": 4},
        output_type=Verdict,
        script=[
            {"tool_calls": [{"name": "fetch", "arguments": {"url": "u"}}]},
            {"content": '{"ok": true, "reasons": []}'},
        ],
        depends_on=[first],
        max_attempts=2,
    )
    definition = workflow.definition()
    compiled = compile_definition(definition)
    assert compiled.document() == definition
    assert compiled.definition_hash == workflow.definition_hash()
    tools = definition["tasks"][1]["input"]["tools"]
    assert [t["name"] for t in tools] == ["fetch", "everything", "echo"]
    assert tools[1]["parameters"]["$defs"]  # nested models are in $defs, and the server takes it


SCHEMA_CASES: list[tuple[str, type[BaseModel], dict[str, Any], dict[str, Any]]] = [
    ("flat", FetchIn, {"url": "https://example.org", "depth": 2}, {"url": 3}),
    ("bounds", FetchIn, {"url": "u"}, {"url": "u", "depth": 6}),
    (
        "nested-and-enums",
        Everything,
        {"text": "abc1", "color": "blue", "mode": "slow", "points": [{"x": 1, "y": 2.5}]},
        {"text": "abc", "color": "green"},
    ),
    ("pattern", Everything, {"text": "abc"}, {"text": "ABC"}),
    (
        "discriminated-union",
        Everything,
        {"text": "a", "shape": {"kind": "circle", "radius": 1}},
        {"text": "a", "shape": {"kind": "circle", "radius": -1}},
    ),
    (
        "recursive",
        Everything,
        {"text": "a", "tree": {"name": "r", "children": [{"name": "c"}]}},
        {"text": "a", "tree": {"name": "r", "children": [{"children": []}]}},
    ),
    ("datetime-and-maps", Everything, {"text": "a", "at": None, "labels": {"a": 1}}, {"labels": 1}),
    ("output-type", Verdict, {"ok": True, "reasons": ["fine"]}, {"reasons": [1]}),
]


@pytest.mark.parametrize(
    ("model", "good", "bad"),
    [(m, g, b) for _, m, g, b in SCHEMA_CASES],
    ids=[i for i, _, _, _ in SCHEMA_CASES],
)
def test_the_server_validates_tool_arguments_with_the_models_schema(
    model: type[BaseModel], good: dict[str, Any], bad: dict[str, Any]
) -> None:
    """What the server lets through to the handler, the handler's model takes, and vice versa."""
    schema = compile_schema(model.model_json_schema())
    assert schema.errors(good) == []
    model.model_validate(good)
    assert schema.errors(bad) != []
    with pytest.raises(ValueError, match="validation error"):
        model.model_validate(bad)


# -- model settings and endpoints (SPEC §11, amended) ------------------------------------------


_settings = st.fixed_dictionaries(
    {},
    optional={
        "temperature": st.one_of(st.integers(0, 2), st.floats(0, 2, allow_nan=False)),
        "max_output_tokens": st.integers(1, 1_000_000),
        "top_p": st.one_of(st.just(1), _positive(1)),
    },
)


@settings(max_examples=100, deadline=None)
@given(model_settings=_settings, endpoint=st.from_regex(ENDPOINT_NAME_PATTERN, fullmatch=True))
def test_model_settings_and_endpoint_models_compile_as_the_builder_writes_them(
    model_settings: dict[str, Any], endpoint: str
) -> None:
    workflow = Workflow("settings")
    workflow.agent("a", model=f"{endpoint}:some-model", prompt="p", model_settings=model_settings)
    definition = workflow.definition()
    compiled = compile_definition(definition, endpoints=frozenset({endpoint}))
    assert compiled.document() == definition
    assert compiled.definition_hash == workflow.definition_hash()
    assert definition["tasks"][0]["input"]["model_settings"] == model_settings


def test_the_builder_knows_the_model_settings_the_server_knows() -> None:
    assert set(MODEL_SETTINGS_FIELDS) == set(SamplingSettings.model_fields)
