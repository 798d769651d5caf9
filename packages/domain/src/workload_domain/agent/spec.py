"""The input of an ``agent`` task (SPEC §11), validated when a version is created.

An agent task's ``input`` is stored as the user wrote it (like any task input; defaults are
applied when it runs). :func:`agent_problems` reports every problem of it with JSON-Pointer
paths for the compiler; :func:`parse_agent` turns a valid input into an :class:`AgentSpec`.
Tools may name any action: every action other than the built-in ones is remote and is served by
whichever worker declares it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from functools import lru_cache
from typing import Annotated, Any

from pydantic import BaseModel, Field, StringConstraints, ValidationError

from workload_domain.agent.llm import ModelSettings, provider_model, provider_of
from workload_domain.agent.validation import SchemaError, compile_schema
from workload_domain.definition import (
    MAX_ACTION_LENGTH,
    MAX_TIMEOUT_SECONDS,
    STRICT,
    seconds_field,
    validation_problems,
)
from workload_domain.errors import Problem, quoted
from workload_domain.jsonvalues import JsonObject, canonical_json, pointer

__all__ = [
    "AGENT_ACTION",
    "DEFAULT_APPROVAL_TIMEOUT_SECONDS",
    "ENDPOINT_NAME_PATTERN",
    "MAX_APPROVAL_TIMEOUT_SECONDS",
    "MAX_TEXT_LENGTH",
    "MAX_TOOLS",
    "MODEL_PATTERN",
    "AgentSpec",
    "Budget",
    "SamplingSettings",
    "ScriptTurn",
    "ToolSpec",
    "agent_problems",
    "parse_agent",
    "unknown_endpoint",
]

AGENT_ACTION = "agent"
ENDPOINT_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,31}$"
"""A model endpoint's name (``WORKLOAD_MODEL_ENDPOINTS``, SPEC §11)."""
MODEL_PATTERN = r"^(mock|[a-z][a-z0-9_-]{0,31}:[^\s\x00-\x1f\x7f-\x9f]{1,200})$"
"""``mock``, or ``<endpoint>:<model-name>``: a name of visible characters (no space, no C0 or
C1 control)."""
MAX_OUTPUT_TOKENS = 1_000_000
TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
"""What OpenAI-compatible endpoints accept as a function name."""
MAX_TEXT_LENGTH = 100_000
MAX_TOOLS = 128
MAX_SCRIPT_TURNS = 1000
MAX_BUDGET_CALLS = 10_000
DEFAULT_APPROVAL_TIMEOUT_SECONDS = 86400
MAX_APPROVAL_TIMEOUT_SECONDS = 604800

_MODEL = re.compile(MODEL_PATTERN)


class ToolSpec(BaseModel):
    """A tool the model may call: an action executed with the call's arguments as input."""

    model_config = STRICT

    name: Annotated[str, StringConstraints(pattern=TOOL_NAME_PATTERN)]
    action: str = Field(min_length=1, max_length=MAX_ACTION_LENGTH)
    description: str = Field(default="", max_length=MAX_TEXT_LENGTH)
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    """The JSON Schema the arguments must satisfy (they are a JSON object)."""
    requires_approval: bool = False
    approval_timeout_seconds: float = seconds_field(
        DEFAULT_APPROVAL_TIMEOUT_SECONDS, MAX_APPROVAL_TIMEOUT_SECONDS
    )


class Budget(BaseModel):
    """Limits checked before every step; a refusal fails the attempt ``budget_exceeded``."""

    model_config = STRICT

    max_model_calls: int = Field(default=50, ge=0, le=MAX_BUDGET_CALLS)
    max_tool_calls: int = Field(default=50, ge=0, le=MAX_BUDGET_CALLS)
    max_input_tokens: int | None = Field(default=None, ge=0)
    max_output_tokens: int | None = Field(default=None, ge=0)
    max_seconds: float = seconds_field(600, MAX_TIMEOUT_SECONDS)


class SamplingSettings(BaseModel):
    """``model_settings``: how the model samples; an unset one is the provider's default."""

    model_config = STRICT

    temperature: float | None = Field(default=None, ge=0, le=2, allow_inf_nan=False)
    max_output_tokens: int | None = Field(default=None, ge=1, le=MAX_OUTPUT_TOKENS)
    top_p: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)

    def port(self) -> ModelSettings:
        """The settings as the model port carries them."""
        return ModelSettings(self.temperature, self.max_output_tokens, self.top_p)


class ScriptedCall(BaseModel):
    """A tool call of a mock model's turn; ``arguments`` may be any JSON (to test refusals)."""

    model_config = STRICT

    name: str = Field(max_length=1000)
    arguments: Any = Field(default_factory=dict)


