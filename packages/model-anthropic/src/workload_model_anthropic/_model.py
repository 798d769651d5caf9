"""The Anthropic adapter of the model port: one call, one HTTP request, errors mapped.

A model call is ``POST {base_url}/v1/messages`` through the official ``anthropic`` client, with
its retries off (``max_retries=0``: SPEC §11 retries a failed attempt through the workflow's
own retry policy, so a client that retried too would multiply calls and hide them from the
journal; ADR 0028, as ADR 0013 for OpenAI). Its failures are those of every adapter
(:mod:`workload_domain.agent.adapters`, which words them and keeps the key out of them), with
Anthropic's 529 "overloaded" a 5xx, and a request that cannot be sent as JSON (a NaN as well
as a lone surrogate) rejected; the answer of a 200 is a message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import anthropic
import anyio

from workload_domain.agent.adapters import (
    OneCallModel,
    Provider,
    SharedClient,
    model_name_of,
)
from workload_domain.agent.llm import ModelFailure, ModelRejected, ModelRequest, ModelResponse
from workload_domain.jsonvalues import JsonObject
from workload_model_anthropic._settings import (
    DEFAULT_API_KEY,
    DEFAULT_BASE_URL,
    DEFAULT_TIMEOUT_SECONDS,
    AnthropicSettings,
    safe_url,
)
from workload_model_anthropic._wire import (
    WireRequest,
    parse_answer,
    wire_request,
)

__all__ = ["ENDPOINT_NAME", "AnthropicModel", "AnthropicModels", "make_client"]

ENDPOINT_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
"""What an endpoint's name looks like (SPEC §11): the part of a model name before the colon."""


def make_client(settings: AnthropicSettings) -> anthropic.AsyncAnthropic:
    """An ``AsyncAnthropic`` client for ``settings``: no retries, every phase bounded.

    The base URL and the key are always passed, so the client reads neither
    ``ANTHROPIC_BASE_URL`` nor any credential from the environment or a profile; its own
    OpenTelemetry spans are off (the service traces each model call itself, SPEC §12, and sends
    no trace context to the provider). Making it does no I/O; connections open at the first
    call and close with ``close()``.
    """
    return anthropic.AsyncAnthropic(
        base_url=settings.base_url,
        api_key=settings.api_key,
        max_retries=0,
        timeout=anthropic.Timeout(settings.timeout_seconds),
        open_telemetry=False,
    )


def _server_detail(error: anthropic.APIStatusError) -> object:
    # Anthropic's body is {"type": "error", "error": {"type", "message"}}; another server's
    # (a proxy's) may be any text, which the client hands over as it is.
    return error.api_message if isinstance(error.api_message, str) else error.body


_PROVIDER = Provider(
    "Anthropic",
    "a message",
    anthropic.AnthropicError,
    anthropic.APITimeoutError,
    anthropic.APIConnectionError,
    anthropic.APIStatusError,
    _server_detail,
)


