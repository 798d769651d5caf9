"""Model settings and native structured output in the OpenAI-compatible adapter (ADR 0027).

Over real HTTP to the fake server, asserting on the requests it received: the settings that are
set, and only those, become ``temperature``, ``top_p`` and ``max_tokens`` (``max_completion_tokens``
on OpenAI's own API); an output
schema becomes a ``json_schema`` response format, strict only when strict mode takes the schema
as it is.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.models.conftest import MODEL
from workload_domain.agent.llm import Message, ModelRequest, ModelSettings, Role
from workload_model_openai import OpenAIModels
from workload_model_openai._options import sampling, strict_compatible, token_limit_parameter

pytestmark = pytest.mark.anyio

HELLO = (Message(Role.USER, "hello"),)
STRICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["ok", "bad"]},
        "reasons": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["verdict", "reasons"],
    "additionalProperties": False,
}


async def _sent(fake: FakeOpenAI, models: OpenAIModels, request: ModelRequest) -> Any:
    fake.queue(Reply('{"verdict": "ok", "reasons": []}'))
    await models.model(f"openai:{MODEL}").complete(request)
    return fake.chat_requests[-1].json()


async def test_settings_that_are_set_are_sent(
    fake_openai: FakeOpenAI, models: OpenAIModels
) -> None:
    settings = ModelSettings(temperature=0.25, max_output_tokens=321, top_p=0.5)
    body = await _sent(fake_openai, models, ModelRequest(MODEL, HELLO, settings=settings))
    # The fake is a local server, as Ollama is: the limit is the parameter those read.
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.25, 0.5, 321)
    assert "max_completion_tokens" not in body
    assert "response_format" not in body


@pytest.mark.parametrize(
    ("settings", "sent"),
    [
        pytest.param(ModelSettings(), {}, id="none"),
        pytest.param(ModelSettings(temperature=0), {"temperature": 0}, id="temperature-zero"),
        pytest.param(ModelSettings(top_p=1), {"top_p": 1}, id="top-p-only"),
        pytest.param(ModelSettings(max_output_tokens=1), {"max_tokens": 1}, id="tokens-only"),
    ],
)
async def test_only_the_settings_that_are_set_are_sent(
    fake_openai: FakeOpenAI, models: OpenAIModels, settings: ModelSettings, sent: dict[str, Any]
) -> None:
    body = await _sent(fake_openai, models, ModelRequest(MODEL, HELLO, settings=settings))
    named = ("temperature", "top_p", "max_completion_tokens", "max_tokens")
    assert {k: body[k] for k in named if k in body} == sent


@pytest.mark.parametrize(
    ("base_url", "parameter"),
    [
        ("https://api.openai.com/v1", "max_completion_tokens"),
        ("https://API.OpenAI.com./v1", "max_completion_tokens"),
        ("https://eu.api.openai.com/v1", "max_completion_tokens"),
        ("https://mine.openai.azure.com/openai/v1", "max_completion_tokens"),
        ("https://mine.cognitiveservices.azure.com/openai/v1", "max_completion_tokens"),
        ("https://mine.services.ai.azure.com/openai/v1", "max_completion_tokens"),
        ("http://127.0.0.1:11434/v1", "max_tokens"),  # Ollama
        ("http://localhost:8000/v1", "max_tokens"),  # vLLM, llama.cpp
        ("https://notopenai.com/v1", "max_tokens"),
        ("https://api.openai.com.example.org/v1", "max_tokens"),
    ],
)
def test_the_token_limit_is_the_parameter_its_server_reads(base_url: str, parameter: str) -> None:
    assert token_limit_parameter(base_url) == parameter
    assert sampling(ModelSettings(max_output_tokens=7), token_limit_parameter(base_url)) == {
        parameter: 7
    }


async def test_an_output_schema_is_asked_for_natively_and_strictly_when_it_can_be(
    fake_openai: FakeOpenAI, models: OpenAIModels
) -> None:
    body = await _sent(fake_openai, models, ModelRequest(MODEL, HELLO, output_schema=STRICT_SCHEMA))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": STRICT_SCHEMA, "strict": True},
    }


async def test_a_schema_strict_mode_would_refuse_is_sent_not_strict(
    fake_openai: FakeOpenAI, models: OpenAIModels
) -> None:
    schema = {"type": "object", "required": ["answer"]}
    body = await _sent(fake_openai, models, ModelRequest(MODEL, HELLO, output_schema=schema))
    assert body["response_format"]["json_schema"] == {
        "name": "output",
        "schema": schema,
        "strict": False,
    }


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "items": {"type": "string"}},
        {"required": ["a"]},
        {},
        {"anyOf": [{"type": "object"}, {"type": "string"}]},
    ],
    ids=["array", "no-type", "empty", "root-anyof"],
)
async def test_a_schema_that_is_not_an_objects_is_not_asked_for_natively(
    fake_openai: FakeOpenAI, models: OpenAIModels, schema: dict[str, Any]
) -> None:
    body = await _sent(fake_openai, models, ModelRequest(MODEL, HELLO, output_schema=schema))
    assert "response_format" not in body


def _object(**overrides: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "additionalProperties": False,
        **overrides,
    }


def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = _object(properties={"a": schema})
    return schema


@pytest.mark.parametrize(
    ("schema", "strict"),
    [
        pytest.param(STRICT_SCHEMA, True, id="all-required-closed"),
        pytest.param(_object(), True, id="minimal"),
        pytest.param(_object(properties={}, required=[]), True, id="no-properties"),
        pytest.param(_object(additionalProperties=True), False, id="open"),
        pytest.param({"type": "object", "properties": {}, "required": []}, False, id="implicit"),
        pytest.param(_object(required=[]), False, id="optional-property"),
        pytest.param(_object(required=["a", "b"]), False, id="required-unknown"),
        pytest.param(_object(properties={"a": {"type": "string", "minLength": 1}}), False, id="kw"),
        pytest.param(_object(properties={"a": {"type": "object"}}), False, id="inner-open"),
        pytest.param(_object(properties={"a": {"anyOf": [{"type": "string"}]}}), True, id="anyof"),
        pytest.param({"anyOf": [_object()]}, False, id="root-anyof"),
        pytest.param(_object(required="a"), False, id="required-not-list"),
        pytest.param(_object(properties=[]), False, id="properties-not-object"),
        pytest.param(_object(properties={"a": {"anyOf": {}}}), False, id="anyof-not-list"),
        pytest.param(_object(properties={"a": True}), False, id="boolean-schema"),
        pytest.param(_object(**{"$defs": {}}), False, id="defs"),
        pytest.param(_nested(5), True, id="depth-5"),
        pytest.param(_nested(7), False, id="depth-7"),
    ],
)
def test_strict_mode_only_for_schemas_it_takes_as_they_are(
    schema: dict[str, Any], strict: bool
) -> None:
    assert strict_compatible(schema) is strict


async def test_a_conforming_answer_is_read_as_it_came(
    fake_openai: FakeOpenAI, models: OpenAIModels
) -> None:
    fake_openai.queue(Reply('{"verdict": "ok", "reasons": [{"text": "fine"}]}', usage=(7, 5)))
    request = ModelRequest(MODEL, HELLO, output_schema=STRICT_SCHEMA)
    response = await models.model(f"openai:{MODEL}").complete(request)
    assert response.content == '{"verdict": "ok", "reasons": [{"text": "fine"}]}'
