"""The Anthropic adapter's names and configuration: which names it serves, what it accepts."""

from __future__ import annotations

import anthropic
import pytest

from tests.fakes.anthropic_server import FakeAnthropic, Reply
from tests.models_anthropic.conftest import API_KEY, NAME, ask
from workload_domain.agent.llm import MODEL_ERROR, ModelRejected, Models
from workload_model_anthropic import (
    DEFAULT_API_KEY,
    DEFAULT_BASE_URL,
    DEFAULT_TIMEOUT_SECONDS,
    AnthropicConfigError,
    AnthropicModel,
    AnthropicModels,
    AnthropicSettings,
    make_client,
)

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("name", "model_name"),
    [
        pytest.param("anthropic:claude-sonnet-4-5", "claude-sonnet-4-5", id="anthropic"),
        pytest.param("claude:claude-opus-4-1", "claude-opus-4-1", id="named-endpoint"),
        pytest.param("a:m", "m", id="shortest"),
        pytest.param("my_end-point9:x:y", "x:y", id="colon-in-model"),
        pytest.param(f"{'e' * 32}:m", "m", id="longest-endpoint"),
    ],
)
async def test_endpoint_names_are_served(name: str, model_name: str) -> None:
    async with AnthropicModels(api_key=API_KEY) as models:
        model = models.model(name, script=[{"content": "ignored"}])

    assert isinstance(model, AnthropicModel)
    assert model.model_name == model_name


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("mock", id="mock"),
        pytest.param("anthropic:", id="nothing-after-prefix"),
        pytest.param("anthropic:   ", id="blank-after-prefix"),
        pytest.param("anthropic", id="no-colon"),
        pytest.param("Anthropic:claude", id="upper-case"),
        pytest.param("9claude:claude", id="digit-first"),
        pytest.param(":claude", id="empty-endpoint"),
        pytest.param(f"{'e' * 33}:m", id="endpoint-too-long"),
        pytest.param("clau de:m", id="space"),
        pytest.param("claude\n:m", id="newline"),
        pytest.param("", id="empty"),
        pytest.param("x" * 10_000, id="huge"),
    ],
)
async def test_other_names_are_rejected(name: str) -> None:
    async with AnthropicModels(api_key=API_KEY) as models:
        with pytest.raises(ModelRejected) as caught:
            models.model(name)

    assert caught.value.code == MODEL_ERROR
    assert "<endpoint>:<model-name>" in caught.value.message
    assert len(caught.value.message) < 300


@pytest.mark.parametrize("name", ["anthropic:claude", "claud:claude", "claude2:claude"])
async def test_an_adapter_for_one_endpoint_serves_only_its_names(name: str) -> None:
    async with AnthropicModels(api_key=API_KEY, endpoint="claude") as models:
        assert models.model("claude:m").model_name == "m"
        with pytest.raises(ModelRejected) as caught:
            models.model(name)

    assert "this one serves claude:<model-name>" in caught.value.message


async def test_the_adapters_satisfy_the_port() -> None:
    async with AnthropicModels(api_key=API_KEY) as models:
        port: Models = models
        assert isinstance(port.model(NAME), AnthropicModel)


async def test_the_defaults() -> None:
    async with AnthropicModels() as models:
        assert models.settings == AnthropicSettings(
            DEFAULT_BASE_URL, DEFAULT_API_KEY, DEFAULT_TIMEOUT_SECONDS
        )
        assert models.endpoint is None
    assert DEFAULT_BASE_URL == "https://api.anthropic.com"


async def test_the_same_positional_shape_as_the_openai_adapter() -> None:
    # The composition root builds either adapter as (base_url, api_key, timeout_seconds).
    async with AnthropicModels("http://127.0.0.1:9/", API_KEY, 7.5) as models:
        assert models.settings == AnthropicSettings("http://127.0.0.1:9/", API_KEY, 7.5)
    async with AnthropicModels(None, API_KEY, 7.5) as models:
        assert models.settings.base_url == DEFAULT_BASE_URL


async def test_from_settings() -> None:
    settings = AnthropicSettings("http://127.0.0.1:9", API_KEY, 3)
    async with AnthropicModels.from_settings(settings, endpoint="claude") as models:
        assert (models.settings, models.endpoint) == (settings, "claude")


async def test_a_model_made_alone_owns_and_closes_its_client() -> None:
    model = AnthropicModel("m", api_key=API_KEY, timeout_seconds=3)

    await model.aclose()

    assert model._client.is_closed()


