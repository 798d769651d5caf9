"""The only I/O of the SDK: sending an API request with a call's options, and the retry policy.

:class:`AsyncSender` sends over an ``httpx.AsyncClient`` (backoff sleeps: :func:`asyncio.sleep`).
Everything it decides (what to retry, how long to wait, what a response means) comes from
:mod:`workload_sdk._base_client`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx

from workload_sdk._base_client import (
    CallOptions,
    ClientOptions,
    ExtraHeaders,
    RequestTimeout,
    build_request,
    parse_response,
    retry_delay,
    retryable_exception,
    retryable_response,
    transport_error,
)
from workload_sdk._requests import ApiRequest
from workload_sdk._tracing import request_span
from workload_sdk.errors import from_response

__all__ = ["AsyncSender"]

T = TypeVar("T")


class AsyncSender:
    """Sends API requests over an httpx client (an ``httpx.AsyncClient``)."""

    def __init__(self, http: httpx.AsyncClient, options: ClientOptions) -> None:
        self._http = http
        self._options = options

    @property
    def max_retries(self) -> int:
        """How many times a read is retried (and a stream reconnected) in a row."""
        return self._options.max_retries

    @asynccontextmanager
    async def stream(
        self,
        request: ApiRequest[Any],
        read_at_most: float | None = None,
        extra_headers: ExtraHeaders = None,
    ) -> AsyncIterator[httpx.Response]:
        """Open a streamed response (an error status raises its error; nothing is retried)."""
        call = CallOptions.of(None, extra_headers)
        built = build_request(self._http, self._options, request, call, read_at_most=read_at_most)
        try:
            response = await self._http.send(built, stream=True)
        except httpx.RequestError as exc:
            raise transport_error(request, exc) from exc
        try:
            if not response.is_success:
                try:
                    await response.aread()
                except httpx.RequestError as exc:
                    raise transport_error(request, exc) from exc
                raise from_response(response)
            yield response
        finally:
            await response.aclose()

    async def send(
        self,
        request: ApiRequest[T],
        http_timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
        *,
        read_at_most: float | None = None,
    ) -> T:
        """Send a request with a call's options; return its parsed resource or raise its error."""
        sent = await self.send_with_response(
            request, http_timeout, extra_headers, read_at_most=read_at_most
        )
        return sent[0]

    async def send_with_response(
        self,
        request: ApiRequest[T],
        http_timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
        *,
        read_at_most: float | None = None,
    ) -> tuple[T, httpx.Response]:
        """Send a request; return its parsed resource and the HTTP response.

        Reads are retried up to ``max_retries`` times after a transient transport failure or
        a 502/503/504; writes (POST, and an apply's PUT) are sent exactly once.
        ``read_at_most`` caps the read timeout (a wait's time left).
        """
        call = CallOptions.of(http_timeout, extra_headers)
        retry = 0
        with request_span(request.method, request.path, self._options.base_url) as span:
            while True:
                built = build_request(
                    self._http, self._options, request, call, read_at_most=read_at_most
                )
                span.inject(built.headers)
                try:
                    response = await self._http.send(built)
                except httpx.RequestError as exc:  # a DecodingError too: never raw httpx
                    if retry < self._options.max_retries and retryable_exception(request, exc):
                        await asyncio.sleep(retry_delay(retry))
                        retry += 1
                        continue
                    raise transport_error(request, exc) from exc
                span.answered(response.status_code)
                if retry < self._options.max_retries and retryable_response(request, response):
                    await response.aclose()
                    await asyncio.sleep(retry_delay(retry))
                    retry += 1
                    continue
                return parse_response(request, response), response
