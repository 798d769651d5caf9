"""The openai:<model> adapter over real HTTP: what it sends, and what it makes of the answers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.openai_server import Call, FakeOpenAI, Raw, Reply
from tests.models.conftest import API_KEY, MODEL, ask
from workload_domain.agent.llm import (
    Message,
    ModelRequest,
    ModelResponse,
    Role,
    TokenUsage,
    ToolCall,
    ToolSchema,
)
from workload_model_openai import OpenAIModels

pytestmark = pytest.mark.anyio

SEARCH = ToolSchema(
    "search_docs",
    "Search the documentation.",
    {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)
ADD = ToolSchema("add", "Add two numbers.", {"type": "object", "properties": {}})


async def test_a_content_answer(fake_openai: FakeOpenAI, models: OpenAIModels) -> None:
    fake_openai.queue(Reply("Paris.", usage=(12, 3)))

    response = await models.model(f"openai:{MODEL}").complete(ask())

    assert response == ModelResponse("Paris.", (), TokenUsage(12, 3), "stop")
    assert response.message() == Message(Role.ASSISTANT, "Paris.")


async def test_tool_calls_round_trip_with_decoded_arguments(
    fake_openai: FakeOpenAI, models: OpenAIModels
) -> None:
    fake_openai.queue(
        Reply(
            tool_calls=[
                Call("search_docs", {"q": "leases", "limit": 3}, id="call_a"),
                Call("add", {"a": 1, "b": [2, {"c": None}]}, id="call_b"),
            ],
            usage=(40, 9),
        )
    )

    response = await models.model(f"openai:{MODEL}").complete(ask(tools=(SEARCH, ADD)))

    assert response.tool_calls == (
        ToolCall("call_a", "search_docs", {"q": "leases", "limit": 3}),
        ToolCall("call_b", "add", {"a": 1, "b": [2, {"c": None}]}),
    )
    assert response.content is None
    assert response.finish_reason == "tool_calls"
    assert response.usage == TokenUsage(40, 9)


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        pytest.param("[1, 2]", [1, 2], id="json-array"),
        pytest.param("42", 42, id="json-number"),
        pytest.param('"text"', "text", id="json-string"),
        pytest.param("null", None, id="json-null"),
        pytest.param('{"q": "unterminated', '{"q": "unterminated', id="truncated-json"),
        pytest.param("not json at all", "not json at all", id="plain-text"),
        pytest.param("", "", id="empty"),
        pytest.param("[" * 100_000, "[" * 100_000, id="nested-past-the-parser"),
        # Not strict JSON: decoded, they would be arguments the model never wrote (a key's
        # last value, null for NaN), run as if valid. Kept as text, they are refused to it.
        pytest.param(
            '{"q": "delete-all", "q": "safe"}',
            '{"q": "delete-all", "q": "safe"}',
            id="duplicate-key",
        ),
        pytest.param('{"n": NaN}', '{"n": NaN}', id="nan"),
        pytest.param('{"n": -Infinity}', '{"n": -Infinity}', id="infinity"),
        pytest.param('{"n": 1e999}', '{"n": 1e999}', id="out-of-range"),
    ],
)
async def test_arguments_that_are_not_an_object_are_kept(
    fake_openai: FakeOpenAI, models: OpenAIModels, sent: str, kept: Any
) -> None:
    # A string is sent by the fake as it is: the raw arguments text.
    fake_openai.queue(Reply(tool_calls=[Call("search_docs", sent, id="call_x")]))

    response = await models.model(f"openai:{MODEL}").complete(ask(tools=(SEARCH,)))

    assert response.tool_calls == (ToolCall("call_x", "search_docs", kept),)


async def test_arguments_sent_as_an_object_are_kept(
    fake_openai: FakeOpenAI, models: OpenAIModels
) -> None:
    # Some servers send the arguments decoded; the adapter takes them as they are.
    answer = (
        b'{"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": '
        b'[{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '
        b'{"a": 1}}}]}, "finish_reason": "tool_calls"}]}'
    )
    fake_openai.queue(Raw(answer))

    response = await models.model(f"openai:{MODEL}").complete(ask(tools=(ADD,)))

    assert response.tool_calls == (ToolCall("c1", "add", {"a": 1}),)


@pytest.mark.parametrize("call_id", [b"", b', "id": null', b', "id": ""'])
async def test_a_tool_call_without_an_id_is_kept_for_the_runtime_to_name(
    fake_openai: FakeOpenAI, models: OpenAIModels, call_id: bytes
) -> None:
    # Some local servers send no ids; the agent runtime names such calls call_<step>_<n>.
    answer = (
        b'{"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": '
        b'[{"type": "function"' + call_id + b', "function": {"name": "add", "arguments": '
        b'"{}"}}]}, "finish_reason": "tool_calls"}]}'
    )
    fake_openai.queue(Raw(answer))

    response = await models.model(f"openai:{MODEL}").complete(ask(tools=(ADD,)))

    assert response.tool_calls == (ToolCall("", "add", {}),)


@pytest.mark.parametrize(
    ("reply", "finish"),
    [
        pytest.param(Reply("x"), "stop", id="stop"),
        pytest.param(Reply("x", finish_reason="length"), "length", id="length"),
        pytest.param(Reply("x", finish_reason="content_filter"), "content_filter", id="filter"),
        pytest.param(Reply(tool_calls=[Call("add")]), "tool_calls", id="tool-calls"),
    ],
)
async def test_the_finish_reason(
    fake_openai: FakeOpenAI, models: OpenAIModels, reply: Reply, finish: str
) -> None:
    fake_openai.queue(reply)

    response = await models.model(f"openai:{MODEL}").complete(ask())

    assert response.finish_reason == finish


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(b'{"choices": [{"message": {"content": "x"}}]}', ("stop", 0, 0), id="bare"),
        pytest.param(
            b'{"choices": [{"message": {"content": "x"}, "finish_reason": null}], "usage": null}',
            ("stop", 0, 0),
            id="nulls",
        ),
        pytest.param(
            b'{"choices": [{"message": {"content": "x"}}], "usage": {"total_tokens": 9}}',
            ("stop", 0, 0),
            id="only-total",
        ),
        pytest.param(
            b'{"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": 7}}',
            ("stop", 7, 0),
            id="only-prompt",
        ),
    ],
)
async def test_absent_fields_have_defaults(
    fake_openai: FakeOpenAI, models: OpenAIModels, body: bytes, expected: tuple[str, int, int]
) -> None:
    fake_openai.queue(Raw(body))

    response = await models.model(f"openai:{MODEL}").complete(ask())

    assert (response.content, response.finish_reason, *response.usage.to_json().values()) == (
        "x",
        *expected,
    )


async def test_the_request_body_is_the_chat_completions_translation(
    fake_openai: FakeOpenAI, models: OpenAIModels
) -> None:
    conversation = (
        Message(Role.SYSTEM, "You are terse."),
        Message(Role.USER, "Search, then add."),
        Message(
            Role.ASSISTANT,
            None,
            (
                ToolCall("call_1", "search_docs", {"q": "leases"}),
                ToolCall("call_2", "add", "not json"),
                ToolCall("call_3", "add", [1, 2]),
            ),
        ),
        Message(Role.TOOL, '{"hits": 2}', tool_call_id="call_1"),
        Message(Role.TOOL, '{"error": "arguments are not a JSON object"}', tool_call_id="call_2"),
        Message(Role.TOOL, None, tool_call_id="call_3"),
        Message(Role.ASSISTANT, "Done: 3."),
        Message(Role.USER, "Thanks."),
    )
    fake_openai.queue(Reply("You are welcome."))

    await models.model(f"openai:{MODEL}").complete(ask(*conversation, tools=(SEARCH, ADD)))

    (sent,) = fake_openai.chat_requests
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.json() == {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Search, then add."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "search_docs", "arguments": '{"q":"leases"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "add", "arguments": "not json"},
                    },
                    {
                        "id": "call_3",
                        "type": "function",
                        "function": {"name": "add", "arguments": "[1,2]"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"hits": 2}'},
            {
                "role": "tool",
                "tool_call_id": "call_2",
                "content": '{"error": "arguments are not a JSON object"}',
            },
            {"role": "tool", "tool_call_id": "call_3", "content": ""},
            {"role": "assistant", "content": "Done: 3."},
            {"role": "user", "content": "Thanks."},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "search_docs",
                    "description": "Search the documentation.",
                    "parameters": SEARCH.parameters,
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "add",
                    "description": "Add two numbers.",
                    "parameters": {"type": "object", "properties": {}},
                },
            },
        ],
    }


async def test_no_tools_means_no_tools_field(fake_openai: FakeOpenAI, models: OpenAIModels) -> None:
    fake_openai.queue(Reply("hi"))

    await models.model(f"openai:{MODEL}").complete(ask())

    (sent,) = fake_openai.chat_requests
    assert sent.path == "/v1/chat/completions"
    assert sent.json() == {"model": MODEL, "messages": [{"role": "user", "content": "hello"}]}


async def test_a_response_replayed_as_a_message_is_sent_back_as_it_came(
    fake_openai: FakeOpenAI, models: OpenAIModels
) -> None:
    # The runtime appends response.message() to the conversation: the model must see its own
    # tool calls again, ids, names and arguments text included.
    fake_openai.queue(
        Reply(
            tool_calls=[Call("search_docs", '{"q":"x"}', id="c9"), Call("add", "oops", id="c10")]
        ),
        Reply("ok"),
    )
    model = models.model(f"openai:{MODEL}")
    first = await model.complete(ask(tools=(SEARCH, ADD)))

    await model.complete(ask(Message(Role.USER, "hello"), first.message(), tools=(SEARCH, ADD)))

    replayed = fake_openai.chat_requests[1].json()["messages"][1]
    assert replayed["tool_calls"] == [
        {
            "id": "c9",
            "type": "function",
            "function": {"name": "search_docs", "arguments": '{"q":"x"}'},
        },
        {"id": "c10", "type": "function", "function": {"name": "add", "arguments": "oops"}},
    ]


HOSTILE_TEXTS = [
    pytest.param("x" * (4 * 1024 * 1024), id="4-MiB"),
    pytest.param("before\x00after\x00", id="nul-characters"),
    pytest.param("\x01\x07\x1b[31mred\x1b[0m\r\n\t", id="control-characters"),
    pytest.param("Zürich, 東京, مرحبا, 🙂🏳️‍🌈, e\u0301", id="unicode"),
    pytest.param("\u2028\u2029\ufeff\ufffd", id="separators-and-bom"),
    pytest.param('"}]} {"choices": []}', id="json-lookalike"),
]


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
async def test_hostile_text_goes_out_unchanged(
    fake_openai: FakeOpenAI, models: OpenAIModels, text: str
) -> None:
    fake_openai.queue(Reply("ok"))

    await models.model(f"openai:{MODEL}").complete(
        ask(Message(Role.SYSTEM, text), Message(Role.USER, text))
    )

    messages = fake_openai.chat_requests[0].json()["messages"]
    assert [m["content"] for m in messages] == [text, text]


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
async def test_hostile_text_comes_back_unchanged(
    fake_openai: FakeOpenAI, models: OpenAIModels, text: str
) -> None:
    # The adapter passes what the model said through; the runtime sanitizes before storing.
    fake_openai.queue(Reply(text, tool_calls=[Call("search_docs", {"q": text}, id="c1")]))

    response = await models.model(f"openai:{MODEL}").complete(ask(tools=(SEARCH,)))

    assert response.content == text
    assert response.tool_calls == (ToolCall("c1", "search_docs", {"q": text}),)


async def test_one_client_serves_many_calls_and_models(
    fake_openai: FakeOpenAI, models: OpenAIModels
) -> None:
    fake_openai.queue(Reply("one"), Reply("two"), Reply("three"))
    first, second = models.model(f"openai:{MODEL}"), models.model("openai:other")

    answers = [
        (await first.complete(ask())).content,
        (await second.complete(ModelRequest("other", (Message(Role.USER, "hi"),)))).content,
        (await first.complete(ask())).content,
    ]

    assert answers == ["one", "two", "three"]
    assert [r.json()["model"] for r in fake_openai.chat_requests] == [MODEL, "other", MODEL]
