"""Typed handlers (SPEC §17): pydantic models in and out, through a worker and the fake server."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import pytest
from pydantic import BaseModel, Field

from tests.worker.conftest import MakeWorker, eventually, serving
from tests.worker.fake_server import FakeControlPlane
from workload_worker import INVALID_INPUT, Context, InvalidInput, Workflow, tool
from workload_worker._typed import typed_handler

if TYPE_CHECKING:
    from workload_worker import JsonObject

pytestmark = pytest.mark.anyio


class FetchIn(BaseModel):
    url: str
    depth: int = Field(default=1, ge=1, le=5)


class Page(BaseModel):
    url: str
    depth: int
    fetched_at: datetime


class Words(BaseModel):
    words: int


WHEN = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def test_typed_handlers_get_their_model_and_return_one_as_json(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker()
    seen: list[object] = []

    @worker.action("fetch")
    async def fetch(ctx: Context, input: FetchIn) -> Page:
        seen.append(input)
        return Page(url=input.url, depth=input.depth, fetched_at=WHEN)

    @worker.action("count")
    def count(ctx: Context, input: FetchIn) -> Words:
        seen.append((threading.get_ident() != main, input))
        return Words(words=len(input.url))

    main = threading.get_ident()
    a = fake.add("fetch", {"url": "https://example.org"})
    b = fake.add("count", {"url": "abc", "depth": 2})
    async with serving(worker):
        await eventually(lambda: fake.recorded(a.attempt_id) and fake.recorded(b.attempt_id))
    assert seen[0] == FetchIn(url="https://example.org", depth=1)
    assert seen[1] == (True, FetchIn(url="abc", depth=2))  # a sync one, in a thread
    assert a.output == {
        "url": "https://example.org",
        "depth": 1,
        "fetched_at": "2026-12-01T12:00:00Z",
    }
    assert b.output == {"words": 3}
    # The function stays what it was: callable with the model, e.g. in the user's tests.
    assert count(Context.standalone(), FetchIn(url="four")) == Words(words=4)


BAD_INPUTS = [
    ("missing-field", {}, "url: Field required"),
    ("wrong-type", {"url": 3}, "url: Input should be a valid string"),
    ("out-of-range", {"url": "u", "depth": 9}, "depth: Input should be less than or equal to 5"),
]


@pytest.mark.parametrize(
    ("given", "message"), [(g, m) for _, g, m in BAD_INPUTS], ids=[i for i, _, _ in BAD_INPUTS]
)
@pytest.mark.parametrize("is_async", [True, False], ids=["async", "sync"])
async def test_input_that_is_not_the_model_fails_invalid_input_not_retryable(
    fake: FakeControlPlane,
    make_worker: MakeWorker,
    given: dict[str, Any],
    message: str,
    is_async: bool,
) -> None:
    worker = make_worker()
    called: list[FetchIn] = []

    async def fetch_async(ctx: Context, input: FetchIn) -> JsonObject:
        called.append(input)
        return {}

    def fetch_sync(ctx: Context, input: FetchIn) -> JsonObject:
        called.append(input)
        return {}

    worker.action("fetch")(fetch_async if is_async else fetch_sync)
    attempt = fake.add("fetch", {**given, "secret": "s3cr3t-value"})
    async with serving(worker):
        report = await eventually(lambda: fake.recorded(attempt.attempt_id))
    assert called == []  # the handler never ran
    assert report.route == "fail"
    error = report.body["error"]
    assert error["code"] == INVALID_INPUT
    assert error["retryable"] is False  # the task fails at once, whatever its retry policy
    assert error["message"].startswith("the input is not a valid FetchIn: ")
    assert message in error["message"]
    assert "s3cr3t" not in error["message"]  # values are not echoed


def test_invalid_input_carries_pydantic_s_errors_without_values() -> None:
    def fetch(ctx: Context, input: FetchIn) -> JsonObject:
        return {}

    typed = typed_handler(fetch, "fetch-errors", is_async=False)
    with pytest.raises(InvalidInput) as raised:
        typed(Context.standalone(), {"url": ["secret"]})
    error = raised.value
    assert error.code == INVALID_INPUT
    assert [(e["loc"], e["type"]) for e in error.errors] == [(("url",), "string_type")]
    assert all("input" not in e for e in error.errors)


async def test_plain_and_unresolvable_annotations_pass_dicts(
    fake: FakeControlPlane, make_worker: MakeWorker, caplog: pytest.LogCaptureFixture
) -> None:
    class Local(BaseModel):  # local to this function: a string annotation cannot find it
        url: str

    worker = make_worker()
    seen: list[object] = []

    @worker.action("local")
    async def local(ctx: Context, input: Local) -> JsonObject:
        seen.append(input)
        return {"n": 1}

    @worker.action("untyped")
    async def untyped(ctx, input):  # type: ignore[no-untyped-def]
        seen.append(input)
        return {"n": 2}

    a = fake.add("local", {"url": "u"})
    b = fake.add("untyped", {"x": 1})
    with caplog.at_level(logging.WARNING, logger="workload.worker"):
        async with serving(worker):
            await eventually(lambda: fake.recorded(a.attempt_id) and fake.recorded(b.attempt_id))
    assert seen == [{"url": "u"}, {"x": 1}]
    assert (a.output, b.output) == ({"n": 1}, {"n": 2})
    assert "action 'local': its input annotation 'Local' does not resolve" in caplog.text


def _annotated(ctx: Context, input: Annotated[FetchIn, Field(description="what")]) -> JsonObject:
    return {"url": input.url}


def _optional(ctx: Context, input: FetchIn | None) -> JsonObject:
    assert input is not None
    return {"url": input.url}


def _optional_annotated(ctx: Context, input: Optional[Annotated[FetchIn, "x"]]) -> JsonObject:  # noqa: UP045 - the spelling under test
    assert input is not None
    return {"url": input.url}


@pytest.mark.parametrize("handler", [_annotated, _optional, _optional_annotated])
def test_a_model_inside_annotated_or_optional_is_the_input_model(
    handler: Callable[..., JsonObject],
) -> None:
    # SPEC §17: a handler annotated with a pydantic model gets its input validated into it,
    # and an agent's tool has the model's schema as its parameters — however it is spelled.
    typed = typed_handler(handler, "fetch", is_async=False)
    assert typed.input_model is FetchIn
    assert typed(Context.standalone(), {"url": "u"}) == {"url": "u"}
    with pytest.raises(InvalidInput, match="not a valid FetchIn"):
        typed(Context.standalone(), {"nope": 1})


async def test_a_tool_call_s_arguments_from_the_mock_script_reach_the_handler_as_its_model(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker()
    received: list[FetchIn] = []

    @worker.action("fetch")
    async def fetch(ctx: Context, input: FetchIn) -> Page:
        """Fetch one page."""
        received.append(input)
        return Page(url=input.url, depth=input.depth, fetched_at=WHEN)

    arguments = {"url": "https://example.org/a", "depth": 3}
    workflow = Workflow("review")
    workflow.agent(
        "review",
        model="mock",
        prompt="p",
        tools=[tool(fetch, name="get_page")],
        script=[{"tool_calls": [{"name": "get_page", "arguments": arguments}]}, {"content": "ok"}],
    )
    agent_input = workflow.definition()["tasks"][0]["input"]
    (entry,) = agent_input["tools"]
    sent = agent_input["script"][0]["tool_calls"][0]
    # The schema the server checks the arguments against is the model's: what it takes, the
    # model takes (the server-side JSON Schema check is in tests/authoring).
    assert entry["parameters"] == FetchIn.model_json_schema()
    assert set(sent["arguments"]) <= set(entry["parameters"]["properties"])
    assert set(entry["parameters"]["required"]) <= set(sent["arguments"])
    call = fake.add(entry["action"], sent["arguments"], kind="tool_call", tool_call_id="call-1")
    async with serving(worker):
        await eventually(lambda: fake.recorded(call.attempt_id))
    assert received == [FetchIn(**arguments)]
    assert call.output == {
        "url": "https://example.org/a",
        "depth": 3,
        "fetched_at": "2026-12-01T12:00:00Z",
    }


class Lookup(BaseModel):
    user_id: int = Field(alias="userId")
    tags: set[str] = Field(default_factory=set)


class Found(BaseModel):
    page_count: int = Field(alias="pageCount")
    labels: frozenset[str]


async def test_models_cross_the_wire_by_alias_as_their_schemas_say(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker()

    @worker.action("lookup")
    def lookup(ctx: Context, input: Lookup) -> Found:
        """Look a user up."""
        return Found(pageCount=input.user_id, labels=frozenset(input.tags))

    workflow = Workflow("aliases")
    # The handler's own model as a task's input: dumped as its schema names it, so the handler
    # validates what the definition holds.
    workflow.task("t", lookup, input=Lookup(userId=7, tags={"b", "a"}))
    workflow.agent("a", model="mock", prompt="p", tools=[lookup], output_type=Found)
    task, agent = workflow.definition()["tasks"]
    assert task["input"] == {"userId": 7, "tags": ["a", "b"]}
    assert "userId" in agent["input"]["tools"][0]["parameters"]["properties"]
    assert "pageCount" in agent["input"]["output_schema"]["properties"]

    attempt = fake.add("lookup", task["input"])
    async with serving(worker):
        await eventually(lambda: fake.recorded(attempt.attempt_id))
    # What the handler returns is dumped by alias too: what its output schema says.
    assert attempt.output == {"pageCount": 7, "labels": ["a", "b"]}
    assert set(attempt.output) == set(Found.model_json_schema()["properties"])


SETS_MODULE = """
from pydantic import BaseModel
from workload_worker import Context, Worker, Workflow

