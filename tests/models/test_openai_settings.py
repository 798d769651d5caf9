"""The openai:<model> adapter's names and configuration: which names it serves, what it accepts."""

from __future__ import annotations

import pytest

from tests.models.conftest import API_KEY
from workload_domain.agent.llm import MODEL_ERROR, ModelRejected, Models
from workload_model_openai import (
    DEFAULT_API_KEY,
    DEFAULT_TIMEOUT_SECONDS,
    OpenAIConfigError,
    OpenAIModel,
    OpenAIModels,
    OpenAISettings,
    from_environment,
)

pytestmark = pytest.mark.anyio

BASE_URL = "http://127.0.0.1:11434/v1"


@pytest.mark.parametrize(
    ("name", "model_name"),
    [
        pytest.param("openai:gpt-4o", "gpt-4o", id="openai"),
        pytest.param("openai:llama3.1:8b", "llama3.1:8b", id="ollama-tag"),
        pytest.param("openai:Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct", id="vllm"),
    ],
)
async def test_openai_names_are_served(name: str, model_name: str) -> None:
    async with OpenAIModels(BASE_URL) as models:
        model = models.model(name, script=[{"content": "ignored"}])

    assert isinstance(model, OpenAIModel)
    assert model.model_name == model_name


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("mock", id="mock"),
        pytest.param("openai:", id="nothing-after-prefix"),
        pytest.param("openai:   ", id="blank-after-prefix"),
        pytest.param("openai", id="no-colon"),
        pytest.param("OpenAI:gpt-4o", id="case"),
        pytest.param("anthropic:claude", id="other-provider"),
        pytest.param("", id="empty"),
        pytest.param("x" * 10_000, id="huge"),
    ],
)
async def test_other_names_are_rejected(name: str) -> None:
    async with OpenAIModels(BASE_URL) as models:
        with pytest.raises(ModelRejected) as caught:
            models.model(name)

    assert caught.value.code == MODEL_ERROR
    assert "openai:<model-name>" in caught.value.message
    assert len(caught.value.message) < 300


async def test_the_adapters_satisfy_the_port() -> None:
    async with OpenAIModels(BASE_URL) as models:
        port: Models = models
        assert isinstance(port.model("openai:m"), OpenAIModel)


async def test_a_model_made_alone_owns_and_closes_its_client() -> None:
    model = OpenAIModel("m", base_url=BASE_URL, api_key=API_KEY, timeout_seconds=3)

    await model.aclose()

    assert model._client.is_closed()


async def test_models_share_one_client_and_close_it() -> None:
    models = OpenAIModels(BASE_URL, API_KEY)
    first, second = models.model("openai:a"), models.model("openai:b")

    await first.aclose()  # a shared client is not the model's to close
    assert not models._client.is_closed()
    await models.aclose()

    assert first._client is second._client is models._client
    assert models._client.is_closed()


def test_from_environment_without_a_base_url_is_none() -> None:
    assert from_environment({}) is None
    assert from_environment({"WORKLOAD_OPENAI_BASE_URL": "  "}) is None
    assert from_environment({"WORKLOAD_OPENAI_API_KEY": "k"}) is None


def test_from_environment_defaults() -> None:
    settings = from_environment({"WORKLOAD_OPENAI_BASE_URL": BASE_URL})

    assert settings == OpenAISettings(BASE_URL, DEFAULT_API_KEY, DEFAULT_TIMEOUT_SECONDS)
    assert (settings.api_key, settings.timeout_seconds) == ("unused", 120.0)


async def test_from_environment_reads_all_three() -> None:
    settings = from_environment(
        {
            "WORKLOAD_OPENAI_BASE_URL": "https://api.example.com/v1",
            "WORKLOAD_OPENAI_API_KEY": f" {API_KEY} ",
            "WORKLOAD_MODEL_TIMEOUT_SECONDS": "3600",
        }
    )

    assert settings == OpenAISettings("https://api.example.com/v1", API_KEY, 3600.0)
    assert API_KEY not in repr(settings)
    async with OpenAIModels.from_settings(settings) as models:
        assert models.settings == settings


