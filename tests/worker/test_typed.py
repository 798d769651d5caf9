"""Typed handlers (SPEC §17): pydantic models in and out, through a worker and the fake server."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

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
