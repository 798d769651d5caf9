"""What the sync and async clients share besides request building.

Resolving the configuration (its names and defaults live in :mod:`workload_sdk.config`), the
per-call options every public method takes (``timeout=``, ``extra_headers=``: one
:class:`CallOptions`), turning an :class:`~workload_sdk._requests.ApiRequest` into an httpx
request and a response into a resource or an error, the retry policy, the deadline of waits
(``wait_for_run``, ``drafts.wait``) and what a finished run's result is (``runs.result``).

Every request is built here, with an absolute URL and the SDK's headers: the httpx client only
sends it, so a caller's own client (``Client(http_client=...)``) is used as it is, never
reconfigured.
"""

from __future__ import annotations

import math
import os
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeAlias, TypeVar

import httpx
import pydantic

from workload_sdk._requests import ApiRequest
from workload_sdk._version import __version__
from workload_sdk.config import (
    DEFAULT_BASE_URL,
    TOKEN_ENV,
    URL_ENV,
)
from workload_sdk.errors import (
    APIConnectionError,
    APIResponseValidationError,
    APITimeoutError,
    DraftWaitTimeout,
    RunCanceled,
    RunFailed,
    WaitTimeout,
    from_response,
)
from workload_sdk.models import Draft, Page, Run, RunStatus

__all__ = [
    "AsyncFetch",
    "AsyncPageMethod",
    "CallOptions",
    "ClientOptions",
    "Deadline",
    "ExtraHeaders",
    "Fetch",
    "PageMethod",
    "RequestTimeout",
    "build_request",
    "check_http_client",
    "limits",
    "parse_response",
    "retry_delay",
    "retryable_exception",
    "retryable_response",
    "run_output",
    "transport_error",
]

T = TypeVar("T")
P = ParamSpec("P")

_RETRY_STATUSES = frozenset({502, 503, 504})
_FIRST_DELAY = 0.1
_MAX_DELAY = 2.0
# Transient failures only: a bad URL scheme or a malformed request will not heal by retrying.
_TRANSIENT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)

RequestTimeout: TypeAlias = float | httpx.Timeout | None
"""A call's ``timeout=``: seconds or an :class:`httpx.Timeout` for each HTTP request of the call;
None (the default) keeps the client's. ``httpx.Timeout(None)`` waits without limit."""
ExtraHeaders: TypeAlias = Mapping[str, str] | None
"""A call's ``extra_headers=``: headers added to each HTTP request of the call."""
Fetch: TypeAlias = Callable[[str | None], Page[T]]
"""A listing's page at a cursor (None: the first page), as a pager fetches it."""
AsyncFetch: TypeAlias = Callable[[str | None], Awaitable[Page[T]]]
"""The twin of :data:`Fetch`, awaited (ADR 0035: the one difference the rewrite cannot make)."""
PageMethod: TypeAlias = Callable[P, Page[T]]
"""A resource's ``*_page`` method (it takes ``cursor=``), as ``paged`` calls it (ADR 0035)."""
AsyncPageMethod: TypeAlias = Callable[P, Awaitable[Page[T]]]
"""The twin of :data:`PageMethod`, awaited."""


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """A client's resolved configuration."""

    base_url: str
    token: str | None
    timeout: httpx.Timeout
    max_retries: int

    @classmethod
    def resolve(
        cls,
        *,
        base_url: str | None,
        token: str | None,
        timeout: float | httpx.Timeout | None,
        max_retries: int,
        environ: Mapping[str, str] | None = None,
    ) -> ClientOptions:
        """Arguments first, then ``WORKLOAD_URL`` / ``WORKLOAD_TOKEN``, then defaults."""
        env = os.environ if environ is None else environ
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        url = base_url or env.get(URL_ENV) or DEFAULT_BASE_URL
        token = token or env.get(TOKEN_ENV) or None
        if token is not None and not _SENDABLE_TOKEN.fullmatch(token):
            # Else it fails at each request, as if the server could not be reached.
            raise ValueError(
                "the token holds what an HTTP header cannot carry (a line break or another "
                "control character, a non-ASCII letter, a space or tab at either end)"
            )
        return cls(
            base_url=url.rstrip("/"),
            token=token,
            timeout=timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout),
            max_retries=max_retries,
        )

    def headers(self) -> dict[str, str]:
        """Headers sent with every request."""
        headers = {
            "Accept": "application/json",
            "User-Agent": f"workload-sdk/{__version__} python-httpx/{httpx.__version__}",
        }
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers


_RESERVED_HEADERS = frozenset({"idempotency-key"})
_SENDABLE_TOKEN = re.compile(r"[\x21-\x7e]([\t\x20-\x7e]*[\x21-\x7e])?")
"""What a header can carry of a token: ASCII, no control character but a tab (no line break),
and neither begun nor ended by a space or a tab (HTTP trims them: h11 refuses them)."""