class Tagged(BaseModel):
    tags: set[str] = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}
    nested: list[frozenset[int]] = [frozenset({3, 1, 2}), frozenset({30, 10, 20})]

worker = Worker(queues=["etl"])

@worker.action("tag")
def tag(ctx: Context, input: Tagged) -> dict:
    return {}

workflow = Workflow("sets")
workflow.task("t", tag, input=Tagged())
print(workflow.definition_hash(), workflow.definition()["tasks"][0]["input"])
"""


def test_a_definition_built_from_a_model_with_sets_hashes_alike_in_every_process(
    tmp_path: Path,
) -> None:
    (tmp_path / "tagged.py").write_text(SETS_MODULE)
    printed = {
        subprocess.run(
            [sys.executable, "-c", "import tagged"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(tmp_path)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(1, 6)
    }
    assert len(printed) == 1, printed  # one hash, whatever order the process's sets iterate in
    (line,) = printed
    assert "['alpha', 'beta', 'delta', 'epsilon', 'gamma', 'zeta']" in line
    assert "[[1, 2, 3], [10, 20, 30]]" in line


def test_an_annotation_that_resolves_later_is_looked_up_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    module: dict[str, Any] = {}
    # A module whose model is defined below a workflow that already used the handler.
    exec(  # the test's own fixed source
        "from __future__ import annotations\n"
        "def later(ctx, input: Later) -> dict:\n"
        "    return {'got': type(input).__name__}\n",
        module,
    )
    typed = typed_handler(module["later"], "later", is_async=False)

    def resolved() -> type[BaseModel] | None:
        return typed.input_model  # looked up at each read

    with caplog.at_level(logging.WARNING, logger="workload.worker"):
        assert resolved() is None
        assert typed(Context.standalone(), {"url": 3}) == {"got": "dict"}
        assert resolved() is None
    assert caplog.text.count("its input annotation 'Later' does not resolve") == 1  # once
    module["Later"] = FetchIn  # its class statement ran
    assert resolved() is FetchIn
    assert typed(Context.standalone(), {"url": "u"}) == {"got": "FetchIn"}
    with pytest.raises(InvalidInput):
        typed(Context.standalone(), {"url": 3})


class Tag(BaseModel, frozen=True):
    name: str


class Tagged(BaseModel):
    tags: set[Tag]


def test_a_set_of_models_is_dumped_as_json_dumps_it() -> None:
    # A set of (hashable) models cannot be dumped in Python mode (pydantic makes its members
    # dicts): it is dumped as JSON mode dumps it, never a TypeError.
    workflow = Workflow("tagged")
    workflow.task("t", "mock", input=Tagged(tags={Tag(name="a")}))
    assert workflow.definition()["tasks"][0]["input"] == {"tags": [{"name": "a"}]}