async def test_models_share_one_client_and_close_it() -> None:
    models = AnthropicModels(api_key=API_KEY)
    first, second = models.model("claude:a"), models.model("claude:b")

    assert first._client is second._client is models._client
    await first.aclose()  # a shared client is not the model's to close
    assert not models._client.is_closed()
    await models.aclose()
    assert models._client.is_closed()


async def test_the_client_has_retries_off_and_the_timeout() -> None:
    client = make_client(AnthropicSettings(api_key=API_KEY, timeout_seconds=42))
    try:
        assert client.max_retries == 0
        assert str(client.base_url).rstrip("/") == DEFAULT_BASE_URL
        assert isinstance(client.timeout, anthropic.Timeout)
        assert (client.timeout.read, client.timeout.connect) == (42, 42)
    finally:
        await client.close()


async def test_the_environment_does_not_steer_the_client(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK reads these when it is not told; the adapter always tells it.
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-environment")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "token-from-the-environment")
    fake_anthropic.queue(Reply("ok"))
    async with AnthropicModels(fake_anthropic.base_url, API_KEY, 30) as models:
        await models.model(NAME).complete(ask())

    (sent,) = fake_anthropic.message_requests
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert "x-api-key" not in sent.headers


async def test_no_trace_context_is_sent_to_the_provider(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.queue(Reply("ok"))
    async with AnthropicModels(fake_anthropic.base_url, API_KEY, 30) as models:
        await models.model(NAME).complete(ask())

    (sent,) = fake_anthropic.message_requests
    assert not {"traceparent", "tracestate", "baggage"} & set(sent.headers)


@pytest.mark.parametrize(
    ("base_url", "api_key", "timeout", "problem"),
    [
        pytest.param("ftp://x", API_KEY, 5, "must be an http:// or https:// URL", id="scheme"),
        pytest.param("api.anthropic.com", API_KEY, 5, "must be an http:// or https://", id="bare"),
        pytest.param("http://", API_KEY, 5, "with a host", id="no-host"),
        pytest.param("http://h:99999", API_KEY, 5, "not a valid URL", id="port-range"),
        pytest.param("http://h:port", API_KEY, 5, "not a valid URL", id="port-text"),
        pytest.param("http://[::1", API_KEY, 5, "not a valid URL", id="bad-ipv6"),
        pytest.param("http://h /v1", API_KEY, 5, "spaces or control", id="space"),
        pytest.param("http://h/\x00", API_KEY, 5, "spaces or control", id="nul"),
        pytest.param("http://h", "", 5, "must not be empty", id="empty-key"),
        pytest.param("http://h", "k e y", 5, "printable ASCII", id="key-space"),
        pytest.param("http://h", "kéy", 5, "printable ASCII", id="key-unicode"),
        pytest.param("http://h", "key\r\nX-Evil: 1", 5, "printable ASCII", id="key-crlf"),
        pytest.param("http://h", API_KEY, 0, "in (0, 3600]", id="zero-timeout"),
        pytest.param("http://h", API_KEY, -1, "in (0, 3600]", id="negative-timeout"),
        pytest.param("http://h", API_KEY, 3600.5, "in (0, 3600]", id="long-timeout"),
        pytest.param("http://h", API_KEY, float("nan"), "in (0, 3600]", id="nan-timeout"),
        pytest.param("http://h", API_KEY, float("inf"), "in (0, 3600]", id="inf-timeout"),
    ],
)
def test_unusable_settings_are_refused_by_name(
    base_url: str, api_key: str, timeout: float, problem: str
) -> None:
    with pytest.raises(AnthropicConfigError) as caught:
        AnthropicModels(base_url, api_key, timeout)

    assert problem in str(caught.value)
    if api_key:
        assert api_key not in str(caught.value)


@pytest.mark.parametrize("seconds", [1e-6, 3600])
async def test_the_timeout_bounds_are_open_below_and_closed_above(seconds: float) -> None:
    async with AnthropicModels(api_key=API_KEY, timeout_seconds=seconds) as models:
        assert models.settings.timeout_seconds == seconds


async def test_reprs_show_the_url_without_credentials_and_never_the_key() -> None:
    url = "https://user:pa55word@gateway.example:8443/anthropic?token=pa55word"
    async with AnthropicModels(url, API_KEY) as models:
        model = models.model(NAME)
        shown = [repr(models), repr(model), repr(models.settings)]

    assert repr(models) == "AnthropicModels(base_url='https://gateway.example:8443/anthropic')"
    assert not [text for text in shown if API_KEY in text or "pa55word" in text]