@dataclass(frozen=True, slots=True)
class CallOptions:
    """The per-call options of a public method: ``timeout=`` and ``extra_headers=``.

    Every public method of every resource takes both and hands them here, so that they mean the
    same everywhere: they apply to each HTTP request the call sends (each page of a listing,
    each try of a retried read, each poll of a wait).
    """

    timeout: httpx.Timeout | None = None
    """The HTTP timeout of this call's requests; None: the client's."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Headers added to this call's requests (the request's own headers still win)."""

    @classmethod
    def of(cls, timeout: RequestTimeout = None, extra_headers: ExtraHeaders = None) -> CallOptions:
        """Checked options.

        Raises:
            TypeError: a timeout that is not a number or an :class:`httpx.Timeout`, or a
                header that is not a string.
            ValueError: an ``Idempotency-Key`` among the extra headers (pass
                ``idempotency_key=``: the SDK must know the key to hand it back on a failure).
        """
        if timeout is not None and not isinstance(timeout, httpx.Timeout):
            if isinstance(timeout, bool) or not isinstance(timeout, int | float):
                raise TypeError(f"timeout must be seconds or an httpx.Timeout, not {timeout!r}")
            timeout = httpx.Timeout(timeout)
        headers = dict(extra_headers or {})
        for name, value in headers.items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise TypeError(f"extra_headers must map str to str, not {name!r}: {value!r}")
            if name.lower() in _RESERVED_HEADERS:
                raise ValueError(f"pass idempotency_key= instead of an extra {name} header")
        return cls(timeout, headers)


def build_request(
    http: httpx.Client | httpx.AsyncClient,
    client: ClientOptions,
    request: ApiRequest[Any],
    call: CallOptions,
    *,
    read_at_most: float | None = None,
) -> httpx.Request:
    """The httpx request of an API request: absolute URL, every header, the call's timeout.

    Headers, weakest first: the httpx client's own (a caller's ``http_client``), the SDK's
    (``Authorization``, ``Accept``, ``User-Agent``), the call's ``extra_headers``, the request's
    own (``Idempotency-Key``, ``If-Match`` …). ``read_at_most`` caps the read timeout (a
    stream's deadline).
    """
    timeout = _timeout(
        client.timeout if call.timeout is None else call.timeout, request.read_timeout
    )
    if read_at_most is not None and (timeout.read is None or timeout.read > read_at_most):
        timeout = httpx.Timeout(
            connect=timeout.connect, read=read_at_most, write=timeout.write, pool=timeout.pool
        )
    headers = httpx.Headers(client.headers())
    headers.update(call.headers)
    headers.update(request.headers)
    return http.build_request(
        request.method,
        client.base_url + request.path,
        params=dict(request.params),
        headers=headers,
        json=None if request.json is None else dict(request.json),
        timeout=timeout,
    )


def _timeout(configured: httpx.Timeout, least_read: float | None) -> httpx.Timeout:
    """The client's timeout, with a read timeout of at least ``least_read`` seconds."""
    if least_read is None or configured.read is None or configured.read >= least_read:
        return configured
    return httpx.Timeout(
        connect=configured.connect,
        read=least_read,
        write=configured.write,
        pool=configured.pool,
    )


def parse_response(request: ApiRequest[T], response: httpx.Response) -> T:
    """The resource of a success response.

    Raises:
        APIStatusError: a subclass per status family, for any non-2xx response.
        APIResponseValidationError: a 2xx body that is not the documented resource.
    """
    if not response.is_success:
        raise from_response(response, idempotency_key=request.idempotency_key)
    request_id = response.headers.get("x-request-id")
    try:
        data = response.json()
    except (ValueError, RecursionError):  # nested deeper than the parser goes: not the resource
        raise APIResponseValidationError(
            "the response body is not JSON",
            status=response.status_code,
            request_id=request_id,
            response=response,
            idempotency_key=request.idempotency_key,
        ) from None
    try:
        return request.parse(data)
    except pydantic.ValidationError as exc:
        raise APIResponseValidationError(
            f"the response body is not the documented resource: {exc}",
            status=response.status_code,
            request_id=request_id,
            response=response,
            idempotency_key=request.idempotency_key,
        ) from exc


def transport_error(
    request: ApiRequest[Any], exc: httpx.RequestError
) -> APIConnectionError | APIResponseValidationError:
    """The SDK error of a request that got no (readable) response.

    A body httpx cannot decode (a ``Content-Encoding`` it is not in) came from the server, which
    may have applied a write: ``APIResponseValidationError``, with the write's key. Anything
    else (connecting, sending, receiving): ``APIConnectionError`` (``APITimeoutError``).
    """
    reason = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.DecodingError):
        return APIResponseValidationError(
            f"{request.method} {request.path}: the response body cannot be decoded: {reason}",
            idempotency_key=request.idempotency_key,
        )
    cls = APITimeoutError if isinstance(exc, httpx.TimeoutException) else APIConnectionError
    return cls(
        f"{request.method} {request.path} got no response: {reason}",
        idempotency_key=request.idempotency_key,
    )


