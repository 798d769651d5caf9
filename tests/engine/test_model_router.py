"""The model registry (SPEC §11): ``mock`` and named endpoints, each endpoint's adapters made once.

The adapters here are fakes that record what they are asked for: the router must make an
endpoint's adapters at its first model only, ask them for ``<provider>:<model-name>``, refuse an
endpoint it does not have, and close exactly what it made.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from workload_domain.agent.llm import Model, ModelRejected, ModelRequest, ModelResponse
from workload_domain.jsonvalues import JsonObject
from workload_engine.models import EndpointAdapters, MockModel, ModelRouter


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

    assert len(made) == 2
    local, anthropic = made
    assert local.asked == ["openai:llama3.1:8b", "openai:other"]
    assert anthropic.asked == ["anthropic:sonnet"]
    assert (await first.complete(ModelRequest("x", ()))).content == "openai:llama3.1:8b"
    assert (await again.complete(ModelRequest("x", ()))).content == "openai:other"
    assert (await claude.complete(ModelRequest("x", ()))).content == "anthropic:sonnet"

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
