"""Fixtures of the model adapters' tests: a running fake OpenAI server and the adapter on it."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.fakes.openai_server import FakeOpenAI, running_fake_openai
from workload_domain.agent.llm import Message, ModelRequest, Role, ToolSchema
from workload_model_openai import OpenAIModels

API_KEY = "sk-test-Zq81xKeyThatMustNeverLeak0042"
MODEL = "fake-model"


def ask(*messages: Message, tools: tuple[ToolSchema, ...] = ()) -> ModelRequest:
    """A request to :data:`MODEL`; by default one user message."""
    return ModelRequest(MODEL, messages or (Message(Role.USER, "hello"),), tools)


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A fake OpenAI server with an empty script (queue behaviours with ``.queue``)."""
    with running_fake_openai() as fake:
        yield fake


@pytest.fixture
async def models(fake_openai: FakeOpenAI) -> AsyncIterator[OpenAIModels]:
    """The adapter on ``fake_openai``, with :data:`API_KEY` (and room for a loaded machine)."""
    async with OpenAIModels(fake_openai.base_url, API_KEY, 60.0) as adapters:
        yield adapters


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A base URL whose port is bound but not listening: connecting to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}/v1"
