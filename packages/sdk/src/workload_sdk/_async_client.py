"""The entry point: the client, which groups the endpoints and owns the connection pool.

The blocking client and the asyncio one are configured the same way (arguments, then
``WORKLOAD_URL`` / ``WORKLOAD_TOKEN``, then defaults), group endpoints the same way
(``.workflows``, ``.versions``, ``.runs``, for people deciding ``.approvals`` and ``.drafts``,
and for workers ``.attempts``, ``.workers``, ``.queues``) and return the same models; they differ
only in whether calls block or are awaited (the blocking module is derived from the asyncio one
at build time, ADR 0035). A test compares their signatures, and those of every resource pair.

Either sends through an httpx client of its own, or through the caller's (``http_client=``):
that one is used as it is (its transport, pool, proxies, TLS settings, event hooks and default
headers) and never closed by the SDK; the SDK sets each request's URL, its own headers and the
timeout.
"""

from __future__ import annotations

from types import TracebackType

import httpx

from workload_sdk import _requests
from workload_sdk._async_approval_resources import AsyncApprovals, AsyncDrafts
from workload_sdk._async_resources import AsyncVersions, AsyncWorkflows
from workload_sdk._async_run_resources import AsyncRuns
from workload_sdk._async_sender import AsyncSender
from workload_sdk._async_worker_resources import (
    AsyncAttempts,
    AsyncClusterInfo,
    AsyncQueues,
    AsyncWorkers,
)
from workload_sdk._base_client import (
    ClientOptions,
    ExtraHeaders,
    RequestTimeout,
    check_http_client,
    limits,
)
from workload_sdk._transports import AsyncPoolTransport
from workload_sdk.config import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT
from workload_sdk.models import Run, ServiceStatus

__all__ = ["AsyncClient"]


class AsyncClient:
    """A client of the Workload API.

    Args:
        base_url: The server, e.g. ``http://127.0.0.1:8080``; default ``WORKLOAD_URL``, else
            ``http://127.0.0.1:8080``.
        token: The bearer token (viewer reads; operator reads and writes; worker claims and
            reports attempts); default ``WORKLOAD_TOKEN``, else no ``Authorization`` header.
        timeout: Seconds (or an :class:`httpx.Timeout`) for each HTTP request; None for none.
        max_retries: How many times a *read* is retried after a transient transport failure
            or a 502/503/504 (with a small exponential backoff). Writes (``workflows.apply``
            among them) never are.
        transport: An httpx transport (:class:`httpx.AsyncBaseTransport`) to send through
            instead of the network (e.g. :class:`httpx.MockTransport` in tests).
        max_connections: How many connections may be open at once (each kept alive); None
            for httpx's default (100). A request beyond them waits for one to be free.
        http_client: Your own :class:`httpx.AsyncClient` to send through (proxies, TLS, event
            hooks, a shared pool). The SDK sets each request's URL, headers and timeout, and
            never closes it: close it yourself. Not with ``transport`` or ``max_connections``.

    Raises:
        TypeError: ``http_client`` is not an :class:`httpx.AsyncClient`.
        ValueError: ``http_client`` with ``transport`` or ``max_connections``.

    Example:
        >>> hello = {"id": "hello", "tasks": [{"key": "a", "action": "mock"}]}
        >>> async with AsyncClient(token="...") as client:  # doctest: +SKIP
        ...     await client.workflows.apply(hello)
        ...     run = await client.runs.start("hello", {"name": "world"})  # the latest version
        ...     print(await client.runs.result(run.run_id))  # {"a": {...}}
        ...     async for event in client.runs.events(run.run_id):
        ...         print(event.type)
    """

    workflows: AsyncWorkflows
    versions: AsyncVersions
    runs: AsyncRuns
    approvals: AsyncApprovals
    drafts: AsyncDrafts
    attempts: AsyncAttempts
    workers: AsyncWorkers
    queues: AsyncQueues
    cluster: AsyncClusterInfo

    def __init__(
        self,
        *,
        base_url: str | None = None,
        token: str | None = None,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._options = ClientOptions.resolve(
            base_url=base_url, token=token, timeout=timeout, max_retries=max_retries
        )
        check_http_client(http_client, httpx.AsyncClient, transport, max_connections)
        self._owns_http = http_client is None
        pool = limits(max_connections)
        self._http = (
            http_client
            if http_client is not None
            else httpx.AsyncClient(
                timeout=self._options.timeout,
                transport=transport if transport is not None else AsyncPoolTransport(pool),
                limits=pool,
            )
        )
        sender = AsyncSender(self._http, self._options)
        self._sender = sender
        self.workflows = AsyncWorkflows(sender)
        self.versions = AsyncVersions(sender)
        self.runs = AsyncRuns(sender)
        self.approvals = AsyncApprovals(sender)
        self.drafts = AsyncDrafts(sender)
        self.attempts = AsyncAttempts(sender)
        self.workers = AsyncWorkers(sender)
        self.queues = AsyncQueues(sender)
        self.cluster = AsyncClusterInfo(sender)

    @property
    def base_url(self) -> str:
        """The server's base URL."""
        return self._options.base_url

    @property
    def max_retries(self) -> int:
        """How many times a read is retried after a transient failure."""
        return self._options.max_retries

    async def wait_for_run(
        self,
        run_id: str,
        *,
        timeout: float | None = 300.0,  # noqa: ASYNC109 - a polling deadline in both clients
        poll_interval: float = 0.5,
        extra_headers: ExtraHeaders = None,
    ) -> Run:
        """Poll a run until it is terminal and return it (see :meth:`AsyncRuns.wait`).

        Args:
            run_id: The run.
            timeout: Seconds to wait at most; None waits forever.
            poll_interval: Seconds between polls.
            extra_headers: Headers added to each poll's request.

        Raises:
            WaitTimeout: the run was still not terminal at the deadline.
        """
        return await self.runs.wait(
            run_id, timeout=timeout, poll_interval=poll_interval, extra_headers=extra_headers
        )

    async def status(
        self,
        *,
        timeout: RequestTimeout = None,  # noqa: ASYNC109 - the HTTP timeout in both clients
        extra_headers: ExtraHeaders = None,
    ) -> ServiceStatus:
        """The service at a glance: role, epoch, active runs and workers, approvals, queues."""
        return await self._sender.send(_requests.get_status(), timeout, extra_headers)

    async def close(self) -> None:
        """Close the connection pool (idempotent); a caller's ``http_client`` stays open."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncClient(base_url={self.base_url!r})"
