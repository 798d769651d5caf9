"""The Messages API wire format: neutral messages out, a checked answer back in.

Pure functions, no I/O. Outgoing, a :class:`~workload_domain.agent.llm.ModelRequest` becomes the
Anthropic client's typed parameters (:func:`wire_request`):

- ``system`` messages become the top-level ``system`` text (several, in order, joined by a blank
  line); ``user`` and ``assistant`` messages stay messages; an assistant's tool calls become
  ``tool_use`` blocks after its text; ``tool`` messages become ``tool_result`` blocks answering
  the call's id, consecutive ones in one ``user`` message;
- tools become ``tools`` with their parameters as ``input_schema``;
- ``max_tokens`` (required by the API) is the request's ``max_output_tokens``, else
  :data:`DEFAULT_MAX_OUTPUT_TOKENS`; ``temperature`` and ``top_p`` are sent when set;
- an ``output_schema`` is asked for natively with a forced tool (:class:`AnswerTool`).

Incoming, the body of a 200 is read as plain JSON and checked field by field: anything that is
not a message raises :class:`MalformedAnswer`, which the adapter reports as
``model_unavailable``. Text blocks are joined into the content, ``tool_use`` blocks become tool
calls (their ``input`` the arguments), other blocks (thinking) are left out, ``stop_reason``
becomes the finish reason and ``usage`` the token counts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from anthropic.types import (
    MessageParam,
    TextBlockParam,
    ToolChoiceParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
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
    ModelRequest,
    ModelResponse,
    Role,
    TokenUsage,
    ToolCall,
)
from workload_domain.jsonvalues import JsonObject

__all__ = [
    "ANSWER_TOOL",
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "AnswerTool",
    "MalformedAnswer",
    "WireRequest",
    "parse_answer",
    "wire_request",
]

DEFAULT_MAX_OUTPUT_TOKENS = 4096
"""``max_tokens`` when the request sets no ``max_output_tokens``: every Claude model allows it."""
ANSWER_TOOL = "final_answer"
"""The name of the forced tool that carries a structured answer (suffixed if a tool has it)."""
_WRAPPED = "answer"
_DEFINITIONS = ("$defs", "definitions")
"""Where a JSON schema keeps the definitions its references name (2020-12, and draft 7)."""
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
"""``stop_reason`` in the port's (OpenAI's) words; any other reason is kept as it is."""


@dataclass(frozen=True, slots=True)
class AnswerTool:
    """The tool that carries the final answer when the request has an ``output_schema``.

    Its input is the answer. The Messages API takes only object schemas as a tool's input, so
    any other schema (an array, a string, …) is wrapped: ``{"answer": <the schema>}``, and the
    answer is the input's ``answer`` member.
    """

    name: str
    schema: JsonObject
    wrapped: bool

    @classmethod
    def for_request(cls, request: ModelRequest) -> AnswerTool | None:
        """The answer tool of ``request``; None when it has no ``output_schema``."""
        schema = request.output_schema
        if schema is None:
            return None
        taken = {t.name for t in request.tools}
        name, suffix = ANSWER_TOOL, 1
        while name in taken:
            suffix += 1
            name = f"{ANSWER_TOOL}_{suffix}"
        return cls(name, schema, schema.get("type") != "object")

    def tool(self) -> ToolParam:
        """The tool as the model sees it."""
        if self.wrapped:
            # References such as pydantic's ``#/$defs/…`` point from the schema's root: its
            # definitions move up to the wrapper's root, where they still point.
            inner = {k: v for k, v in self.schema.items() if k not in _DEFINITIONS}
            schema: JsonObject = {
                "type": "object",
                "properties": {_WRAPPED: inner},
                "required": [_WRAPPED],
                **{k: v for k, v in self.schema.items() if k in _DEFINITIONS},
            }
            what = f"its `{_WRAPPED}` is your answer"
        else:
            schema, what = self.schema, "its input is your answer"
        return {
            "name": self.name,
            "description": (
                f"Give your final answer with this tool ({what}, in the shape of its schema). "
                "Call it once, when you need no other tool."
            ),
            "input_schema": schema,
        }

    def content(self, arguments: Any) -> str | None:
        """The answer the tool was called with, as JSON text (None: it holds no answer)."""
        if self.wrapped:
            if not isinstance(arguments, dict) or _WRAPPED not in arguments:
                return None
            arguments = arguments[_WRAPPED]
        return json.dumps(arguments, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class WireRequest:
    """A model request as the Messages API's parameters."""

    system: str | None
    messages: list[MessageParam]
    tools: list[ToolParam]
    tool_choice: ToolChoiceParam | None
    max_tokens: int
    sampling: dict[str, float]
    """``temperature`` and ``top_p``, those that are set (sent in the body as they are)."""
    answer: AnswerTool | None


def _tool_input(arguments: Any) -> dict[str, object]:
    # The API takes only an object as a tool_use's input. Claude always sends one; arguments
    # of another shape (from another model of the conversation) are sent wrapped.
    if isinstance(arguments, dict):
        return arguments
    return {"arguments": arguments}


