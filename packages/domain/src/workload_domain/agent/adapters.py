"""What every model adapter shares: its key masked, its URL safe to show, an answer's shape read.

The adapters (``workload_model_openai``, ``workload_model_anthropic``) are independent packages;
neither imports the other. The rules they must apply alike live here, once: a server's message
quoted with the key cut out (ADR 0024), a base URL shown without user info or query, the checks
of a key and a timeout, the words of each failure (unreachable, timed out, an HTTP status, a
200 that is no answer), and the checks that turn a 200 whose body is not an answer into
:class:`MalformedAnswer` (reported as ``model_unavailable``). And the one way every adapter's
model calls: :class:`OneCallModel`, one request of the provider's client within the timeout,
its errors (:class:`Provider`) turned into the port's failures. No provider's package: each
adapter names its client's classes.

What can go wrong in a call becomes a :class:`~workload_domain.agent.llm.ModelFailure`::

    ModelUnavailable (model_unavailable, retryable)
    ├── HTTP 429, any 5xx
    ├── a refused or broken connection
    ├── no answer within the timeout (connect, send, wait and read together)
    └── a 200 whose body is not an answer
    ModelRejected (model_error, not retryable)
    ├── any other 4xx (400, 401, 403, 404, 408, 409, 413, 422, …)
    ├── a request that cannot be sent (a lone surrogate in its text)
    └── a request for another model than the adapter's

A failure's message is short, says which server and what happened, and never contains the API
key: a server's own error message is quoted only with the key cut out, one line, at most
:data:`DETAIL_LIMIT` characters. The adapters raise it outside the client's exception handler,
so that no chained exception (whose request holds the ``Authorization`` header and whose
message may echo the key) travels with it.
"""

from __future__ import annotations

import abc
import math
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, Self, TypeVar
from urllib.parse import urlsplit

from workload_domain.agent.llm import (
    ModelFailure,
    ModelRejected,
    ModelRequest,
    ModelResponse,
    ModelUnavailable,
)
from workload_domain.jsonvalues import strict_loads

__all__ = [
    "DETAIL_LIMIT",
    "MASK",
    "MAX_TIMEOUT_SECONDS",
    "MAX_TOKEN_COUNT",
    "MIN_RUN",
    "NOT_UNICODE",
    "ClientHolder",
    "MalformedAnswer",
    "OneCallModel",
    "Provider",
    "SharedClient",
    "body_object",
    "clean_detail",
    "json_object",
    "key_problem",
    "mask_secret",
    "model_name_of",
    "not_an_answer",
    "optional_string",
    "safe_url",
    "status_failure",
    "timed_out",
    "timeout_problem",
    "token_count",
    "unreachable",
    "wrong_model",
]

MASK = "***"
MIN_RUN = 8
"""The shortest run of the key's characters that is masked (shorter ones are common words)."""
DETAIL_LIMIT = 200
"""The most characters of a server's own message a failure quotes."""
MAX_TIMEOUT_SECONDS = 3600.0
"""The longest timeout of one model call an adapter accepts."""
MAX_TOKEN_COUNT = 10**12
"""The most tokens of a kind one answer may count: more is a provider's error (sums are bigint)."""
NOT_UNICODE = "the conversation holds text that is not valid Unicode (a lone surrogate)"
"""Why a request whose body cannot be encoded is rejected (the key is checked to be ASCII)."""
_FOLD = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
"""ASCII case folding only: it keeps every index where it was (``str.lower`` may not)."""


