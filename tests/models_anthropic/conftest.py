"""Fixtures of the Anthropic adapter's tests: a running fake Messages server and the adapter."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.fakes.anthropic_server import FakeAnthropic, running_fake_anthropic
from workload_domain.agent.llm import Message, ModelRequest, ModelSettings, Role, ToolSchema
from workload_domain.jsonvalues import JsonObject
from workload_model_anthropic import AnthropicModels

API_KEY = "sk-ant-api03-Zq81xKeyThatMustNeverLeak0042"
MODEL = "claude-fake-1"
NAME = f"claude:{MODEL}"
"""The model's name as a task gives it: the endpoint ``claude``, then the model."""


def ask(
    *messages: Message,
    tools: tuple[ToolSchema, ...] = (),
    settings: ModelSettings | None = None,
    output_schema: JsonObject | None = None,
) -> ModelRequest:
    """A request to :data:`MODEL`; by default one user message."""
    return ModelRequest(
        MODEL,
        messages or (Message(Role.USER, "hello"),),
        tools,
        settings or ModelSettings(),
        output_schema,
    )


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A fake Anthropic server with an empty script (queue behaviours with ``.queue``)."""
    with running_fake_anthropic() as fake:
        yield fake


@pytest.fixture
async def models(fake_anthropic: FakeAnthropic) -> AsyncIterator[AnthropicModels]:
    """The adapter on ``fake_anthropic``, with :data:`API_KEY` (and room for a loaded machine)."""
    async with AnthropicModels(fake_anthropic.base_url, API_KEY, 60.0) as adapters:
        yield adapters


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A base URL whose port is bound but not listening: connecting to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"
