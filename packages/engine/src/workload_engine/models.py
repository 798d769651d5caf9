"""Model adapters the engine ships: the mock model, and the registry that picks one by name.

The mock model (SPEC §11) is deterministic and never touches the network: its answer to a
conversation is the turn of its ``script`` numbered by how many answers the conversation already
holds, so a replayed conversation gets the same answer. Token counts are an estimate (four
characters a token, at least one) so that token budgets can be exercised without a real model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import anyio

from workload_domain.agent.llm import (
    Model,
    ModelRejected,
    ModelRequest,
    ModelResponse,
    Models,
    Role,
    TokenUsage,
    ToolCall,
)
from workload_domain.jsonvalues import JsonObject, canonical_json

__all__ = ["MOCK_MODEL", "ClosableModels", "MockModel", "ModelRouter", "estimate_tokens"]

MOCK_MODEL = "mock"
OPENAI_PREFIX = "openai:"


def estimate_tokens(value: object) -> int:
    """A deterministic token estimate of a JSON value: its canonical length over four."""
    return max(1, math.ceil(len(canonical_json(value).decode("utf-8")) / 4))


class MockModel:
    """Answers from a script of turns: ``{"content": …}`` and/or ``{"tool_calls": […]}``."""

    def __init__(self, script: Sequence[JsonObject]) -> None:
        self._script = list(script)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The script's next turn for this conversation."""
        await anyio.lowlevel.checkpoint()
        turn = sum(1 for m in request.messages if m.role is Role.ASSISTANT)
        if turn >= len(self._script):
            raise ModelRejected(
                f"the mock model's script has no turn {turn + 1} (it has {len(self._script)})"
            )
        scripted = self._script[turn]
        calls = tuple(
            ToolCall(f"call_{turn + 1}_{i + 1}", str(c.get("name", "")), c.get("arguments", {}))
            for i, c in enumerate(scripted.get("tool_calls") or ())
        )
        content = scripted.get("content")
        answer = {"content": content, "tool_calls": [c.to_json() for c in calls]}
        return ModelResponse(
            content=content if isinstance(content, str) else None,
            tool_calls=calls,
            usage=TokenUsage(
                input_tokens=estimate_tokens([m.to_json() for m in request.messages]),
                output_tokens=estimate_tokens(answer),
            ),
            finish_reason="tool_calls" if calls else "stop",
        )


class ClosableModels(Models, Protocol):
    """A registry of adapters that holds connections (closed when the service stops)."""

    async def aclose(self) -> None:
        """Release every connection."""
        ...


class ModelRouter:
    """The :class:`~workload_domain.agent.llm.Models` of the service: ``mock`` and ``openai:``.

    ``openai`` is the OpenAI-compatible adapter's registry when it is configured (None: a task
    naming an ``openai:`` model fails ``model_error`` with what to set).
    """

    def __init__(self, openai: ClosableModels | None = None) -> None:
        self._openai = openai

    async def aclose(self) -> None:
        """Close the adapters' connections."""
        if self._openai is not None:
            await self._openai.aclose()

    def model(self, name: str, *, script: Sequence[JsonObject] | None = None) -> Model:
        """The model called ``name``."""
        if name == MOCK_MODEL:
            return MockModel(script or ())
        if name.startswith(OPENAI_PREFIX):
            if self._openai is None:
                raise ModelRejected(
                    f"{name} needs an OpenAI-compatible endpoint: set WORKLOAD_OPENAI_BASE_URL "
                    "(and WORKLOAD_OPENAI_API_KEY if it needs one)"
                )
            return self._openai.model(name)
        raise ModelRejected(f"no model adapter serves {name!r}")
