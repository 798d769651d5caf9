"""Model adapters the engine ships: the mock model, and the registry that picks one by name.

The registry (:class:`ModelRouter`) serves ``mock`` and ``<endpoint>:<model-name>`` for each
configured endpoint (SPEC §11): an endpoint's adapter is made at its first model call, so a
service never loads a provider's package for an endpoint no task uses. It is made in a worker
thread: importing a provider's package is long (``anthropic`` took 3–9 s on a busy 2-core
machine), and on the event loop it would stall every request, lease renewal and run meanwhile.

The mock model (SPEC §11) is deterministic and never touches the network: its answer to a
conversation is the turn of its ``script`` numbered by how many answers the conversation already
holds, so a replayed conversation gets the same answer. Token counts are an estimate (four
characters a token, at least one) so that token budgets can be exercised without a real model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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

__all__ = [
    "MOCK_MODEL",
    "ClosableModels",
    "EndpointAdapters",
    "MockModel",
    "ModelRouter",
    "estimate_tokens",
]

MOCK_MODEL = "mock"


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


@dataclass(frozen=True, slots=True)
class EndpointAdapters:
    """How to make the adapters of one endpoint.

    ``make`` is called once, at the endpoint's first model; the adapters it returns serve
    ``<provider>:<model-name>`` (the router asks them for ``openai:gpt-4o`` when a task names
    ``local:gpt-4o`` on an ``openai`` endpoint called ``local``).
    """

    provider: str
    make: Callable[[], ClosableModels]


class ModelRouter:
    """The :class:`~workload_domain.agent.llm.Models` of the service: ``mock`` and the endpoints.

    ``endpoints`` maps an endpoint's name to its adapters (SPEC §11, ``WORKLOAD_MODEL_ENDPOINTS``;
    ``openai`` is also the one ``WORKLOAD_OPENAI_BASE_URL`` defines). A model of an endpoint
    that is not configured fails ``model_error`` (a version compiled while it was configured).
    """

    def __init__(self, endpoints: Mapping[str, EndpointAdapters] | None = None) -> None:
        self._endpoints = dict(endpoints or {})
        self._made: dict[str, ClosableModels] = {}
        self._making: dict[str, anyio.Lock] = {}

    @property
    def names(self) -> frozenset[str]:
        """The names of the configured endpoints."""
        return frozenset(self._endpoints)

    async def aclose(self) -> None:
        """Close the connections of the adapters made so far."""
        made, self._made = self._made, {}
        for adapters in made.values():
            await adapters.aclose()

    def model(self, name: str, *, script: Sequence[JsonObject] | None = None) -> Model:
        """The model called ``name``."""
        if name == MOCK_MODEL:
            return MockModel(script or ())
        endpoint, colon, model_name = name.partition(":")
        found = self._endpoints.get(endpoint) if colon else None
        if found is None:
            configured = ", ".join(sorted(self._endpoints)) or "none"
            raise ModelRejected(
                f"no model endpoint serves {name[:100]!r} (configured endpoints: {configured}; "
                "see WORKLOAD_MODEL_ENDPOINTS)"
            )
        named = f"{found.provider}:{model_name}"
        adapters = self._made.get(endpoint)
        if adapters is not None:
            return adapters.model(named)
        return _FirstCall(self, endpoint, named)

    async def adapters(self, endpoint: str) -> ClosableModels:
        """The adapters of a configured ``endpoint``, made (in a worker thread) if not yet."""
        made = self._made.get(endpoint)
        if made is not None:
            return made
        lock = self._making.setdefault(endpoint, anyio.Lock())
        async with lock:  # one import and one client per endpoint, however many callers wait
            made = self._made.get(endpoint)
            if made is None:
                make = self._endpoints[endpoint].make
                made = self._made[endpoint] = await anyio.to_thread.run_sync(make)
            return made


@dataclass(frozen=True, slots=True)
class _FirstCall:
    """A model of an endpoint whose adapters are not made yet: made when first called."""

    router: ModelRouter
    endpoint: str
    name: str

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Make the endpoint's adapters (off the event loop), then call the model."""
        adapters = await self.router.adapters(self.endpoint)
        return await adapters.model(self.name).complete(request)
