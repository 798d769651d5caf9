"""Model settings and native structured output reach the fake Anthropic server as the API wants.

Settings: ``max_output_tokens`` is ``max_tokens``; ``temperature`` and ``top_p`` are sent when
set. An ``output_schema`` is a forced tool whose input is the answer (ADR 0028): alone it is
forced by name; beside the task's tools the model must call one tool or the other.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fakes.anthropic_server import FakeAnthropic, Reply, ToolUse
from tests.models_anthropic.conftest import NAME, ask
from workload_domain.agent.llm import Message, ModelSettings, Role, TokenUsage, ToolCall, ToolSchema
from workload_domain.jsonvalues import JsonObject
from workload_model_anthropic import ANSWER_TOOL, DEFAULT_MAX_OUTPUT_TOKENS, AnthropicModels

pytestmark = pytest.mark.anyio

ADD = ToolSchema("add", "Add two numbers.", {"type": "object", "properties": {}})
CITY: JsonObject = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city"],
}


async def sent_for(fake: FakeAnthropic, models: AnthropicModels, **request: Any) -> Any:
    """The body the fake received for one call of ``ask(**request)``."""
    fake.queue(Reply("ok"))
    await models.model(NAME).complete(ask(**request))
    return fake.message_requests[-1].json()


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        pytest.param(ModelSettings(), {"max_tokens": DEFAULT_MAX_OUTPUT_TOKENS}, id="none-set"),
        pytest.param(
            ModelSettings(temperature=0.2, max_output_tokens=300, top_p=0.9),
            {"max_tokens": 300, "temperature": 0.2, "top_p": 0.9},
            id="all-set",
        ),
        pytest.param(
            ModelSettings(temperature=0.0), {"max_tokens": 4096, "temperature": 0.0}, id="zero"
        ),
        pytest.param(
            ModelSettings(temperature=2.0, top_p=1.0),
            {"max_tokens": 4096, "temperature": 2.0, "top_p": 1.0},
            id="upper-bounds",
        ),
        pytest.param(ModelSettings(max_output_tokens=1), {"max_tokens": 1}, id="one-token"),
        pytest.param(
            ModelSettings(max_output_tokens=1_000_000), {"max_tokens": 1_000_000}, id="a-million"
        ),
        pytest.param(
            ModelSettings(top_p=1e-9), {"max_tokens": 4096, "top_p": 1e-9}, id="tiny-top-p"
        ),
    ],
)
async def test_settings_reach_the_server(
    fake_anthropic: FakeAnthropic,
    models: AnthropicModels,
    settings: ModelSettings,
    expected: dict[str, Any],
) -> None:
    sent = await sent_for(fake_anthropic, models, settings=settings)

    sampling = {k: sent[k] for k in ("max_tokens", "temperature", "top_p") if k in sent}
    assert sampling == expected
    assert set(sent) == {"model", "messages", *expected}


async def test_an_output_schema_alone_is_a_forced_answer_tool(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    sent = await sent_for(fake_anthropic, models, output_schema=CITY)

    assert sent["tool_choice"] == {"type": "tool", "name": ANSWER_TOOL}
    (tool,) = sent["tools"]
    assert tool["name"] == ANSWER_TOOL
    assert tool["input_schema"] == CITY
    assert "final answer" in tool["description"]


async def test_beside_the_tasks_tools_the_model_must_call_one_of_them(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    sent = await sent_for(fake_anthropic, models, tools=(ADD,), output_schema=CITY)

    assert sent["tool_choice"] == {"type": "any"}
    assert [t["name"] for t in sent["tools"]] == ["add", ANSWER_TOOL]
    assert sent["tools"][1]["input_schema"] == CITY


async def test_the_answer_tool_never_takes_a_tasks_tool_name(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    taken = tuple(
        ToolSchema(name, "a tool", {"type": "object"})
        for name in (ANSWER_TOOL, f"{ANSWER_TOOL}_2", f"{ANSWER_TOOL}_4")
    )

    sent = await sent_for(fake_anthropic, models, tools=taken, output_schema=CITY)

    names = [t["name"] for t in sent["tools"]]
    assert names == [ANSWER_TOOL, f"{ANSWER_TOOL}_2", f"{ANSWER_TOOL}_4", f"{ANSWER_TOOL}_3"]
    assert sent["tool_choice"] == {"type": "any"}


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param({"type": "array", "items": {"type": "string"}}, id="array"),
        pytest.param({"type": "string", "maxLength": 10}, id="string"),
        pytest.param({"enum": ["yes", "no"]}, id="no-type"),
        pytest.param({"type": ["object", "null"]}, id="type-list"),
        pytest.param({}, id="anything"),
    ],
)
async def test_a_schema_that_is_not_an_object_is_wrapped(
    fake_anthropic: FakeAnthropic, models: AnthropicModels, schema: JsonObject
) -> None:
    sent = await sent_for(fake_anthropic, models, output_schema=schema)

    assert sent["tools"][0]["input_schema"] == {
        "type": "object",
        "properties": {"answer": schema},
        "required": ["answer"],
    }


@pytest.mark.parametrize("key", ["$defs", "definitions"])
async def test_a_wrapped_schema_keeps_its_definitions_at_the_root(
    fake_anthropic: FakeAnthropic, models: AnthropicModels, key: str
) -> None:
    # A list of models (pydantic's RootModel[list[Sub]]) refers to its members' definitions
    # from the schema's root: wrapped, they must stay where the references point.
    schema: JsonObject = {
        "type": "array",
        "items": {"$ref": f"#/{key}/Sub"},
        key: {"Sub": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    }
    sent = await sent_for(fake_anthropic, models, output_schema=schema)

    assert sent["tools"][0]["input_schema"] == {
        "type": "object",
        "properties": {"answer": {"type": "array", "items": {"$ref": f"#/{key}/Sub"}}},
        "required": ["answer"],
        key: {"Sub": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    }


@pytest.mark.parametrize(
    ("schema", "tool_input", "content"),
    [
        pytest.param(
            CITY,
            {"city": "Zürich", "population": 436_000},
            {"city": "Zürich", "population": 436_000},
            id="object",
        ),
        pytest.param({"type": "array"}, {"answer": ["a", "b"]}, ["a", "b"], id="wrapped-array"),
        pytest.param({"type": "integer"}, {"answer": 0}, 0, id="wrapped-zero"),
        pytest.param({"type": "null"}, {"answer": None}, None, id="wrapped-null"),
    ],
)
async def test_the_answer_tools_input_is_the_content_as_json(
    fake_anthropic: FakeAnthropic,
    models: AnthropicModels,
    schema: JsonObject,
    tool_input: Any,
    content: Any,
) -> None:
    counts = {"input_tokens": 30, "output_tokens": 12}
    fake_anthropic.queue(Reply(tool_uses=[ToolUse(ANSWER_TOOL, tool_input)], usage=counts))

    response = await models.model(NAME).complete(ask(output_schema=schema))

    assert response.content is not None
    assert json.loads(response.content) == content
    assert response.tool_calls == ()
    assert response.finish_reason == "stop"
    assert response.usage == TokenUsage(30, 12)


@pytest.mark.parametrize(
    "tool_input",
    [
        pytest.param({"not_answer": 1}, id="member-missing"),
        pytest.param("text", id="not-an-object"),
    ],
)
async def test_a_wrapped_answer_without_its_member_has_no_content(
    fake_anthropic: FakeAnthropic, models: AnthropicModels, tool_input: Any
) -> None:
    # The runtime then fails the attempt invalid_model_output (the answer is not JSON).
    fake_anthropic.queue(Reply(tool_uses=[ToolUse(ANSWER_TOOL, tool_input)]))

    response = await models.model(NAME).complete(ask(output_schema={"type": "array"}))

    assert (response.content, response.tool_calls) == (None, ())


async def test_an_answer_that_does_not_match_the_schema_is_passed_on_for_the_runtime(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    fake_anthropic.queue(Reply(tool_uses=[ToolUse(ANSWER_TOOL, {"population": "many"})]))

    response = await models.model(NAME).complete(ask(output_schema=CITY))

    assert response.content is not None
    assert json.loads(response.content) == {"population": "many"}


async def test_an_answer_cut_short_keeps_its_finish_reason(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    fake_anthropic.queue(
        Reply(tool_uses=[ToolUse(ANSWER_TOOL, {"city": "Zü"})], stop_reason="max_tokens")
    )

    response = await models.model(NAME).complete(ask(output_schema=CITY))

    assert response.finish_reason == "length"


async def test_real_tool_calls_beside_the_answer_come_first(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    # The model works before it answers: the answer is dropped, the tools run, it answers again.
    fake_anthropic.queue(
        Reply(
            "Adding first.",
            [ToolUse("add", {"a": 1}, id="toolu_1"), ToolUse(ANSWER_TOOL, {"city": "x"})],
        )
    )

    response = await models.model(NAME).complete(ask(tools=(ADD,), output_schema=CITY))

    assert response.tool_calls == (ToolCall("toolu_1", "add", {"a": 1}),)
    assert response.content == "Adding first."
    assert response.finish_reason == "tool_calls"


async def test_without_a_schema_a_tool_called_like_the_answer_tool_is_a_tool_call(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    fake_anthropic.queue(Reply(tool_uses=[ToolUse(ANSWER_TOOL, {"x": 1}, id="toolu_1")]))

    response = await models.model(NAME).complete(ask())

    assert response.tool_calls == (ToolCall("toolu_1", ANSWER_TOOL, {"x": 1}),)


async def test_a_text_answer_despite_the_schema_is_passed_on(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    # A gateway that ignores tool_choice: the runtime validates the text as before.
    fake_anthropic.queue(Reply('{"city": "Bern"}'))

    response = await models.model(NAME).complete(ask(output_schema=CITY))

    assert (response.content, response.finish_reason) == ('{"city": "Bern"}', "stop")


async def test_an_answer_replayed_later_is_plain_text(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    # The answer's message (its JSON as text) is what later requests carry, as with OpenAI.
    fake_anthropic.queue(Reply(tool_uses=[ToolUse(ANSWER_TOOL, {"city": "Bern"})]), Reply("ok"))
    model = models.model(NAME)
    first = await model.complete(ask(output_schema=CITY))

    await model.complete(ask(Message(Role.USER, "hello"), first.message(), output_schema=CITY))

    replayed = fake_anthropic.message_requests[1].json()["messages"][1]
    assert replayed == {"role": "assistant", "content": '{"city": "Bern"}'}
