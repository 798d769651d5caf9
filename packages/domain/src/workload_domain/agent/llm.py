"""The model port (SPEC §11): what the agent runtime sends a language model and gets back.

Only the agent runtime calls models, and only through this port. Messages and tool calls are
neutral values (the adapters translate them to a provider's wire format); a conversation is
fully described by its messages, so replaying a journal rebuilds the exact request.

Adapters raise :class:`ModelUnavailable` for what may succeed later (a 429, a 5xx, a refused
connection, a timeout: the attempt fails ``model_unavailable``, retryable) and
:class:`ModelRejected` for what will not (another 4xx, an unknown model, a mock script that
ran out: ``model_error``, not retryable). Anything else an adapter raises is a bug in it and is
reported as ``model_error`` too.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from workload_domain.jsonvalues import JsonObject

__all__ = [
    "MODEL_ERROR",
    "MODEL_UNAVAILABLE",
    "Message",
    "Model",
    "ModelFailure",
    "ModelRejected",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "ModelUnavailable",
    "Models",
    "Role",
    "TokenUsage",
    "ToolCall",
    "ToolSchema",
    "provider_model",
    "provider_of",
]

MODEL_UNAVAILABLE = "model_unavailable"
MODEL_ERROR = "model_error"


def provider_of(model: str) -> str:
    """The provider of a model name: ``openai`` for ``openai:gpt-4o``, ``mock`` for ``mock``.

    The ``provider`` label of SPEC §12's model metrics.
    """
    return model.partition(":")[0] or "mock"


def provider_model(model: str) -> str:
    """The name the provider knows the model by (``gpt-4o`` for ``openai:gpt-4o``)."""
    return model.partition(":")[2] or model


class Role(enum.StrEnum):
    """Who a message is from."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model asked for.

    ``arguments`` is what the model sent, decoded: a JSON object normally; any other JSON value,
    or the raw text when it was not JSON at all, is kept as it is so that the runtime can tell
    the model what was wrong with it.
    """

    id: str
    name: str
    arguments: Any

    def to_json(self) -> JsonObject:
        """``{"id", "name", "arguments"}``."""
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_json(cls, data: JsonObject) -> ToolCall:
        """The inverse of :meth:`to_json`."""
        return cls(str(data["id"]), str(data["name"]), data.get("arguments"))


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation.

    ``assistant`` messages may carry ``tool_calls``; a ``tool`` message answers the call whose
    id is ``tool_call_id`` with ``content`` (the tool's output as JSON, or ``{"error": …}``).
    """

    role: Role
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    def to_json(self) -> JsonObject:
        """A JSON object with only the fields that apply to the role."""
        data: JsonObject = {"role": self.role.value, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [c.to_json() for c in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        return data

    @classmethod
    def from_json(cls, data: JsonObject) -> Message:
        """The inverse of :meth:`to_json`."""
        return cls(
            Role(data["role"]),
            data.get("content"),
            tuple(ToolCall.from_json(c) for c in data.get("tool_calls", ())),
            data.get("tool_call_id"),
        )


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """A tool as the model sees it: its name, what it does and its arguments' JSON Schema."""

    name: str
    description: str
    parameters: JsonObject

    def to_json(self) -> JsonObject:
        """``{"name", "description", "parameters"}``."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """How the model should sample (SPEC §11 ``model_settings``); None: the provider's default."""

    temperature: float | None = None
    """0–2."""
    max_output_tokens: int | None = None
    """1–1,000,000."""
    top_p: float | None = None
    """(0, 1]."""

    def to_json(self) -> JsonObject:
        """The settings that are set (an empty object when none is)."""
        values = {
            "temperature": self.temperature,
            "max_output_tokens": self.max_output_tokens,
            "top_p": self.top_p,
        }
        return {k: v for k, v in values.items() if v is not None}


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One call: the conversation so far and the tools the model may call.

    ``settings`` are passed to the provider; ``output_schema``, when set, is the JSON Schema the
    final answer must match, which a provider that supports it is asked for natively (OpenAI
    ``response_format`` ``json_schema``, Anthropic a forced tool); the runtime validates the
    answer against it afterwards in any case.
    """

    model: str
    """The provider's model name (for ``openai:gpt-4o`` it is ``gpt-4o``; ``mock`` for mock)."""
    messages: tuple[Message, ...]
    tools: tuple[ToolSchema, ...] = ()
    settings: ModelSettings = field(default_factory=ModelSettings)
    output_schema: JsonObject | None = None

    def to_json(self) -> JsonObject:
        """The request as journaled and hashed (the provider key is never part of it).

        ``settings`` and ``output_schema`` appear only when set, so a request without them
        journals (and hashes) exactly as before they existed: journals replay across upgrades.
        """
        request: JsonObject = {
            "model": self.model,
            "messages": [m.to_json() for m in self.messages],
            "tools": [t.to_json() for t in self.tools],
        }
        settings = self.settings.to_json()
        if settings:
            request["settings"] = settings
        if self.output_schema is not None:
            request["output_schema"] = self.output_schema
        return request


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Tokens one model call consumed, as its provider reports them (0 when it does not)."""

    input_tokens: int = 0
    output_tokens: int = 0

    def to_json(self) -> JsonObject:
        """``{"input_tokens", "output_tokens"}``."""
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """What the model answered: text and/or tool calls, what it cost, and why it stopped."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: TokenUsage = field(default_factory=TokenUsage)
    finish_reason: str = "stop"

    def to_json(self) -> JsonObject:
        """The response as journaled."""
        return {
            "content": self.content,
            "tool_calls": [c.to_json() for c in self.tool_calls],
            "usage": self.usage.to_json(),
            "finish_reason": self.finish_reason,
        }

    @classmethod
    def from_json(cls, data: JsonObject) -> ModelResponse:
        """The inverse of :meth:`to_json`."""
        usage = data.get("usage") or {}
        return cls(
            data.get("content"),
            tuple(ToolCall.from_json(c) for c in data.get("tool_calls", ())),
            TokenUsage(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))),
            str(data.get("finish_reason", "stop")),
        )

    def message(self) -> Message:
        """The assistant message this response adds to the conversation."""
        return Message(Role.ASSISTANT, self.content, self.tool_calls)


class ModelFailure(Exception):
    """A model call that failed; ``code`` and ``retryable`` become the attempt's error."""

    code = MODEL_ERROR
    retryable = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ModelUnavailable(ModelFailure):
    """The model could not answer now (429, 5xx, refused connection, timeout): retryable."""

    code = MODEL_UNAVAILABLE
    retryable = True


class ModelRejected(ModelFailure):
    """The model refused the request (another 4xx, unknown model): not retryable."""

    code = MODEL_ERROR
    retryable = False


class Model(Protocol):
    """One model, ready to be called."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer the conversation; raise a :class:`ModelFailure` when it cannot.

        Cancellation (anyio) must stop the call promptly.
        """
        ...


class Models(Protocol):
    """The registry of model adapters: a model by the name an agent task gives."""

    def model(self, name: str, *, script: Sequence[JsonObject] | None = None) -> Model:
        """The model called ``name`` (``mock``, ``openai:<model>``).

        ``script`` is the mock model's list of turns (SPEC §11). Raises :class:`ModelRejected`
        for a name no adapter serves (or one whose adapter is not configured).
        """
        ...
