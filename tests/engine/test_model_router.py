"""The model registry (SPEC §11): ``mock`` and named endpoints, each endpoint's adapters made once.

The adapters here are fakes that record what they are asked for: the router must make an
endpoint's adapters at its first model only, ask them for ``<provider>:<model-name>``, refuse an
endpoint it does not have, and close exactly what it made.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import anyio
import pytest

from workload_domain.agent.llm import Model, ModelRejected, ModelRequest, ModelResponse
from workload_domain.jsonvalues import JsonObject
from workload_engine.model_router import EndpointAdapters, MockModel, ModelRouter


class Named:
    def __init__(self, name: str) -> None:
        self.name = name

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(self.name)


class Recording:
    """Adapters that remember the names asked for and whether they were closed."""

    def __init__(self, made: list[Recording]) -> None:
        self.asked: list[str] = []
        self.closed = False
        made.append(self)

    def model(self, name: str, *, script: Sequence[JsonObject] | None = None) -> Model:
        self.asked.append(name)
        return Named(name)

    async def aclose(self) -> None:
        self.closed = True


@pytest.mark.anyio
async def test_each_endpoint_is_made_at_its_first_model_and_asked_for_its_provider() -> None:
    made: list[Recording] = []
    router = ModelRouter(
        {
            "local": EndpointAdapters("openai", lambda: Recording(made)),
            "claude": EndpointAdapters("anthropic", lambda: Recording(made)),
            "unused": EndpointAdapters("openai", lambda: Recording(made)),
        }
    )
    assert router.names == frozenset({"local", "claude", "unused"})
    assert made == []  # nothing made before it is needed

    assert isinstance(router.model("mock", script=[{"content": "x"}]), MockModel)
    assert made == []
    first = router.model("local:llama3.1:8b")
    again = router.model("local:other")
    claude = router.model("claude:sonnet")
    assert made == []  # made at the first call, not at the first model

    assert (await first.complete(ModelRequest("x", ()))).content == "openai:llama3.1:8b"
    assert (await again.complete(ModelRequest("x", ()))).content == "openai:other"
    assert (await claude.complete(ModelRequest("x", ()))).content == "anthropic:sonnet"
    assert (await router.model("local:third").complete(ModelRequest("x", ()))).content == (
        "openai:third"
    )
    assert len(made) == 2
    local, anthropic = made
    assert local.asked == ["openai:llama3.1:8b", "openai:other", "openai:third"]
    assert anthropic.asked == ["anthropic:sonnet"]

    await router.aclose()
    assert [m.closed for m in made] == [True, True]


@pytest.mark.parametrize("name", ["gone:m", "openai:gpt-4o", "local", "", ":m", "mock:m"])
def test_a_model_of_no_configured_endpoint_is_rejected(name: str) -> None:
    made: list[Recording] = []
    router = ModelRouter({"local": EndpointAdapters("openai", lambda: Recording(made))})
    with pytest.raises(ModelRejected, match=r"configured endpoints: local;"):
        router.model(name)
    assert made == []


def test_no_endpoints_serves_mock_only() -> None:
    router = ModelRouter()
    assert router.names == frozenset()
    with pytest.raises(ModelRejected, match=r"configured endpoints: none;"):
        router.model("openai:gpt-4o")


@pytest.mark.anyio
async def test_adapters_are_made_once_off_the_event_loop_however_many_calls_wait() -> None:
    """Importing a provider's package takes seconds: never on the event loop's thread."""
    made: list[Recording] = []
    threads: list[int] = []

    def make() -> Recording:
        threads.append(threading.get_ident())
        time.sleep(0.05)  # a slow import: the other first calls wait for this one
        return Recording(made)

    router = ModelRouter({"local": EndpointAdapters("openai", make)})
    answers: list[str] = []

    async def call(i: int) -> None:
        answer = await router.model(f"local:m{i}").complete(ModelRequest("x", ()))
        answers.append(str(answer.content))

    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(call, i)
    assert len(threads) == 1, "made once"
    assert threads[0] != threading.get_ident(), "made in a worker thread"
    assert sorted(answers) == sorted(f"openai:m{i}" for i in range(5))
    (local,) = made
    assert sorted(local.asked) == sorted(f"openai:m{i}" for i in range(5))
