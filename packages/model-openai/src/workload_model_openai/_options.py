"""What a request asks of the model besides the conversation: sampling and the answer's schema.

Pure functions, no I/O. :func:`sampling` maps the port's
:class:`~workload_domain.agent.llm.ModelSettings` to Chat Completions parameters (only those set
are sent). ``max_output_tokens`` is ``max_completion_tokens`` on OpenAI's own API, the
parameter its current (reasoning) models require and the only one they take, and
``max_tokens`` on any other server (:func:`token_limit_parameter`): Ollama, llama.cpp, vLLM,
LM Studio read that one, and Ollama drops the other unread. :func:`response_format` asks for
the output schema natively, as a ``json_schema`` response format, when the schema is an
object's (ADR 0027): ``strict`` only when the schema is one OpenAI's strict mode accepts as it
is (:func:`strict_compatible`), since strict mode refuses (HTTP 400) any other; the runtime
validates the answer afterwards anyway.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict
from urllib.parse import urlsplit

from openai.types.shared_params import ResponseFormatJSONSchema

from workload_domain.agent.llm import ModelSettings
from workload_domain.jsonvalues import JsonObject

__all__ = [
    "SCHEMA_NAME",
    "Sampling",
    "response_format",
    "sampling",
    "strict_compatible",
    "token_limit_parameter",
]

SCHEMA_NAME = "output"
"""The ``json_schema.name`` sent (the API requires one; the task's schema has no name)."""
_MAX_DEPTH = 5
"""OpenAI's strict mode allows at most five levels of nesting."""
_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "description",
        "title",
    }
)
"""The keywords every strict-mode model accepts; a schema using others is sent not strict."""


_OPENAI_HOSTS = (
    "openai.com",
    "openai.azure.com",
    "cognitiveservices.azure.com",
    "services.ai.azure.com",
)
"""The hosts (and their subdomains) of OpenAI's own API and of Azure's OpenAI deployments."""

TokenLimit = Literal["max_completion_tokens", "max_tokens"]


class Sampling(TypedDict, total=False):
    """The sampling parameters of a chat completion that a request sets."""

    temperature: float
    top_p: float
    max_completion_tokens: int
    max_tokens: int


def token_limit_parameter(base_url: str) -> TokenLimit:
    """The parameter that limits the answer's tokens on the server at ``base_url``."""
    host = (urlsplit(base_url).hostname or "").rstrip(".").lower()
    if any(host == known or host.endswith("." + known) for known in _OPENAI_HOSTS):
        return "max_completion_tokens"
    return "max_tokens"


def sampling(settings: ModelSettings, limit: TokenLimit = "max_completion_tokens") -> Sampling:
    """The Chat Completions parameters of ``settings`` (only those that are set).

    ``limit`` names the parameter ``max_output_tokens`` is sent as (:func:`token_limit_parameter`).
    """
    params: Sampling = {}
    if settings.temperature is not None:
        params["temperature"] = settings.temperature
    if settings.top_p is not None:
        params["top_p"] = settings.top_p
    if settings.max_output_tokens is not None:
        params[limit] = settings.max_output_tokens
    return params


def strict_compatible(schema: Any, depth: int = 0) -> bool:
    """Whether strict mode takes ``schema`` as it is.

    Every object lists its properties, requires all of them and forbids others
    (``additionalProperties: false``); only :data:`_STRICT_KEYWORDS` are used; nesting stays
    within five levels; ``anyOf`` is not at the root.
    """
    if not isinstance(schema, dict) or depth > _MAX_DEPTH or not schema.keys() <= _STRICT_KEYWORDS:
        return False
    if depth == 0 and ("anyOf" in schema or schema.get("type") != "object"):
        return False
    children: list[Any] = []
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties")
        if not isinstance(properties, dict) or schema.get("additionalProperties") is not False:
            return False
        required = schema.get("required")
        if not isinstance(required, list) or sorted(map(str, required)) != sorted(properties):
            return False
        children.extend(properties.values())
    if "items" in schema:
        children.append(schema["items"])
    if "anyOf" in schema:
        if not isinstance(schema["anyOf"], list):
            return False
        children.extend(schema["anyOf"])
    return all(strict_compatible(child, depth + 1) for child in children)


def response_format(schema: JsonObject | None) -> ResponseFormatJSONSchema | None:
    """The ``response_format`` asking for ``schema`` natively (None: not asked natively).

    Only an object's schema (``"type": "object"`` at the root) is asked for: the answer of a
    ``json_schema`` response format is a JSON object.
    """
    if schema is None or schema.get("type") != "object":
        return None
    return {
        "type": "json_schema",
        "json_schema": {
            "name": SCHEMA_NAME,
            "schema": schema,
            "strict": strict_compatible(schema),
        },
    }