def retryable_exception(request: ApiRequest[Any], exc: httpx.RequestError) -> bool:
    """Whether a failure without a response may be retried: transient, and safe to repeat.

    A write that got no response may have been applied; only its caller can decide to retry
    it, with the same idempotency key. Reads are safe to repeat
    (:attr:`ApiRequest.safe_to_repeat`).
    """
    return request.safe_to_repeat and isinstance(exc, _TRANSIENT)


def retryable_response(request: ApiRequest[Any], response: httpx.Response) -> bool:
    """Whether the response of a request safe to repeat says "try again" (502, 503, 504)."""
    return request.safe_to_repeat and response.status_code in _RETRY_STATUSES


def retry_delay(retry: int) -> float:
    """Seconds before retry number ``retry`` (0-based): exponential, capped, jittered."""
    delay = min(_FIRST_DELAY * 2.0**retry, _MAX_DELAY)
    # Jitter spreads out clients that failed together; not a security use of random.
    return delay * random.uniform(0.75, 1.0)  # noqa: S311


class Deadline:
    """The deadline of a wait (``wait_for_run``, ``drafts.wait``): sleep how long, or give up."""

    def __init__(self, timeout: float | None, poll_interval: float) -> None:
        if poll_interval <= 0:
            raise ValueError("poll_interval must be positive")
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be 0 or more (or None to wait forever)")
        self._timeout = timeout
        self._poll = poll_interval
        self._end = math.inf if timeout is None else time.monotonic() + timeout

    def read_at_most(self) -> float | None:
        """The longest one poll may wait for its answer: the time left, at least a second."""
        if self._end == math.inf:
            return None
        return max(self._end - time.monotonic(), 1.0)

    def next_sleep(self, last: Run | Draft) -> float:
        """Seconds to sleep before polling again after seeing ``last`` (not yet settled).

        Raises:
            WaitTimeout: the deadline has passed while waiting for a run.
            DraftWaitTimeout: the deadline has passed while waiting for a draft.
        """
        remaining = self._end - time.monotonic()
        if remaining > 0:
            return min(self._poll, remaining)
        if isinstance(last, Run):
            raise WaitTimeout(
                f"run {last.run_id} is still {last.status} after {self._timeout}s", run=last
            )
        raise DraftWaitTimeout(
            f"draft {last.draft_id} is still {last.status} after {self._timeout}s", draft=last
        )


def run_output(run: Run) -> dict[str, Any]:
    """The result of a terminal run: its ``output`` (``{sink task key: output}``).

    Raises:
        RunFailed: the run failed (``exc.run`` is the run).
        RunCanceled: the run was canceled (``exc.run`` is the run).
    """
    if run.status is RunStatus.FAILED:
        raise RunFailed(f"run {run.run_id} failed ({_counts(run)})", run=run)
    if run.status is RunStatus.CANCELED:
        raise RunCanceled(f"run {run.run_id} was canceled ({_counts(run)})", run=run)
    # A server older than run results sends no output: the run succeeded with nothing to show.
    return dict(run.output or {})


def _counts(run: Run) -> str:
    counts = ", ".join(f"{n} {status}" for status, n in run.task_counts.items() if n)
    return f"tasks: {counts}" if counts else "no tasks"


def check_http_client(
    http_client: object,
    expected: type[httpx.Client] | type[httpx.AsyncClient],
    transport: object,
    max_connections: int | None,
) -> None:
    """Refuse an ``http_client`` of the other kind, or one given with options it cannot take.

    Raises:
        TypeError: ``http_client`` is not an instance of ``expected``.
        ValueError: ``transport`` or ``max_connections`` given too.
    """
    if http_client is None:
        return
    if not isinstance(http_client, expected):
        raise TypeError(
            f"http_client must be an {expected.__module__}.{expected.__name__}, "
            f"not {type(http_client).__name__}"
        )
    if transport is not None or max_connections is not None:
        raise ValueError(
            "transport and max_connections configure the client the SDK makes; "
            "with http_client=, configure your own"
        )


def limits(max_connections: int | None) -> httpx.Limits:
    """The connection pool's limits: httpx's defaults, or ``max_connections`` all kept alive."""
    if max_connections is None:
        return httpx.Limits(max_connections=100, max_keepalive_connections=20)
    if max_connections < 1:
        raise ValueError("max_connections must be at least 1")
    return httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