def mask_secret(text: str, secret: str) -> str:
    """``text`` with every case-insensitive run of 8+ characters of ``secret`` as ``***``.

    A server may echo the key it was sent, and not always verbatim: lower-cased, upper-cased or
    cut short ("Incorrect API key provided: sk-abc…xyz"). So every run of :data:`MIN_RUN` or
    more characters that also occurs in the key is hidden, with the case of ASCII letters
    ignored, not just the whole key. A key shorter than that is hidden where it occurs whole.
    """
    if not secret:
        return text
    folded, key = text.translate(_FOLD), secret.translate(_FOLD)
    width = min(MIN_RUN, len(key))
    pieces = {key[i : i + width] for i in range(len(key) - width + 1)}
    hidden = [False] * len(text)
    for start in range(len(folded) - width + 1):
        if folded[start : start + width] in pieces:
            hidden[start : start + width] = [True] * width
    out: list[str] = []
    for index, char in enumerate(text):
        if not hidden[index]:
            out.append(char)
        elif index == 0 or not hidden[index - 1]:
            out.append(MASK)
    return "".join(out)


def safe_url(url: str) -> str:
    """``url`` without user info, query or fragment: what messages may show of it."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


class MalformedAnswer(Exception):
    """A 200 whose body is not the provider's answer; the message says what is wrong with it."""


def body_object(body: bytes) -> dict[str, Any]:
    """The JSON object a 200's ``body`` holds, parsed strictly (``strict_loads``).

    A NaN, an infinity, a number out of range or a key named twice is not JSON a stored value
    may hold, from a provider as from a client.

    Raises:
        MalformedAnswer: the body is not strict JSON (nor UTF-8), or not an object.
    """
    try:
        data = strict_loads(body)
    except (ValueError, RecursionError):  # UnicodeDecodeError and DuplicateKey included
        raise MalformedAnswer("the body is not JSON") from None
    return json_object(data, "the body")


def json_object(value: Any, where: str) -> dict[str, Any]:
    """``value`` if it is a JSON object.

    Raises:
        MalformedAnswer: it is not; the message names ``where``.
    """
    if not isinstance(value, dict):
        raise MalformedAnswer(f"{where} is not a JSON object")
    return value


def optional_string(value: Any, where: str) -> str | None:
    """``value`` if it is a string or None.

    Raises:
        MalformedAnswer: it is neither.
    """
    if value is not None and not isinstance(value, str):
        raise MalformedAnswer(f"{where} is not a string")
    return value


