"""The ``openai:<model>`` adapter of the model port: one call, one HTTP request, errors mapped.

A model call is ``POST {base_url}/chat/completions`` through the official ``openai`` client,
with its retries off (``max_retries=0``: SPEC §11 retries a failed attempt through the workflow's
own retry policy, so a client that retried too would multiply calls and hide them from the
journal). It carries the request's sampling settings and, for an output schema, a
``json_schema`` response format (``_options``). Its failures are those of every adapter
(:mod:`workload_domain.agent.adapters`, which words them and keeps the key out of them); the
answer of a 200 is a chat completion.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import openai

from workload_domain.agent.adapters import (
    OneCallModel,
    Provider,
    SharedClient,
    model_name_of,
)
from workload_domain.agent.llm import ModelRequest, ModelResponse
from workload_domain.jsonvalues import JsonObject
from workload_model_openai._options import response_format, sampling, token_limit_parameter
from workload_model_openai._settings import (
    DEFAULT_API_KEY,
    DEFAULT_TIMEOUT_SECONDS,
    OpenAISettings,
    safe_url,
)
from workload_model_openai._wire import parse_answer, wire_messages, wire_tools

__all__ = ["PREFIX", "OpenAIModel", "OpenAIModels", "make_client"]

PREFIX = "openai:"
"""The prefix of the model names this adapter serves: ``openai:<model-name>``."""


def make_client(settings: OpenAISettings) -> openai.AsyncOpenAI:
    """An ``AsyncOpenAI`` client for ``settings``: no retries, every phase bounded by the timeout.

    Making it does no I/O; connections open at the first call and close with ``close()``.
    """
    return openai.AsyncOpenAI(
        base_url=settings.base_url,
        api_key=settings.api_key,
        max_retries=0,
        timeout=openai.Timeout(settings.timeout_seconds),
    )


def _server_detail(error: openai.APIStatusError) -> object:
    # The client hands over the decoded body's "error" member (or the raw text).
    body = error.body
    return body.get("message") if isinstance(body, dict) else body


_PROVIDER = Provider(
    "OpenAI",
    "a chat completion",
    openai.OpenAIError,
    openai.APITimeoutError,
    openai.APIConnectionError,
    openai.APIStatusError,
    _server_detail,
)


def _served(prefix: str) -> bool:
    return f"{prefix}:" == PREFIX


class OpenAIModel(OneCallModel[openai.AsyncOpenAI]):
    """One model of an OpenAI-compatible server (``openai:<model_name>``).

    Args:
        model_name: the server's name of the model (``gpt-4o``, ``llama3.1:8b``, …).
        base_url: the API's root, ending in ``/v1`` (``http://127.0.0.1:11434/v1``).
        api_key: sent as ``Authorization: Bearer …``; local servers ignore it.
        timeout_seconds: the most one call may take, in (0, 3600].
        client: a client to share, made by :func:`make_client` with the same settings
            (:class:`OpenAIModels` passes its own). Without one the model makes its own, which
            :meth:`aclose` releases.

    Raises:
        OpenAIConfigError: a bad URL, an empty key or a timeout out of range.
    """

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str,
        api_key: str = DEFAULT_API_KEY,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        settings = OpenAISettings(base_url, api_key, timeout_seconds)
        super().__init__(model_name, settings, _PROVIDER, client=client, make_client=make_client)
        self._limit = token_limit_parameter(base_url)

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model_name!r}, base_url={safe_url(self._settings.base_url)!r})"

    def _named(self) -> str:
        return PREFIX + self.model_name[:100]

    async def _call(self, request: ModelRequest) -> ModelResponse:
        """One ``POST /chat/completions``."""
        with anyio.fail_after(self._settings.timeout_seconds):
            body = await self._post(request)
        return parse_answer(body)

    async def _post(self, request: ModelRequest) -> bytes:
        answer_format = response_format(request.output_schema)
        raw = await self._client.chat.completions.with_raw_response.create(
            model=request.model,
            messages=wire_messages(request.messages),
            tools=wire_tools(request.tools) if request.tools else openai.omit,
            response_format=openai.omit if answer_format is None else answer_format,
            **sampling(request.settings, self._limit),
        )
        return raw.http_response.content


class OpenAIModels(SharedClient[openai.AsyncOpenAI]):
    """The ``openai:<model-name>`` adapters of one server, sharing one client.

    Args:
        base_url: the API's root, ending in ``/v1``.
        api_key: sent as ``Authorization: Bearer …``; local servers ignore it.
        timeout_seconds: the most one call may take, in (0, 3600].

    Raises:
        OpenAIConfigError: a bad URL, an empty key or a timeout out of range.
    """

    settings: OpenAISettings

    def __init__(
        self,
        base_url: str,
        api_key: str = DEFAULT_API_KEY,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.settings = OpenAISettings(base_url, api_key, timeout_seconds)
        self._client = make_client(self.settings)

    @classmethod
    def from_settings(cls, settings: OpenAISettings) -> OpenAIModels:
        """The adapters of the server ``settings`` describe (see :func:`from_environment`)."""
        return cls(settings.base_url, settings.api_key, settings.timeout_seconds)

    def __repr__(self) -> str:
        return f"OpenAIModels(base_url={safe_url(self.settings.base_url)!r})"

    def model(self, name: str, *, script: Sequence[JsonObject] | None = None) -> OpenAIModel:
        """The model ``openai:<model-name>``; ``script`` (the mock model's) is ignored.

        Raises:
            ModelRejected: a name without the ``openai:`` prefix or with nothing after it.
        """
        del script
        model_name = model_name_of(name, serves=_served, wanted=PREFIX[:-1])
        return self._model(OpenAIModel, model_name)