@pytest.mark.parametrize(
    ("environ", "complaint"),
    [
        pytest.param(
            {"WORKLOAD_OPENAI_BASE_URL": "ftp://h/v1"}, "WORKLOAD_OPENAI_BASE_URL", id="ftp"
        ),
        pytest.param(
            {"WORKLOAD_OPENAI_BASE_URL": "127.0.0.1:11434/v1"},
            "WORKLOAD_OPENAI_BASE_URL",
            id="no-scheme",
        ),
        pytest.param(
            {"WORKLOAD_OPENAI_BASE_URL": "http:///v1"}, "WORKLOAD_OPENAI_BASE_URL", id="no-host"
        ),
        pytest.param(
            {"WORKLOAD_OPENAI_BASE_URL": "http://h:99999/v1"},
            "WORKLOAD_OPENAI_BASE_URL",
            id="bad-port",
        ),
        pytest.param(
            {"WORKLOAD_OPENAI_BASE_URL": "http://h/v1\nX-Evil: 1"},
            "WORKLOAD_OPENAI_BASE_URL",
            id="newline",
        ),
        pytest.param(
            {"WORKLOAD_OPENAI_BASE_URL": "file:///etc/passwd"},
            "WORKLOAD_OPENAI_BASE_URL",
            id="file",
        ),
        pytest.param(
            {"WORKLOAD_OPENAI_BASE_URL": BASE_URL, "WORKLOAD_MODEL_TIMEOUT_SECONDS": "0"},
            "WORKLOAD_MODEL_TIMEOUT_SECONDS",
            id="timeout-zero",
        ),
        pytest.param(
            {"WORKLOAD_OPENAI_BASE_URL": BASE_URL, "WORKLOAD_MODEL_TIMEOUT_SECONDS": "-5"},
            "WORKLOAD_MODEL_TIMEOUT_SECONDS",
            id="timeout-negative",
        ),
        pytest.param(
            {"WORKLOAD_OPENAI_BASE_URL": BASE_URL, "WORKLOAD_MODEL_TIMEOUT_SECONDS": "3600.5"},
            "WORKLOAD_MODEL_TIMEOUT_SECONDS",
            id="timeout-too-long",
        ),
        pytest.param(
            {"WORKLOAD_OPENAI_BASE_URL": BASE_URL, "WORKLOAD_MODEL_TIMEOUT_SECONDS": "nan"},
            "WORKLOAD_MODEL_TIMEOUT_SECONDS",
            id="timeout-nan",
        ),
        pytest.param(
            {"WORKLOAD_OPENAI_BASE_URL": BASE_URL, "WORKLOAD_MODEL_TIMEOUT_SECONDS": "inf"},
            "WORKLOAD_MODEL_TIMEOUT_SECONDS",
            id="timeout-infinite",
        ),
        pytest.param(
            {"WORKLOAD_OPENAI_BASE_URL": BASE_URL, "WORKLOAD_MODEL_TIMEOUT_SECONDS": "2 min"},
            "WORKLOAD_MODEL_TIMEOUT_SECONDS",
            id="timeout-text",
        ),
        pytest.param(
            {"WORKLOAD_OPENAI_BASE_URL": BASE_URL, "WORKLOAD_OPENAI_API_KEY": "sk-é-secret"},
            "WORKLOAD_OPENAI_API_KEY",
            id="key-not-ascii",
        ),
        pytest.param(
            {"WORKLOAD_OPENAI_BASE_URL": BASE_URL, "WORKLOAD_OPENAI_API_KEY": "sk a\nsecret"},
            "WORKLOAD_OPENAI_API_KEY",
            id="key-with-newline",
        ),
    ],
)
def test_from_environment_refuses_bad_values_by_name(
    environ: dict[str, str], complaint: str
) -> None:
    with pytest.raises(OpenAIConfigError) as caught:
        from_environment(environ)

    message = str(caught.value)
    assert message.startswith(complaint)
    assert "secret" not in message


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        pytest.param({"base_url": "localhost:8000"}, "the base URL", id="url"),
        pytest.param({"base_url": BASE_URL, "api_key": ""}, "the API key", id="empty-key"),
        pytest.param({"base_url": BASE_URL, "timeout_seconds": 0.0}, "the model timeout", id="0"),
        pytest.param({"base_url": BASE_URL, "timeout_seconds": 7200.0}, "the model", id="7200"),
    ],
)
def test_the_adapters_check_their_arguments(arguments: dict[str, object], complaint: str) -> None:
    with pytest.raises(OpenAIConfigError, match=f"^{complaint}"):
        OpenAIModels(**arguments)  # type: ignore[arg-type]
    with pytest.raises(OpenAIConfigError, match=f"^{complaint}"):
        OpenAIModel("m", **arguments)  # type: ignore[arg-type]


async def test_urls_in_messages_lose_their_credentials() -> None:
    async with OpenAIModels("https://user:pa55word@example.com:8443/v1?token=t#f") as models:
        assert repr(models) == "OpenAIModels(base_url='https://example.com:8443/v1')"
        assert repr(models.model("openai:m")) == (
            "OpenAIModel('m', base_url='https://example.com:8443/v1')"
        )
