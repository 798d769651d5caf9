"""The Anthropic adapter of the model port: one call, one HTTP request, errors mapped.

A model call is ``POST {base_url}/v1/messages`` through the official ``anthropic`` client, with
its retries off (``max_retries=0``: SPEC §11 retries a failed attempt through the workflow's
own retry policy, so a client that retried too would multiply calls and hide them from the
journal; ADR 0028, as ADR 0013 for OpenAI). What can go wrong becomes a
:class:`~workload_domain.agent.llm.ModelFailure`::

    ModelUnavailable (model_unavailable, retryable)
    ├── HTTP 429, any 5xx (Anthropic's 529 "overloaded" included)
    ├── a refused or broken connection
    ├── no answer within the timeout (connect, send, wait and read together)
    └── a 200 whose body is not a message
    ModelRejected (model_error, not retryable)
    ├── any other 4xx (400, 401, 403, 404, 408, 409, 413, 422, …)
    ├── a request that cannot be sent as JSON (a lone surrogate, a NaN)
    └── a request for another model than this one

Messages are short, say which server and what happened, and never contain the API key: a
server's own error message is quoted only with the key cut out, and a failure is raised
outside the client's exception handler, so that no chained exception (whose request holds the
``Authorization`` header and whose message may echo the key) travels with it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import anthropic
import anyio

from workload_domain.agent.adapters import mask_secret
from workload_domain.agent.llm import (
    ModelFailure,
    ModelRejected,
    ModelRequest,
    ModelResponse,
    ModelUnavailable,
)
from workload_domain.jsonvalues import JsonObject
from workload_model_anthropic._settings import (
    DEFAULT_API_KEY,
    DEFAULT_BASE_URL,
    DEFAULT_TIMEOUT_SECONDS,
    AnthropicSettings,
    safe_url,
)
from workload_model_anthropic._wire import (
    MalformedAnswer,
    WireRequest,
    parse_answer,
    wire_request,
)

__all__ = ["ENDPOINT_NAME", "AnthropicModel", "AnthropicModels", "make_client"]

ENDPOINT_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
"""What an endpoint's name looks like (SPEC §11): the part of a model name before the colon."""
_DETAIL_LIMIT = 200


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


def _clean(text: str, secret: str) -> str:
    """``text`` on one line, without ``secret``, at most ``_DETAIL_LIMIT`` characters."""
    text = mask_secret(text, secret)
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    if len(text) > _DETAIL_LIMIT:
        text = text[: _DETAIL_LIMIT - 1] + "…"
    return text


def _server_detail(error: anthropic.APIStatusError, secret: str) -> str:
    # Anthropic's body is {"type": "error", "error": {"type", "message"}}; another server's
    # (a proxy's) may be any text, which the client hands over as it is.
    detail = error.api_message if isinstance(error.api_message, str) else error.body
    if not isinstance(detail, str):
        return ""
    text = _clean(detail, secret)
    return f": {text}" if text else ""


def _failure(error: anthropic.AnthropicError, settings: AnthropicSettings) -> ModelFailure:
    """The port's failure for an error of the client."""
    server = f"the model server at {safe_url(settings.base_url)}"
    if isinstance(error, anthropic.APITimeoutError):
        return _timed_out(settings)
    if isinstance(error, anthropic.APIConnectionError):
        cause = _clean(str(error.__cause__ or ""), settings.api_key)
        return ModelUnavailable(f"could not reach {server}" + (f": {cause}" if cause else ""))
    if isinstance(error, anthropic.APIStatusError):
        status = error.status_code
        detail = _server_detail(error, settings.api_key)
        if status == 429:
            return ModelUnavailable(f"{server} is rate limiting (HTTP 429){detail}")
        if status >= 500:
            return ModelUnavailable(f"{server} failed (HTTP {status}){detail}")
        return ModelRejected(f"{server} rejected the request (HTTP {status}){detail}")
    # Another error of the client (its message is not ours to vouch for): not retryable.
    return ModelRejected(f"the Anthropic client failed ({type(error).__name__})")


def _timed_out(settings: AnthropicSettings) -> ModelUnavailable:
    return ModelUnavailable(
        f"the model server at {safe_url(settings.base_url)} did not answer "
        f"within {settings.timeout_seconds:g} s"
    )


class AnthropicModel:
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
        self.model_name = model_name
        self._settings = AnthropicSettings(base_url or DEFAULT_BASE_URL, api_key, timeout_seconds)
        self._owns_client = client is None
        self._client = make_client(self._settings) if client is None else client

    def __repr__(self) -> str:
        url = safe_url(self._settings.base_url)
        return f"AnthropicModel({self.model_name!r}, base_url={url!r})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One ``POST /v1/messages``, never repeated; see the module for the failures.

        ``request.model`` must be this model's name (the runtime journals the request, so the
        request sent is the one recorded).
        """
        if request.model != self.model_name:
            raise ModelRejected(
                f"a request for model {request.model[:100]!r} was sent to the Anthropic "
                f"model {self.model_name[:100]!r}"
            )
        failure: ModelFailure
        wire = wire_request(request)
        try:
            with anyio.fail_after(self._settings.timeout_seconds):
                body = await self._post(request.model, wire)
            return parse_answer(body, wire.answer)
        except anthropic.AnthropicError as error:
            failure = _failure(error, self._settings)
        except TimeoutError:
            failure = _timed_out(self._settings)
        except MalformedAnswer as error:
            failure = ModelUnavailable(
                f"the model server at {safe_url(self._settings.base_url)} answered 200 "
                f"without a message: {error}"
            )
        except UnicodeEncodeError:  # the key is checked to be ASCII: this is the body
            failure = ModelRejected(
                "the conversation holds text that is not valid Unicode (a lone surrogate)"
            )
        except ValueError as error:  # the client's JSON encoder refuses NaN and infinities
            failure = ModelRejected(f"the request cannot be sent as JSON ({type(error).__name__})")
        # Raised here, outside the handlers, so that it chains nothing of the client's error.
        raise failure

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

    async def aclose(self) -> None:
        """Release the client's connections, if this model made the client."""
        if self._owns_client:
            await self._client.close()


class AnthropicModels:
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

    def model(self, name: str, *, script: Sequence[JsonObject] | None = None) -> AnthropicModel:
        """The model ``<endpoint>:<model-name>``; ``script`` (the mock model's) is ignored.

        Raises:
            ModelRejected: a name with another endpoint than :attr:`endpoint` (or, when that
                is None, a prefix that is no endpoint name), or with nothing after it.
        """
        del script
        prefix, colon, model_name = name.partition(":")
        served = (
            ENDPOINT_NAME.fullmatch(prefix) is not None
            if self.endpoint is None
            else prefix == self.endpoint
        )
        if not colon or not served or not model_name.strip():
            wanted = self.endpoint or "<endpoint>"
            raise ModelRejected(
                f"no model adapter serves {name[:100]!r}: this one serves {wanted}:<model-name>"
            )
        s = self.settings
        return AnthropicModel(
            model_name,
            base_url=s.base_url,
            api_key=s.api_key,
            timeout_seconds=s.timeout_seconds,
            client=self._client,
        )

    async def aclose(self) -> None:
        """Release the shared client's connections (the models made from it stop working)."""
        await self._client.close()

    async def __aenter__(self) -> AnthropicModels:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
