"""The Anthropic adapter over real HTTP: what it sends, and what it makes of the answers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.anthropic_server import FakeAnthropic, Raw, Reply, ToolUse
from tests.models_anthropic.conftest import API_KEY, MODEL, NAME, ask
from workload_domain.agent.llm import (
    Message,
    ModelRequest,
    ModelResponse,
    Role,
    TokenUsage,
    ToolCall,
    ToolSchema,
)
from workload_model_anthropic import DEFAULT_MAX_OUTPUT_TOKENS, AnthropicModels

pytestmark = pytest.mark.anyio

SEARCH = ToolSchema(
    "search_docs",
    "Search the documentation.",
    {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)
ADD = ToolSchema("add", "Add two numbers.", {"type": "object", "properties": {}})


def usage(input_tokens: int, output_tokens: int, **cached: int) -> dict[str, int]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens, **cached}


async def test_a_text_answer(fake_anthropic: FakeAnthropic, models: AnthropicModels) -> None:
    fake_anthropic.queue(Reply("Paris.", usage=usage(12, 3)))

    response = await models.model(NAME).complete(ask())

    assert response == ModelResponse("Paris.", (), TokenUsage(12, 3), "stop")
    assert response.message() == Message(Role.ASSISTANT, "Paris.")


async def test_tool_uses_become_tool_calls_with_their_input_as_arguments(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    fake_anthropic.queue(
        Reply(
            "Let me look.",
            [
                ToolUse("search_docs", {"q": "leases", "limit": 3}, id="toolu_a"),
                ToolUse("add", {"a": 1, "b": [2, {"c": None}]}, id="toolu_b"),
            ],
            usage=usage(40, 9),
        )
    )

    response = await models.model(NAME).complete(ask(tools=(SEARCH, ADD)))

    assert response.tool_calls == (
        ToolCall("toolu_a", "search_docs", {"q": "leases", "limit": 3}),
        ToolCall("toolu_b", "add", {"a": 1, "b": [2, {"c": None}]}),
    )
    assert response.content == "Let me look."
    assert response.finish_reason == "tool_calls"
    assert response.usage == TokenUsage(40, 9)


async def test_text_blocks_are_joined_and_other_blocks_left_out(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "redacted_thinking", "data": "xyz"},
        {"type": "text", "text": "The answer "},
        {"type": "some_future_block", "whatever": [1, 2]},
        {"type": "text", "text": "is 4", "citations": None},
    ]
    fake_anthropic.queue(Reply(".", blocks=blocks))

    response = await models.model(NAME).complete(ask())

    assert response.content == "The answer is 4."
    assert response.tool_calls == ()


async def test_only_thinking_means_no_content(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    fake_anthropic.queue(Reply(blocks=[{"type": "thinking", "thinking": "…"}]))

    response = await models.model(NAME).complete(ask())

    assert response.content is None
    assert response.finish_reason == "stop"


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        pytest.param([1, 2], [1, 2], id="array"),
        pytest.param(42, 42, id="number"),
        pytest.param("text", "text", id="string"),
        pytest.param(None, None, id="null"),
        pytest.param({}, {}, id="empty-object"),
    ],
)
async def test_input_that_is_not_an_object_is_kept(
    fake_anthropic: FakeAnthropic, models: AnthropicModels, sent: Any, kept: Any
) -> None:
    # The API always sends an object; a gateway might not. The runtime answers such calls.
    fake_anthropic.queue(Reply(tool_uses=[ToolUse("search_docs", sent, id="toolu_x")]))

    response = await models.model(NAME).complete(ask(tools=(SEARCH,)))

    assert response.tool_calls == (ToolCall("toolu_x", "search_docs", kept),)


@pytest.mark.parametrize("call_id", [b"", b', "id": null', b', "id": ""'])
async def test_a_tool_use_without_an_id_is_kept_for_the_runtime_to_name(
    fake_anthropic: FakeAnthropic, models: AnthropicModels, call_id: bytes
) -> None:
    answer = (
        b'{"type": "message", "content": [{"type": "tool_use"' + call_id + b', "name": "add", '
        b'"input": {}}], "stop_reason": "tool_use"}'
    )
    fake_anthropic.queue(Raw(answer))

    response = await models.model(NAME).complete(ask(tools=(ADD,)))

    assert response.tool_calls == (ToolCall("", "add", {}),)


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        pytest.param("end_turn", "stop", id="end-turn"),
        pytest.param("stop_sequence", "stop", id="stop-sequence"),
        pytest.param("max_tokens", "length", id="max-tokens"),
        pytest.param("model_context_window_exceeded", "length", id="context-window"),
        pytest.param("refusal", "content_filter", id="refusal"),
        pytest.param("pause_turn", "pause_turn", id="pause-turn-kept"),
        pytest.param("something_new", "something_new", id="unknown-kept"),
    ],
)
async def test_the_finish_reason_is_mapped_from_the_stop_reason(
    fake_anthropic: FakeAnthropic, models: AnthropicModels, stop_reason: str, finish: str
) -> None:
    fake_anthropic.queue(Reply("x", stop_reason=stop_reason))

    response = await models.model(NAME).complete(ask())

    assert response.finish_reason == finish


async def test_tool_use_stop_reason_is_tool_calls(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    fake_anthropic.queue(Reply(tool_uses=[ToolUse("add")]))

    response = await models.model(NAME).complete(ask(tools=(ADD,)))

    assert response.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(b'{"content": [{"type": "text", "text": "x"}]}', ("stop", 0, 0), id="bare"),
        pytest.param(
            b'{"content": [{"type": "text", "text": "x"}], "stop_reason": null, "usage": null}',
            ("stop", 0, 0),
            id="nulls",
        ),
        pytest.param(
            b'{"content": [{"type": "text", "text": "x"}], "usage": {"input_tokens": 7}}',
            ("stop", 7, 0),
            id="only-input",
        ),
        pytest.param(
            b'{"content": [{"type": "text", "text": "x"}], "usage": {"output_tokens": 5, '
            b'"cache_creation_input_tokens": null}}',
            ("stop", 0, 5),
            id="only-output",
        ),
    ],
)
async def test_absent_fields_have_defaults(
    fake_anthropic: FakeAnthropic,
    models: AnthropicModels,
    body: bytes,
    expected: tuple[str, int, int],
) -> None:
    fake_anthropic.queue(Raw(body))

    response = await models.model(NAME).complete(ask())

    assert (response.content, response.finish_reason, *response.usage.to_json().values()) == (
        "x",
        *expected,
    )


async def test_cached_input_tokens_count_as_input(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    counts = usage(10, 4, cache_creation_input_tokens=100, cache_read_input_tokens=1000)
    fake_anthropic.queue(Reply("ok", usage=counts))

    response = await models.model(NAME).complete(ask())

    assert response.usage == TokenUsage(1110, 4)


async def test_the_request_body_is_the_messages_translation(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    conversation = (
        Message(Role.SYSTEM, "You are terse."),
        Message(Role.USER, "Search, then add."),
        Message(
            Role.ASSISTANT,
            "I will search first.",
            (
                ToolCall("toolu_1", "search_docs", {"q": "leases"}),
                ToolCall("call_2", "add", "not json"),
                ToolCall("call_3", "add", [1, 2]),
            ),
        ),
        Message(Role.TOOL, '{"hits": 2}', tool_call_id="toolu_1"),
        Message(Role.TOOL, '{"error": "arguments are not a JSON object"}', tool_call_id="call_2"),
        Message(Role.TOOL, None, tool_call_id="call_3"),
        Message(Role.ASSISTANT, None, (ToolCall("toolu_4", "add", {"a": 1}),)),
        Message(Role.TOOL, "3", tool_call_id="toolu_4"),
        Message(Role.ASSISTANT, "Done: 3."),
        Message(Role.SYSTEM, "Be polite."),
        Message(Role.USER, "Thanks."),
    )
    fake_anthropic.queue(Reply("You are welcome."))

    await models.model(NAME).complete(ask(*conversation, tools=(SEARCH, ADD)))

    (sent,) = fake_anthropic.message_requests
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.headers["anthropic-version"]
    assert sent.json() == {
        "model": MODEL,
        "max_tokens": DEFAULT_MAX_OUTPUT_TOKENS,
        "system": "You are terse.\n\nBe polite.",
        "messages": [
            {"role": "user", "content": "Search, then add."},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "I will search first."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "search_docs",
                        "input": {"q": "leases"},
                    },
                    {
                        "type": "tool_use",
                        "id": "call_2",
                        "name": "add",
                        "input": {"arguments": "not json"},
                    },
                    {
                        "type": "tool_use",
                        "id": "call_3",
                        "name": "add",
                        "input": {"arguments": [1, 2]},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"hits": 2}'},
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_2",
                        "content": '{"error": "arguments are not a JSON object"}',
                    },
                    {"type": "tool_result", "tool_use_id": "call_3"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_4", "name": "add", "input": {"a": 1}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_4", "content": "3"}],
            },
            {"role": "assistant", "content": "Done: 3."},
            {"role": "user", "content": "Thanks."},
        ],
        "tools": [
            {
                "name": "search_docs",
                "description": "Search the documentation.",
                "input_schema": SEARCH.parameters,
            },
            {
                "name": "add",
                "description": "Add two numbers.",
                "input_schema": {"type": "object", "properties": {}},
            },
        ],
    }


async def test_a_plain_question_sends_only_what_the_api_requires(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    fake_anthropic.queue(Reply("hi"))

    await models.model(NAME).complete(ask())

    (sent,) = fake_anthropic.message_requests
    assert sent.path == "/v1/messages"
    assert sent.json() == {
        "model": MODEL,
        "max_tokens": DEFAULT_MAX_OUTPUT_TOKENS,
        "messages": [{"role": "user", "content": "hello"}],
    }


async def test_empty_system_messages_send_no_system(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    fake_anthropic.queue(Reply("hi"))

    await models.model(NAME).complete(
        ask(Message(Role.SYSTEM, ""), Message(Role.SYSTEM, None), Message(Role.USER, "hello"))
    )

    assert "system" not in fake_anthropic.message_requests[0].json()


async def test_a_tool_result_then_a_user_message_are_two_user_turns(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    fake_anthropic.queue(Reply("ok"))
    conversation = (
        Message(Role.USER, "go"),
        Message(Role.ASSISTANT, None, (ToolCall("t1", "add", {}),)),
        Message(Role.TOOL, "1", tool_call_id="t1"),
        Message(Role.USER, "and now?"),
    )

    await models.model(NAME).complete(ask(*conversation, tools=(ADD,)))

    messages = fake_anthropic.message_requests[0].json()["messages"]
    assert messages[2:] == [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "1"}]},
        {"role": "user", "content": "and now?"},
    ]


async def test_a_response_replayed_as_a_message_is_sent_back_as_it_came(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    # The runtime appends response.message() to the conversation: the model must see its own
    # text and tool uses again, ids, names and inputs included.
    fake_anthropic.queue(
        Reply(
            "Searching.",
            [ToolUse("search_docs", {"q": "x"}, id="toolu_9"), ToolUse("add", id="toolu_10")],
        ),
        Reply("ok"),
    )
    model = models.model(NAME)
    first = await model.complete(ask(tools=(SEARCH, ADD)))

    await model.complete(ask(Message(Role.USER, "hello"), first.message(), tools=(SEARCH, ADD)))

    replayed = fake_anthropic.message_requests[1].json()["messages"][1]
    assert replayed == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Searching."},
            {"type": "tool_use", "id": "toolu_9", "name": "search_docs", "input": {"q": "x"}},
            {"type": "tool_use", "id": "toolu_10", "name": "add", "input": {}},
        ],
    }


HOSTILE_TEXTS = [
    pytest.param("x" * (4 * 1024 * 1024), id="4-MiB"),
    pytest.param("before\x00after\x00", id="nul-characters"),
    pytest.param("\x01\x07\x1b[31mred\x1b[0m\r\n\t", id="control-characters"),
    pytest.param("Zürich, 東京, مرحبا, 🙂🏳️‍🌈, e\u0301", id="unicode"),
    pytest.param("\u2028\u2029\ufeff\ufffd", id="separators-and-bom"),
    pytest.param('"}]} {"content": []}', id="json-lookalike"),
]


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
async def test_hostile_text_goes_out_unchanged(
    fake_anthropic: FakeAnthropic, models: AnthropicModels, text: str
) -> None:
    fake_anthropic.queue(Reply("ok"))

    await models.model(NAME).complete(ask(Message(Role.SYSTEM, text), Message(Role.USER, text)))

    sent = fake_anthropic.message_requests[0].json()
    assert (sent["system"], sent["messages"][0]["content"]) == (text, text)


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
async def test_hostile_text_comes_back_unchanged(
    fake_anthropic: FakeAnthropic, models: AnthropicModels, text: str
) -> None:
    # The adapter passes what the model said through; the runtime sanitizes before storing.
    fake_anthropic.queue(Reply(text, [ToolUse("search_docs", {"q": text}, id="toolu_1")]))

    response = await models.model(NAME).complete(ask(tools=(SEARCH,)))

    assert response.content == text
    assert response.tool_calls == (ToolCall("toolu_1", "search_docs", {"q": text}),)


async def test_one_client_serves_many_calls_and_models(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    fake_anthropic.queue(Reply("one"), Reply("two"), Reply("three"))
    first, second = models.model(NAME), models.model("claude:other")

    answers = [
        (await first.complete(ask())).content,
        (await second.complete(ModelRequest("other", (Message(Role.USER, "hi"),)))).content,
        (await first.complete(ask())).content,
    ]

    assert answers == ["one", "two", "three"]
    assert [r.json()["model"] for r in fake_anthropic.message_requests] == [MODEL, "other", MODEL]
