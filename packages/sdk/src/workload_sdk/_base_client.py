"""What the sync and async clients share besides request building.

Resolving the configuration (its names and defaults live in :mod:`workload_sdk.config`), turning
an :class:`~workload_sdk._requests.ApiRequest` into an httpx request and a response into a
resource or an error, the retry policy, and the deadline of waits (``wait_for_run``,
``drafts.wait``).
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

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
    WaitTimeout,
    from_response,
)
from workload_sdk.models import Draft, Run

__all__ = [
    "ClientOptions",
    "Deadline",
    "build_request",
    "parse_response",
    "retry_delay",
    "retryable_exception",
    "retryable_response",
    "transport_error",
]

T = TypeVar("T")

_RETRY_STATUSES = frozenset({502, 503, 504})
_FIRST_DELAY = 0.1
_MAX_DELAY = 2.0
# Transient failures only: a bad URL scheme or a malformed request will not heal by retrying.
_TRANSIENT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


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
        return cls(
            base_url=url.rstrip("/"),
            token=token or env.get(TOKEN_ENV) or None,
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


def build_request(
    http: httpx.Client | httpx.AsyncClient,
    request: ApiRequest[Any],
    *,
    read_at_most: float | None = None,
) -> httpx.Request:
    """The httpx request of an API request (relative to the client's base URL).

    ``read_at_most`` caps the read timeout (a stream's deadline).
    """
    timeout = _timeout(http.timeout, request.read_timeout)
    if read_at_most is not None and (timeout.read is None or timeout.read > read_at_most):
        timeout = httpx.Timeout(
            connect=timeout.connect, read=read_at_most, write=timeout.write, pool=timeout.pool
        )
    return http.build_request(
        request.method,
        request.path,
        params=dict(request.params),
        headers=dict(request.headers),
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
    except ValueError:
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


def transport_error(request: ApiRequest[Any], exc: httpx.TransportError) -> APIConnectionError:
    """The SDK error of a request that got no response."""
    cls = APITimeoutError if isinstance(exc, httpx.TimeoutException) else APIConnectionError
    reason = str(exc) or type(exc).__name__
    return cls(
        f"{request.method} {request.path} got no response: {reason}",
        idempotency_key=request.idempotency_key,
    )


def retryable_exception(request: ApiRequest[Any], exc: httpx.TransportError) -> bool:
    """Whether a failure without a response may be retried: transient, and not a write.

    A write that got no response may have been applied; only its caller can decide to retry
    it, with the same idempotency key.
    """
    return not request.is_write and isinstance(exc, _TRANSIENT)


def retryable_response(request: ApiRequest[Any], response: httpx.Response) -> bool:
    """Whether a read's response says "try again" (502, 503, 504)."""
    return not request.is_write and response.status_code in _RETRY_STATUSES


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