def token_count(usage: dict[str, Any], name: str) -> int:
    """``usage[name]`` as a count of tokens (absent: 0).

    Raises:
        MalformedAnswer: present but not a non-negative integer, or more than
            :data:`MAX_TOKEN_COUNT` (no answer is that long; the sums are stored as bigint).
    """
    value = usage.get(name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MalformedAnswer(f"usage.{name} is not a count")
    if value > MAX_TOKEN_COUNT:
        raise MalformedAnswer(f"usage.{name} is more than any answer's ({MAX_TOKEN_COUNT})")
    return value


def key_problem(key: str, name: str) -> str | None:
    """What is wrong with an API key (None: nothing); the message names ``name``, never the key.

    It travels in an HTTP header: it must be printable ASCII without spaces, and not empty.
    """
    if not key:
        return f"{name} must not be empty"
    if not all(c.isascii() and c.isprintable() and not c.isspace() for c in key):
        return f"{name} must be printable ASCII without spaces"
    return None


def timeout_problem(seconds: float, name: str) -> str | None:
    """What is wrong with a model call's timeout (None: it is in (0, 3600] seconds)."""
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_TIMEOUT_SECONDS:
        return f"{name} must be a number of seconds in (0, {MAX_TIMEOUT_SECONDS:g}]"
    return None


def clean_detail(text: str, secret: str) -> str:
    """``text`` on one line, without ``secret``, at most :data:`DETAIL_LIMIT` characters."""
    text = mask_secret(text, secret)
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    if len(text) > DETAIL_LIMIT:
        text = text[: DETAIL_LIMIT - 1] + "…"
    return text


def _server(base_url: str) -> str:
    return f"the model server at {safe_url(base_url)}"


def unreachable(base_url: str, cause: BaseException | None, secret: str) -> ModelUnavailable:
    """The failure of a call that reached no server (``cause``: what the client ran into)."""
    text = clean_detail(str(cause or ""), secret)
    return ModelUnavailable(f"could not reach {_server(base_url)}" + (f": {text}" if text else ""))


def timed_out(base_url: str, timeout_seconds: float) -> ModelUnavailable:
    """The failure of a call that took longer than its timeout."""
    return ModelUnavailable(f"{_server(base_url)} did not answer within {timeout_seconds:g} s")


def status_failure(base_url: str, status: int, detail: object, secret: str) -> ModelFailure:
    """The failure of an HTTP error ``status``; ``detail``, the server's message, if a string.

    A 429 or a 5xx is :class:`ModelUnavailable` (worth a retry); any other, rejected.
    """
    text = clean_detail(detail, secret) if isinstance(detail, str) else ""
    said = f": {text}" if text else ""
    server = _server(base_url)
    if status == 429:
        return ModelUnavailable(f"{server} is rate limiting (HTTP 429){said}")
    if status >= 500:
        return ModelUnavailable(f"{server} failed (HTTP {status}){said}")
    return ModelRejected(f"{server} rejected the request (HTTP {status}){said}")


def wrong_model(requested: str, model_name: str, adapter: str) -> ModelRejected | None:
    """The failure of a request for another model than ``model_name`` (None: it is this one).

    The runtime journals the request, so the request sent must be the one recorded: an adapter
    never sends one model's request to another. ``adapter`` names this one in the message.
    """
    if requested == model_name:
        return None
    return ModelRejected(f"a request for model {requested[:100]!r} was sent to {adapter}")


def not_an_answer(base_url: str, what: str, error: MalformedAnswer) -> ModelUnavailable:
    """The failure of a 200 whose body is not ``what`` (``a message``, ``a chat completion``)."""
    return ModelUnavailable(f"{_server(base_url)} answered 200 without {what}: {error}")


def model_name_of(name: str, *, serves: Callable[[str], bool], wanted: str) -> str:
    """The provider's name of the model ``<prefix>:<model-name>``, if ``serves(prefix)``.

    Raises:
        ModelRejected: no colon, a prefix not served, or nothing after the colon; the message
            says the adapter serves ``<wanted>:<model-name>``.
    """
    prefix, colon, model_name = name.partition(":")
    if not colon or not serves(prefix) or not model_name.strip():
        raise ModelRejected(
            f"no model adapter serves {name[:100]!r}: this one serves {wanted}:<model-name>"
        )
    return model_name


class _Client(Protocol):
    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_Client)


class ClientHolder(Generic[ClientT]):
    """A holder of a provider's client (``_client``), which it closes if it made it.

    A model made with a client to share (by its endpoint's models) sets ``_owns_client`` False:
    closing it leaves the shared client open.
    """

    _client: ClientT
    _owns_client: bool = True

    async def aclose(self) -> None:
        """Release the client's connections if this made the client (models share theirs)."""
        if self._owns_client:
            await self._client.close()


class _Endpoint(Protocol):
    # An adapter's settings: where its calls go (checked when they were made).
    @property
    def base_url(self) -> str: ...
    @property
    def api_key(self) -> str: ...
    @property
    def timeout_seconds(self) -> float: ...


ModelT = TypeVar("ModelT")
_ModelT_co = TypeVar("_ModelT_co", covariant=True)
_ClientT_contra = TypeVar("_ClientT_contra", contravariant=True)


class _ModelClass(Protocol[_ModelT_co, _ClientT_contra]):
    def __call__(
        self,
        model_name: str,
        *,
        base_url: str,
        api_key: str,
        timeout_seconds: float,
        client: _ClientT_contra,
    ) -> _ModelT_co: ...