class AnthropicModel(OneCallModel[anthropic.AsyncAnthropic]):
    """One model of the Anthropic Messages API (``anthropic:<model_name>``).

    Args:
        model_name: Anthropic's name of the model (``claude-sonnet-4-5``, …).
        base_url: the API's root, without ``/v1`` (default: Anthropic's own).
        api_key: sent as ``Authorization: Bearer …``.
        timeout_seconds: the most one call may take, in (0, 3600].
        client: a client to share, made by :func:`make_client` with the same settings
            (:class:`AnthropicModels` passes its own). Without one the model makes its own,
            which :meth:`aclose` releases.

    Raises:
        AnthropicConfigError: a bad URL, an empty key or a timeout out of range.
    """

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str | None = None,
        api_key: str = DEFAULT_API_KEY,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        client: anthropic.AsyncAnthropic | None = None,
    ) -> None:
        settings = AnthropicSettings(base_url or DEFAULT_BASE_URL, api_key, timeout_seconds)
        super().__init__(model_name, settings, _PROVIDER, client=client, make_client=make_client)

    def __repr__(self) -> str:
        url = safe_url(self._settings.base_url)
        return f"AnthropicModel({self.model_name!r}, base_url={url!r})"

    def _named(self) -> str:
        return f"the Anthropic model {self.model_name[:100]!r}"

    async def _call(self, request: ModelRequest) -> ModelResponse:
        """One ``POST /v1/messages``."""
        wire = wire_request(request)
        with anyio.fail_after(self._settings.timeout_seconds):
            body = await self._post(request.model, wire)
        return parse_answer(body, wire.answer)

    def _failure(self, error: Exception) -> ModelFailure | None:
        if (failure := super()._failure(error)) is not None:
            return failure
        if isinstance(error, ValueError):  # the client's JSON encoder refuses NaN and infinities
            return ModelRejected(f"the request cannot be sent as JSON ({type(error).__name__})")
        return None

    async def _post(self, model: str, wire: WireRequest) -> bytes:
        omit = anthropic.omit
        raw = await self._client.messages.with_raw_response.create(
            model=model,
            max_tokens=wire.max_tokens,
            messages=wire.messages,
            system=omit if wire.system is None else wire.system,
            tools=wire.tools or omit,
            tool_choice=omit if wire.tool_choice is None else wire.tool_choice,
            # The client no longer takes the sampling settings as arguments; the API does.
            extra_body=dict(wire.sampling) or None,
        )
        return await raw.read()


class AnthropicModels(SharedClient[anthropic.AsyncAnthropic]):
    """The models of one Anthropic endpoint, sharing one client.

    Args:
        base_url: the API's root, without ``/v1``; None: Anthropic's own
            (:data:`~workload_model_anthropic.DEFAULT_BASE_URL`).
        api_key: sent as ``Authorization: Bearer …``.
        timeout_seconds: the most one call may take, in (0, 3600].
        endpoint: the endpoint's name, the prefix of the model names served
            (``claude`` serves ``claude:<model-name>``). None: any endpoint-shaped prefix
            (``^[a-z][a-z0-9_-]{0,31}$``), for a registry that has already picked this adapter
            by the prefix.

    Raises:
        AnthropicConfigError: a bad URL, an empty key or a timeout out of range.
    """

    settings: AnthropicSettings

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str = DEFAULT_API_KEY,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        *,
        endpoint: str | None = None,
    ) -> None:
        self.settings = AnthropicSettings(base_url or DEFAULT_BASE_URL, api_key, timeout_seconds)
        self.endpoint = endpoint
        self._client = make_client(self.settings)

    @classmethod
    def from_settings(
        cls, settings: AnthropicSettings, *, endpoint: str | None = None
    ) -> AnthropicModels:
        """The models of the endpoint ``settings`` describe."""
        return cls(settings.base_url, settings.api_key, settings.timeout_seconds, endpoint=endpoint)

    def __repr__(self) -> str:
        return f"AnthropicModels(base_url={safe_url(self.settings.base_url)!r})"

    def _serves(self, prefix: str) -> bool:
        """Whether ``prefix`` is this endpoint (or, with none named, any endpoint's name)."""
        if self.endpoint is None:
            return ENDPOINT_NAME.fullmatch(prefix) is not None
        return prefix == self.endpoint

    def model(self, name: str, *, script: Sequence[JsonObject] | None = None) -> AnthropicModel:
        """The model ``<endpoint>:<model-name>``; ``script`` (the mock model's) is ignored.

        Raises:
            ModelRejected: a name with another endpoint than :attr:`endpoint` (or, when that
                is None, a prefix that is no endpoint name), or with nothing after it.
        """
        del script
        model_name = model_name_of(name, serves=self._serves, wanted=self.endpoint or "<endpoint>")
        return self._model(AnthropicModel, model_name)
