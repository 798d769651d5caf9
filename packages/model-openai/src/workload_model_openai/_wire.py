"""The Chat Completions wire format: neutral messages out, a checked answer back in.

Pure functions, no I/O. Outgoing, the port's :class:`~workload_domain.agent.llm.Message` and
:class:`~workload_domain.agent.llm.ToolSchema` become the OpenAI client's typed parameters
(``system``/``user``/``assistant``/``tool`` messages; ``function`` tools). Incoming, the body of
a 200 is read as plain JSON and checked field by field, because OpenAI-compatible servers differ
and the client's own models do not validate: anything that is not a chat completion raises
:class:`MalformedAnswer`, which the adapter reports as ``model_unavailable``.
"""

from __future__ import annotations

import json
from typing import Any

from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
)

from workload_domain.agent.adapters import (
    MalformedAnswer,
    body_object,
    json_object,
    optional_string,
    token_count,
)
from workload_domain.agent.llm import (
    Message,
    ModelResponse,
    Role,
    TokenUsage,
    ToolCall,
    ToolSchema,
)
from workload_domain.jsonvalues import strict_loads

__all__ = ["MalformedAnswer", "arguments_text", "parse_answer", "wire_messages", "wire_tools"]


def arguments_text(arguments: Any) -> str:
    """The ``arguments`` text of a tool call the model made, to send back to it.

    A string is sent as it is: it is the raw text of arguments that were not JSON (kept so
    that the model sees what it wrote). Any other value is sent as compact JSON. (A model
    whose arguments were a JSON *string* thus gets the string back without its quotes; the
    runtime answers such a call with an error anyway.)
    """
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def _wire_tool_call(call: ToolCall) -> ChatCompletionMessageFunctionToolCallParam:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments_text(call.arguments)},
    }


def _wire_message(message: Message) -> ChatCompletionMessageParam:
    # Only an assistant message may have no content (when it calls tools); the other roles
    # require a string, so a missing one is sent empty.
    text = message.content or ""
    if message.role is Role.SYSTEM:
        return {"role": "system", "content": text}
    if message.role is Role.USER:
        return {"role": "user", "content": text}
    if message.role is Role.TOOL:
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": text}
    assistant: ChatCompletionAssistantMessageParam = {
        "role": "assistant",
        "content": message.content,
    }
    if message.tool_calls:
        assistant["tool_calls"] = [_wire_tool_call(c) for c in message.tool_calls]
    return assistant


def wire_messages(messages: tuple[Message, ...]) -> list[ChatCompletionMessageParam]:
    """The conversation as Chat Completions messages, in order."""
    return [_wire_message(m) for m in messages]


def wire_tools(tools: tuple[ToolSchema, ...]) -> list[ChatCompletionFunctionToolParam]:
    """The tools as Chat Completions ``function`` tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            },
        }
        for t in tools
    ]


def _decode_arguments(raw: Any) -> Any:
    # The wire format says a JSON text; some servers send the object itself, kept as it is.
    if not isinstance(raw, str):
        return raw
    try:
        # Strictly: a key given twice, NaN or 1e999 would otherwise be decoded into arguments
        # the model never wrote (the last value, null), valid enough to run.
        return strict_loads(raw)
    except (ValueError, RecursionError):  # kept as text: refused to the model
        return raw


def _tool_call(raw: Any, index: int) -> ToolCall:
    where = f"choices[0].message.tool_calls[{index}]"
    call = json_object(raw, where)
    function = json_object(call.get("function"), f"{where}.function")
    call_id = call.get("id", "")
    if call_id is None:
        call_id = ""  # some local servers send no ids: the runtime names such calls
    if not isinstance(call_id, str):
        raise MalformedAnswer(f"{where}.id is not a string")
    name = function.get("name")
    if not isinstance(name, str):
        raise MalformedAnswer(f"{where}.function.name is not a string")
    return ToolCall(call_id, name, _decode_arguments(function.get("arguments")))


def parse_answer(body: bytes) -> ModelResponse:
    """The response in the body of a 200 to ``POST /chat/completions``.

    Reads ``choices[0].message`` (``content``, ``tool_calls``), ``choices[0].finish_reason``
    (``"stop"``, or ``"tool_calls"`` when it calls tools, if the server sends none) and
    ``usage`` (``prompt_tokens``/``completion_tokens``; 0 when absent).

    Raises:
        MalformedAnswer: the body is not JSON or not a chat completion. Its message names the
            faulty field and never quotes the body.
    """
    answer = body_object(body)
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices:
        raise MalformedAnswer("it has no choices")
    choice = json_object(choices[0], "choices[0]")
    message = json_object(choice.get("message"), "choices[0].message")
    content = optional_string(message.get("content"), "choices[0].message.content")
    raw_calls = message.get("tool_calls")
    if raw_calls is None:
        raw_calls = []
    if not isinstance(raw_calls, list):
        raise MalformedAnswer("choices[0].message.tool_calls is not a list")
    calls = tuple(_tool_call(raw, i) for i, raw in enumerate(raw_calls))
    finish = optional_string(choice.get("finish_reason"), "choices[0].finish_reason")
    usage = answer.get("usage")
    usage = {} if usage is None else json_object(usage, "usage")
    return ModelResponse(
        content,
        calls,
        TokenUsage(token_count(usage, "prompt_tokens"), token_count(usage, "completion_tokens")),
        finish or ("tool_calls" if calls else "stop"),
    )
