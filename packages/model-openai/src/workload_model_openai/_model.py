"""The ``openai:<model>`` adapter of the model port: one call, one HTTP request, errors mapped.

A model call is ``POST {base_url}/chat/completions`` through the official ``openai`` client,
with its retries off (``max_retries=0``: SPEC §11 retries a failed attempt through the workflow's
own retry policy, so a client that retried too would multiply calls and hide them from the
journal). It carries the request's sampling settings and, for an output schema, a
``json_schema`` response format (``_options``). What can go wrong becomes a
:class:`~workload_domain.agent.llm.ModelFailure`::

    ModelUnavailable (model_unavailable, retryable)
    ├── HTTP 429, any 5xx
    ├── a refused or broken connection
    ├── no answer within the timeout (connect, send, wait and read together)
    └── a 200 whose body is not a chat completion
    ModelRejected (model_error, not retryable)
    ├── any other 4xx (400, 401, 403, 404, 408, 409, 422, …)
    └── a request for another model than this one

Messages are short, say which server and what happened, and never contain the API key: a
server's own error message is quoted only with the key cut out, and a failure is raised
outside the client's exception handler, so that no chained exception (whose request holds the
``Authorization`` header and whose message may echo the key) travels with it.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import openai

from workload_domain.agent.adapters import mask_secret
from workload_domain.agent.llm import (
    ModelFailure,
    ModelRejected,
    ModelRequest,
    ModelResponse,
    ModelUnavailable,
)
from workload_domain.jsonvalues import JsonObject
from workload_model_openai._options import response_format, sampling
from workload_model_openai._settings import (
    DEFAULT_API_KEY,
    DEFAULT_TIMEOUT_SECONDS,
    OpenAISettings,
    safe_url,
)
from workload_model_openai._wire import MalformedAnswer, parse_answer, wire_messages, wire_tools

__all__ = ["PREFIX", "OpenAIModel", "OpenAIModels", "make_client"]

PREFIX = "openai:"
"""The prefix of the model names this adapter serves: ``openai:<model-name>``."""
_DETAIL_LIMIT = 200


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


def _clean(text: str, secret: str) -> str:
    """``text`` on one line, without ``secret``, at most ``_DETAIL_LIMIT`` characters."""
    text = mask_secret(text, secret)
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    if len(text) > _DETAIL_LIMIT:
        text = text[: _DETAIL_LIMIT - 1] + "…"
    return text


def _server_detail(body: object, secret: str) -> str:
    # The client hands over the decoded body's "error" member (or the raw text).
    if isinstance(body, dict):
        body = body.get("message")
    if not isinstance(body, str):
        return ""
    text = _clean(body, secret)
    return f": {text}" if text else ""


def _failure(error: openai.OpenAIError, settings: OpenAISettings) -> ModelFailure:
    """The port's failure for an error of the client."""
    server = f"the model server at {safe_url(settings.base_url)}"
    if isinstance(error, openai.APITimeoutError):
        return _timed_out(settings)
    if isinstance(error, openai.APIConnectionError):
        cause = _clean(str(error.__cause__ or ""), settings.api_key)
        return ModelUnavailable(f"could not reach {server}" + (f": {cause}" if cause else ""))
    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        detail = _server_detail(error.body, settings.api_key)
        if status == 429:
            return ModelUnavailable(f"{server} is rate limiting (HTTP 429){detail}")
        if status >= 500:
            return ModelUnavailable(f"{server} failed (HTTP {status}){detail}")
        return ModelRejected(f"{server} rejected the request (HTTP {status}){detail}")
    # Another error of the client (its message is not ours to vouch for): not retryable.
    return ModelRejected(f"the OpenAI client failed ({type(error).__name__})")


def _timed_out(settings: OpenAISettings) -> ModelUnavailable:
    return ModelUnavailable(
        f"the model server at {safe_url(settings.base_url)} did not answer "
        f"within {settings.timeout_seconds:g} s"
    )


class OpenAIModel:
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
        self.model_name = model_name
        self._settings = OpenAISettings(base_url, api_key, timeout_seconds)
        self._owns_client = client is None
        self._client = make_client(self._settings) if client is None else client

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model_name!r}, base_url={safe_url(self._settings.base_url)!r})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One ``POST /chat/completions``, never repeated; see the module for the failures.

        ``request.model`` must be this model's name (the runtime journals the request, so the
        request sent is the one recorded).
        """
        if request.model != self.model_name:
            raise ModelRejected(
                f"a request for model {request.model[:100]!r} was sent to "
                f"{PREFIX}{self.model_name[:100]}"
            )
        failure: ModelFailure
        try:
            with anyio.fail_after(self._settings.timeout_seconds):
                body = await self._post(request)
            return parse_answer(body)
        except openai.OpenAIError as error:
            failure = _failure(error, self._settings)
        except TimeoutError:
            failure = _timed_out(self._settings)
        except MalformedAnswer as error:
            failure = ModelUnavailable(
                f"the model server at {safe_url(self._settings.base_url)} answered 200 "
                f"without a chat completion: {error}"
            )
        except UnicodeEncodeError:  # the key is checked to be ASCII: this is the body
            failure = ModelRejected(
                "the conversation holds text that is not valid Unicode (a lone surrogate)"
            )
        # Raised here, outside the handlers, so that it chains nothing of the client's error.
        raise failure

    async def _post(self, request: ModelRequest) -> bytes:
        answer_format = response_format(request.output_schema)
        raw = await self._client.chat.completions.with_raw_response.create(
            model=request.model,
            messages=wire_messages(request.messages),
            tools=wire_tools(request.tools) if request.tools else openai.omit,
            response_format=openai.omit if answer_format is None else answer_format,
            **sampling(request.settings),
        )
        return raw.http_response.content

    async def aclose(self) -> None:
        """Release the client's connections, if this model made the client."""
        if self._owns_client:
            await self._client.close()


class OpenAIModels:
    """The ``openai:<model-name>`` adapters of one server, sharing one client.

    Args:
        base_url: the API's root, ending in ``/v1``.
        api_key: sent as ``Authorization: Bearer …``; local servers ignore it.
        timeout_seconds: the most one call may take, in (0, 3600].

    Raises:
        OpenAIConfigError: a bad URL, an empty key or a timeout out of range.
    """

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
        prefix, _, model_name = name.partition(":")
        if f"{prefix}:" != PREFIX or not model_name.strip():
            raise ModelRejected(
                f"no model adapter serves {name[:100]!r}: this one serves {PREFIX}<model-name>"
            )
        s = self.settings
        return OpenAIModel(
            model_name,
            base_url=s.base_url,
            api_key=s.api_key,
            timeout_seconds=s.timeout_seconds,
            client=self._client,
        )

    async def aclose(self) -> None:
        """Release the shared client's connections (the models made from it stop working)."""
        await self._client.close()

    async def __aenter__(self) -> OpenAIModels:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