class SharedClient(ClientHolder[ClientT]):
    """The models of one endpoint: one client, which they share, closed with ``async with``."""

    settings: _Endpoint

    def _model(self, model_class: _ModelClass[ModelT, ClientT], model_name: str) -> ModelT:
        """The model ``model_name`` of this endpoint, sharing this client."""
        s = self.settings
        return model_class(
            model_name,
            base_url=s.base_url,
            api_key=s.api_key,
            timeout_seconds=s.timeout_seconds,
            client=self._client,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class _StatusError(Protocol):
    status_code: int


StatusErrorT = TypeVar("StatusErrorT", bound=_StatusError)


@dataclass(frozen=True, slots=True)
class Provider(Generic[StatusErrorT]):
    """What an adapter's model says of its provider: its name, its answer, its client's errors.

    The errors are the client's, by class: the ``openai`` and ``anthropic`` clients raise the
    same four (a base class, a timeout, a connection error, an HTTP status).
    """

    name: str
    """The provider's name (``OpenAI``), for the failure of another error of its client."""
    answer: str
    """What the body of a 200 is (``a message``, ``a chat completion``)."""
    base: type[Exception]
    timeout: type[Exception]
    connection: type[Exception]
    status: type[StatusErrorT]
    detail: Callable[[StatusErrorT], object]
    """The server's own message in a status error (quoted only if a string)."""


EndpointT = TypeVar("EndpointT", bound=_Endpoint)


class OneCallModel(ClientHolder[ClientT], abc.ABC):
    """A model whose call is one request of its provider's client, never repeated.

    An adapter's model says how it calls (:meth:`_call`, within the timeout) and how messages
    name it (:meth:`_named`), and is made with its :class:`Provider`; :meth:`complete` turns
    what goes wrong into the port's failure, raised outside the handler so that it chains
    nothing of the client's error. Without a ``client`` to share (made for ``settings``), it
    makes its own with ``make_client``, which :meth:`aclose` closes.
    """

    def __init__(
        self,
        model_name: str,
        settings: EndpointT,
        provider: Provider[Any],
        *,
        client: ClientT | None,
        make_client: Callable[[EndpointT], ClientT],
    ) -> None:
        self.model_name = model_name
        self._settings: _Endpoint = settings
        self._provider = provider
        self._owns_client = client is None
        self._client = make_client(settings) if client is None else client

    @abc.abstractmethod
    def _named(self) -> str:
        """This model, as a failure names it."""

    @abc.abstractmethod
    async def _call(self, request: ModelRequest) -> ModelResponse:
        """The request sent once and its answer read, within the timeout."""

    def _failure(self, error: Exception) -> ModelFailure | None:
        """The port's failure for ``error`` (None: not one this adapter maps; it propagates)."""
        url, provider = self._settings.base_url, self._provider
        if isinstance(error, provider.timeout | TimeoutError):
            return timed_out(url, self._settings.timeout_seconds)
        if isinstance(error, provider.connection):
            return unreachable(url, error.__cause__, self._settings.api_key)
        if isinstance(error, provider.status):
            detail = provider.detail(error)
            return status_failure(url, error.status_code, detail, self._settings.api_key)
        if isinstance(error, provider.base):  # its message is not ours to vouch for
            return ModelRejected(f"the {provider.name} client failed ({type(error).__name__})")
        if isinstance(error, MalformedAnswer):
            return not_an_answer(url, provider.answer, error)
        if isinstance(error, UnicodeEncodeError):  # the key is checked to be ASCII: the body
            return ModelRejected(NOT_UNICODE)
        return None

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One call, never repeated; see :mod:`workload_domain.agent.adapters` for the failures.

        ``request.model`` must be this model's name (see :func:`wrong_model`).
        """
        if (wrong := wrong_model(request.model, self.model_name, self._named())) is not None:
            raise wrong
        try:
            return await self._call(request)
        except Exception as error:
            failure = self._failure(error)
            if failure is None:
                raise
        # Raised here, outside the handler, so that it chains nothing of the client's error.
        raise failure
