"""The input of an ``agent`` task (SPEC §11), built from handlers and pydantic models.

:func:`agent` returns the agent input as JSON; ``Workflow.agent(key, ...)`` is
``Workflow.task(key, "agent", input=agent(...), ...)``. A tool is a declared handler (named
after its function, its parameters the JSON Schema of its input model, its description its
docstring), a :func:`tool` to override any of that, or a tool entry written out as a mapping
(e.g. one printed by ``workload mcp tools``). ``output_type=`` a model sets ``output_schema``;
the task's output then carries ``structured``, which ``output_type.model_validate`` parses.
Fields not given are left out: the server applies their defaults when the agent runs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic import BaseModel

from workload_worker._plain import json_copy, schema_of
from workload_worker._typed import action_of
from workload_worker.errors import DefinitionError

__all__ = ["AGENT_ACTION", "Tool", "ToolLike", "agent", "tool"]

AGENT_ACTION = "agent"
BUDGET_FIELDS = frozenset(
    {"max_model_calls", "max_tool_calls", "max_input_tokens", "max_output_tokens", "max_seconds"}
)
MODEL_SETTINGS_FIELDS = frozenset({"temperature", "max_output_tokens", "top_p"})


@dataclass(frozen=True, slots=True)
class Tool:
    """One entry of an agent's ``tools``: a name the model calls, the action that runs it.

    Attributes:
        name: What the model calls (``^[A-Za-z0-9_-]{1,64}$``).
        action: The action a worker runs with the call's arguments as input.
        description: What the model is told the tool does.
        parameters: The JSON Schema the arguments must satisfy.
        requires_approval: Pause for an operator's decision before each call (SPEC §11).
        approval_timeout_seconds: How long an approval may wait (None: the server's 86400).
    """

    name: str
    action: str
    description: str = ""
    parameters: Mapping[str, Any] | None = None
    requires_approval: bool = False
    approval_timeout_seconds: float | None = None

    def entry(self) -> dict[str, Any]:
        """The tool as the agent input lists it."""
        entry: dict[str, Any] = {
            "name": self.name,
            "action": self.action,
            "description": self.description,
            "parameters": json_copy(self.parameters or {"type": "object"}, "parameters"),
            "requires_approval": self.requires_approval,
        }
        if self.approval_timeout_seconds is not None:
            entry["approval_timeout_seconds"] = self.approval_timeout_seconds
        return entry


ToolLike: TypeAlias = Tool | Callable[..., Any] | Mapping[str, Any]
"""What ``tools=`` takes: a declared handler, a :class:`Tool`, or an entry written out."""


def tool(
    handler: Callable[..., Any] | str,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | type[BaseModel] | None = None,
    requires_approval: bool = False,
    approval_timeout_seconds: float | None = None,
) -> Tool:
    """A tool from a declared handler (or an action's name), overriding what is given.

    Args:
        handler: A handler declared with ``@worker.action(...)``, or an action's name.
        name: The tool's name; default the handler's function name (or the action's name).
        description: Default the handler's docstring (or "").
        parameters: A JSON Schema or a model; default the handler's input model's schema
            (``{"type": "object"}`` for a plain-dict handler or an action's name).
        requires_approval: Pause each call for an operator's decision.
        approval_timeout_seconds: How long such a decision may wait.

    Raises:
        DefinitionError: a handler no worker declares, or one without a name.
    """
    if isinstance(parameters, type) and issubclass(parameters, BaseModel):
        parameters = schema_of(parameters, "parameters")
    if isinstance(handler, str):
        return Tool(
            name=name or handler,
            action=handler,
            description=description or "",
            parameters=parameters,
            requires_approval=requires_approval,
            approval_timeout_seconds=approval_timeout_seconds,
        )
    declared = action_of(handler)
    if name is None:
        name = getattr(handler, "__name__", None)
        if not isinstance(name, str):
            raise DefinitionError(f"{handler!r} has no __name__: give the tool a name=")
    return Tool(
        name=name,
        action=declared.action,
        description=(inspect.getdoc(handler) or "") if description is None else description,
        parameters=declared.input_schema() if parameters is None else parameters,
        requires_approval=requires_approval,
        approval_timeout_seconds=approval_timeout_seconds,
    )


def agent(
    *,
    model: str,
    prompt: str,
    instructions: str | None = None,
    tools: Sequence[ToolLike] = (),
    budget: Mapping[str, Any] | None = None,
    model_settings: Mapping[str, Any] | None = None,
    output_type: type[BaseModel] | None = None,
    output_schema: Mapping[str, Any] | None = None,
    script: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The input of an ``agent`` task (SPEC §11), as JSON.

    Args:
        model: ``mock``, or ``<endpoint>:<model-name>`` (e.g. ``openai:gpt-4o-mini``).
        prompt: The user message; may use ``{{input.<field>}}`` and ``{{upstream.<key>}}``.
        instructions: The system message.
        tools: Declared handlers, :func:`tool` entries, or entries written out as mappings.
        budget: Any of ``max_model_calls``, ``max_tool_calls``, ``max_input_tokens``,
            ``max_output_tokens``, ``max_seconds``.
        model_settings: Any of ``temperature``, ``max_output_tokens``, ``top_p``.
        output_type: A pydantic model: its JSON Schema is the ``output_schema``.
        output_schema: A JSON Schema for the final answer (instead of ``output_type``).
        script: The mock model's turns: ``{"tool_calls": [{"name", "arguments"}]}`` or
            ``{"content": "..."}``.

    Raises:
        DefinitionError: an unknown budget or model-settings field, both ``output_type`` and
            ``output_schema``, an output type that is not a model, a tool no worker declares.
    """
    spec: dict[str, Any] = {"model": model}
    if instructions is not None:
        spec["instructions"] = instructions
    spec["prompt"] = prompt
    if tools:
        spec["tools"] = [_tool_entry(t) for t in tools]
    if budget is not None:
        spec["budget"] = _fields(budget, BUDGET_FIELDS, "budget")
    if model_settings is not None:
        spec["model_settings"] = _fields(model_settings, MODEL_SETTINGS_FIELDS, "model_settings")
    if output_type is not None:
        if output_schema is not None:
            raise DefinitionError("give output_type or output_schema, not both")
        if not (isinstance(output_type, type) and issubclass(output_type, BaseModel)):
            raise DefinitionError(f"output_type {output_type!r} is not a pydantic model")
        spec["output_schema"] = schema_of(output_type, "output_type")
    elif output_schema is not None:
        spec["output_schema"] = json_copy(output_schema, "output_schema")
    if script is not None:
        spec["script"] = [json_copy(turn, f"script turn {i}") for i, turn in enumerate(script)]
    return spec


def _tool_entry(given: ToolLike) -> dict[str, Any]:
    if isinstance(given, Tool):
        return given.entry()
    if isinstance(given, Mapping):
        return json_copy(given, "a tool entry")
    if not callable(given):  # e.g. an action's name: which tool name it gets must be said
        raise DefinitionError(f"tool {given!r}: for an action's name use tool(action, name=...)")
    return tool(given).entry()


def _fields(given: Mapping[str, Any], known: frozenset[str], what: str) -> dict[str, Any]:
    unknown = sorted(set(given) - known)
    if unknown:
        raise DefinitionError(
            f"unknown {what} field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    return json_copy(given, what)