class ScriptTurn(BaseModel):
    """One answer of the mock model: tool calls, or content (or both)."""

    model_config = STRICT

    content: str | None = Field(default=None, max_length=MAX_TEXT_LENGTH)
    tool_calls: list[ScriptedCall] = Field(default_factory=list, max_length=MAX_TOOLS)


class AgentSpec(BaseModel):
    """An agent task's input with every default applied."""

    model_config = STRICT

    model: Annotated[str, StringConstraints(pattern=MODEL_PATTERN)]
    instructions: str = Field(default="", max_length=MAX_TEXT_LENGTH)
    prompt: str = Field(max_length=MAX_TEXT_LENGTH)
    tools: list[ToolSpec] = Field(default_factory=list, max_length=MAX_TOOLS)
    budget: Budget = Field(default_factory=Budget)
    model_settings: SamplingSettings = Field(default_factory=SamplingSettings)
    output_schema: dict[str, Any] | None = None
    script: list[ScriptTurn] | None = Field(default=None, max_length=MAX_SCRIPT_TURNS)

    @property
    def provider_model(self) -> str:
        """The name the provider knows the model by (``gpt-4o`` for ``openai:gpt-4o``)."""
        return provider_model(self.model)

    def tool(self, name: str) -> ToolSpec | None:
        """The tool called ``name`` (None: the task does not list it)."""
        return next((t for t in self.tools if t.name == name), None)


def agent_problems(
    raw: Mapping[str, Any],
    at: tuple[str | int, ...],
    endpoints: Collection[str] | None = None,
) -> list[Problem]:
    """Every problem of an agent task's input ``raw``, with paths under ``at``.

    Field problems come from the model; the checks it cannot express (tool names unique,
    usable JSON Schemas, a script only for the mock model, a configured endpoint) run on
    whatever part of the input is well-formed, so that one answer lists them all.
    ``endpoints`` are the model endpoints configured where the definition is compiled (None:
    not checked, as for a stored version read back).
    """
    problems: list[Problem] = []
    try:
        AgentSpec.model_validate(raw)
    except ValidationError as exc:
        problems.extend(validation_problems(exc, at))
    unknown = unknown_endpoint(raw.get("model"), endpoints)
    if unknown is not None:
        problems.append(Problem(pointer((*at, "model")), unknown))
    tools = raw.get("tools")
    seen: dict[str, int] = {}
    for i, tool in enumerate(tools if isinstance(tools, list) else ()):
        if not isinstance(tool, Mapping):
            continue
        name = tool.get("name")
        if isinstance(name, str):
            if name in seen:
                problems.append(
                    Problem(
                        pointer((*at, "tools", i, "name")),
                        f"duplicate tool name {quoted(name)} (first at tools/{seen[name]})",
                    )
                )
            seen.setdefault(name, i)
        if tool.get("action") == AGENT_ACTION:
            problems.append(
                Problem(pointer((*at, "tools", i, "action")), "an agent cannot be a tool")
            )
        if isinstance(tool.get("parameters"), dict):
            problems.extend(_schema_problems(tool["parameters"], (*at, "tools", i, "parameters")))
    if isinstance(raw.get("output_schema"), dict):
        problems.extend(_schema_problems(raw["output_schema"], (*at, "output_schema")))
    if raw.get("script") is not None and raw.get("model") != "mock":
        problems.append(Problem(pointer((*at, "script")), "only the mock model follows a script"))
    return problems


def unknown_endpoint(model: object, endpoints: Collection[str] | None) -> str | None:
    """Why ``model`` names an endpoint not in ``endpoints`` (None: it does not, or unchecked).

    Only a well-formed ``<endpoint>:<model-name>`` is checked (a malformed one is reported as
    such); ``mock`` needs no endpoint.
    """
    if endpoints is None or not isinstance(model, str) or not _MODEL.fullmatch(model):
        return None
    endpoint = provider_of(model)
    if model == "mock" or endpoint in endpoints:
        return None
    configured = ", ".join(sorted(endpoints)) or "none"
    return (
        f"no model endpoint named {quoted(endpoint)} is configured on this server "
        f"(configured: {configured})"
    )


def parse_agent(raw: Mapping[str, Any]) -> AgentSpec:
    """The spec of a valid agent input (validated when its version was created).

    Raises:
        ValueError: the input is not valid (a version stored before agents were validated).
    """
    return _parse(canonical_json(raw))


@lru_cache(maxsize=256)
def _parse(document: bytes) -> AgentSpec:
    # Keyed by the canonical JSON: every attempt of a task parses the same input once.
    return AgentSpec.model_validate_json(document)


def _schema_problems(schema: JsonObject, at: tuple[str | int, ...]) -> list[Problem]:
    try:
        compile_schema(schema)
    except SchemaError as exc:
        return [Problem(pointer(at), f"not a usable JSON Schema: {exc.message}")]
    return []