def _assistant(message: Message) -> MessageParam:
    if not message.tool_calls:
        return {"role": "assistant", "content": message.content or ""}
    blocks: list[TextBlockParam | ToolUseBlockParam] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        use: ToolUseBlockParam = {
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": _tool_input(call.arguments),
        }
        blocks.append(use)
    return {"role": "assistant", "content": blocks}


def _tool_result(message: Message) -> ToolResultBlockParam:
    block: ToolResultBlockParam = {"type": "tool_result", "tool_use_id": message.tool_call_id or ""}
    if message.content:
        block["content"] = message.content
    return block


def wire_messages(messages: tuple[Message, ...]) -> tuple[str | None, list[MessageParam]]:
    """The ``system`` text (None: no system message) and the conversation's messages."""
    system: list[str] = []
    wired: list[MessageParam] = []
    results: list[ToolResultBlockParam] = []
    for message in messages:
        if message.role is Role.TOOL:
            results.append(_tool_result(message))
            continue
        if message.role is Role.SYSTEM:  # moved to the top: it splits no run of results
            if message.content:
                system.append(message.content)
            continue
        if results:
            wired.append({"role": "user", "content": results})
            results = []
        if message.role is Role.USER:
            wired.append({"role": "user", "content": message.content or ""})
        else:
            wired.append(_assistant(message))
    if results:
        wired.append({"role": "user", "content": results})
    return ("\n\n".join(system) if system else None), wired


def wire_request(request: ModelRequest) -> WireRequest:
    """The Messages API parameters of ``request`` (see the module)."""
    system, messages = wire_messages(request.messages)
    tools: list[ToolParam] = [
        {"name": t.name, "description": t.description, "input_schema": t.parameters}
        for t in request.tools
    ]
    answer = AnswerTool.for_request(request)
    tool_choice: ToolChoiceParam | None = None
    if answer is not None:
        # Alone, the answer tool is forced; beside real tools the model must call one of them
        # (a real tool to work on, or the answer tool to finish).
        tool_choice = {"type": "any"} if tools else {"type": "tool", "name": answer.name}
        tools.append(answer.tool())
    settings = request.settings
    sampling = {
        name: value
        for name, value in (("temperature", settings.temperature), ("top_p", settings.top_p))
        if value is not None
    }
    return WireRequest(
        system,
        messages,
        tools,
        tool_choice,
        settings.max_output_tokens or DEFAULT_MAX_OUTPUT_TOKENS,
        sampling,
        answer,
    )


def _tool_call(block: dict[str, Any], where: str) -> ToolCall:
    call_id = optional_string(block.get("id"), f"{where}.id") or ""
    name = block.get("name")
    if not isinstance(name, str):
        raise MalformedAnswer(f"{where}.name is not a string")
    return ToolCall(call_id, name, block.get("input"))


def _usage(answer: dict[str, Any]) -> TokenUsage:
    usage = answer.get("usage")
    usage = {} if usage is None else json_object(usage, "usage")
    # Tokens read from or written to the prompt cache are input too (reported apart).
    cached = ("cache_creation_input_tokens", "cache_read_input_tokens")
    return TokenUsage(
        token_count(usage, "input_tokens") + sum(token_count(usage, n) for n in cached),
        token_count(usage, "output_tokens"),
    )


def parse_answer(body: bytes, answer_tool: AnswerTool | None = None) -> ModelResponse:
    """The response in the body of a 200 to ``POST /v1/messages``.

    With ``answer_tool`` (the request had an ``output_schema``), a call of it that comes without
    a real tool call is the final answer: its input, as JSON text, is the content, and the
    finish reason is ``stop``. Beside real tool calls it is dropped (the model answers again
    once the tools have).

    Raises:
        MalformedAnswer: the body is not JSON or not a message. Its message names the faulty
            field and never quotes the body.
    """
    answer = body_object(body)
    blocks = answer.get("content")
    if not isinstance(blocks, list):
        raise MalformedAnswer("it has no content list")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for index, raw in enumerate(blocks):
        where = f"content[{index}]"
        block = json_object(raw, where)
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise MalformedAnswer(f"{where}.text is not a string")
            texts.append(text)
        elif kind == "tool_use":
            calls.append(_tool_call(block, where))
        elif not isinstance(kind, str):
            raise MalformedAnswer(f"{where}.type is not a string")
    stop = optional_string(answer.get("stop_reason"), "stop_reason")
    usage = _usage(answer)
    content = "".join(texts) if texts else None
    finish = _FINISH.get(stop, stop) if stop is not None else None
    if answer_tool is not None:
        answers = [c for c in calls if c.name == answer_tool.name]
        calls = [c for c in calls if c.name != answer_tool.name]
        if answers and not calls:
            # Calling the answer tool is how the model finishes: "stop", unless it was cut.
            finish = "stop" if finish in (None, "tool_calls") else finish
            return ModelResponse(answer_tool.content(answers[0].arguments), (), usage, finish)
    finish = finish or ("tool_calls" if calls else "stop")
    return ModelResponse(content, tuple(calls), usage, finish)
