"""Both clients' run endpoints: ``client.runs`` (start, inspect, follow, cancel, result).

Every method also takes ``timeout=`` and ``extra_headers=`` (see
:mod:`workload_sdk._async_resources`); the waits (``wait``, ``result``, ``stream_events``) keep
``timeout=`` for the deadline of the whole wait, and send ``extra_headers`` with each of their
requests.

``start`` and ``cancel`` are writes: each is sent once, with an ``Idempotency-Key`` (generated
when not given). Retry one that got no answer with the key its exception carries
(``exc.idempotency_key``).
"""

# ruff: noqa: ASYNC109 - ``timeout=`` is each call's HTTP timeout (or a wait's deadline), in both
# clients (SPEC §8): the same surface, not a cancellation scope.
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from typing import Any

from workload_sdk import _requests
from workload_sdk._async_pagination import paged
from workload_sdk._async_run_task_resources import AsyncRunTasks
from workload_sdk._async_sender import AsyncSender
from workload_sdk._base_client import Deadline, ExtraHeaders, RequestTimeout, run_output
from workload_sdk._streams import END, EventFollower, SseDecoder, resumable
from workload_sdk.errors import APIConnectionError, APIStatusError
from workload_sdk.models import Event, Page, Run, RunStatus
from workload_sdk.pagination import AsyncPager

__all__ = ["AsyncRuns"]


class AsyncRuns(AsyncRunTasks):
    """Runs of workflow versions, their tasks, attempts, agent steps, events and results."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    async def start(
        self,
        workflow_id: str,
        input: Mapping[str, Any] | None = None,
        *,
        version: int | None = None,
        idempotency_key: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Run:
        """Start a run; it exists once this returns (status ``pending``).

        Without ``version`` the run is of the workflow's latest version, read first with
        ``GET /workflows/{workflow_id}``: a version applied between that read and the start
        is not the one run (the run's ``version`` says which was). A retry with the same
        ``idempotency_key`` after a new version appeared starts the new one, which the server
        refuses (``Conflict``, ``idempotency_key_reused``): pass ``version`` when you may
        retry a start.

        Args:
            workflow_id: The workflow.
            input: The run's input object (sent as ``{"input": ...}``); None sends no body.
            version: The version number to run; None: the latest.
            idempotency_key: The write's ``Idempotency-Key``; generated when not given. Pass
                the same key to retry this write safely: a replay returns the same run.
            timeout: This call's HTTP timeout, for each of its requests (None: the client's).
            extra_headers: Headers added to each of this call's requests.

        Raises:
            TypeError: ``input`` is not a mapping (e.g. a version number passed positionally,
                as ``start(workflow_id, version, input)`` once took it).
            NotFound: ``workflow_not_found`` or ``version_not_found``.
            Conflict: ``idempotency_key_reused``.
        """
        _requests.check_run_input(input)
        if version is None:
            latest = _requests.get_workflow(workflow_id)
            version = (await self._sender.send(latest, timeout, extra_headers)).latest_version
        request = _requests.start_run(workflow_id, version, input, idempotency_key)
        return await self._sender.send(request, timeout, extra_headers)

    def list(
        self,
        *,
        workflow_id: str | None = None,
        status: RunStatus | str | None = None,
        order: str | None = None,
        created_after: datetime | str | None = None,
        created_before: datetime | str | None = None,
        limit: int | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> AsyncPager[Run]:
        """Every run, newest first unless ``order="asc"``, fetched page by page as you iterate.

        Args:
            workflow_id: Only this workflow's runs.
            status: Only runs in this status.
            order: ``desc`` (the server's default: newest first) or ``asc`` (oldest first).
            created_after: Only runs created strictly after this time (an aware datetime or
                an RFC 3339 string).
            created_before: Only runs created strictly before this time.
            limit: Page size (1-200; the server's default is 50).
            timeout: The HTTP timeout of each page's request (None: the client's).
            extra_headers: Headers added to each page's request.
        """
        return paged(
            self.list_page,
            workflow_id=workflow_id,
            status=status,
            order=order,
            created_after=created_after,
            created_before=created_before,
            limit=limit,
            timeout=timeout,
            extra_headers=extra_headers,
        )

    async def list_page(
        self,
        *,
        workflow_id: str | None = None,
        status: RunStatus | str | None = None,
        order: str | None = None,
        created_after: datetime | str | None = None,
        created_before: datetime | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Page[Run]:
        """One page of runs; a cursor only works with the order and filters it was issued for.

        Raises:
            InvalidRequest: ``invalid_cursor`` or ``invalid_argument`` (an unknown status).
        """
        request = _requests.list_runs(
            workflow_id,
            status,
            limit,
            cursor,
            order=order,
            created_after=created_after,
            created_before=created_before,
        )
        return await self._sender.send(request, timeout, extra_headers)

    async def get(
        self,
        run_id: str,
        *,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Run:
        """One run (with ``output`` once it has succeeded).

        Raises:
            NotFound: ``run_not_found``.
        """
        return await self._sender.send(_requests.get_run(run_id), timeout, extra_headers)

    async def get_with_etag(
        self,
        run_id: str,
        *,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> tuple[Run, str]:
        """One run and its ``ETag`` (``'"<revision>"'``), for ``cancel(if_match=...)``."""
        run, response = await self._sender.send_with_response(
            _requests.get_run(run_id), timeout, extra_headers
        )
        return run, response.headers.get("etag") or f'"{run.revision}"'

    async def cancel(
        self,
        run_id: str,
        *,
        if_revision: int | None = None,
        if_match: str | None = None,
        idempotency_key: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Run:
        """Request cancellation of a run (a pending run is canceled at once).

        Args:
            run_id: The run.
            if_revision: Cancel only if the run is still at this ``revision`` (sent as
                ``If-Match``); otherwise :class:`~workload_sdk.PreconditionFailed` and nothing
                is written.
            if_match: The same condition as a raw ``If-Match`` value (e.g. the ETag of
                :meth:`get_with_etag`). Give at most one of the two.
            idempotency_key: The write's ``Idempotency-Key``; generated when not given. Pass
                the same key to retry this write safely.
            timeout: This call's HTTP timeout (None: the client's).
            extra_headers: Headers added to this call's request.

        Returns:
            The run with ``cancel_requested`` set (already ``canceled`` if it was).

        Raises:
            NotFound: ``run_not_found``.
            Conflict: ``run_finished`` (the run succeeded or failed).
            PreconditionFailed: the run's revision changed.
        """
        request = _requests.cancel_run(
            run_id, if_revision=if_revision, if_match=if_match, idempotency_key=idempotency_key
        )
        return await self._sender.send(request, timeout, extra_headers)

    def events(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> AsyncPager[Event]:
        """A run's whole history, by sequence."""
        return paged(
            self.events_page, run_id, limit=limit, timeout=timeout, extra_headers=extra_headers
        )

    async def events_page(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Page[Event]:
        """One page of a run's events."""
        request = _requests.list_events(run_id, limit, cursor)
        return await self._sender.send(request, timeout, extra_headers)

    async def stream_events(
        self,
        run_id: str,
        *,
        after: int = 0,
        timeout: float | None = None,
        reconnects: int | None = None,
        extra_headers: ExtraHeaders = None,
    ) -> AsyncIterator[Event]:
        """A run's events as they are committed, each once, until the run is terminal.

        Follows ``GET /runs/{run_id}/events/stream`` (server-sent events). The iteration ends
        after the run's last event (``run.succeeded``, ``run.failed`` or ``run.canceled`` and
        any event of the same commit). A stream that breaks off (the service restarted, the
        network failed) is resumed with ``Last-Event-ID``: no event is missed or repeated.

        Args:
            run_id: The run.
            after: Start after this sequence (0: from the first event).
            timeout: Seconds to follow at most (the whole call's deadline); None follows until
                the run ends.
            reconnects: Resumptions in a row without a new event before giving up; default
                the client's ``max_retries``.
            extra_headers: Headers added to each (re)connection's request.

        Raises:
            NotFound: ``run_not_found``.
            APIConnectionError: the stream could not be resumed.
            APITimeoutError: ``timeout`` passed before the run ended.
        """
        follower = EventFollower(
            run_id,
            after=after,
            reconnects=self._sender.max_retries if reconnects is None else reconnects,
            timeout=timeout,
        )
        while True:
            request = _requests.stream_events(run_id, follower.last)
            try:
                async with self._sender.stream(
                    request, follower.remaining(), extra_headers
                ) as response:
                    decoder = SseDecoder()
                    async for line in response.aiter_lines():
                        follower.remaining()  # the deadline holds while keep-alives arrive
                        message = decoder.feed(line)
                        item = None if message is None else follower.message(message)
                        if item is END:
                            return
                        if isinstance(item, Event):
                            yield item
                error: Exception | None = None
            except Exception as exc:
                error = resumable(follower, request, exc)
            await asyncio.sleep(follower.closed(error))

    async def wait(
        self,
        run_id: str,
        *,
        timeout: float | None = 300.0,
        poll_interval: float = 0.5,
        extra_headers: ExtraHeaders = None,
    ) -> Run:
        """Poll a run until it is terminal (succeeded, failed or canceled) and return it.

        Args:
            run_id: The run.
            timeout: Seconds to wait at most (the whole call's deadline); None waits forever.
            poll_interval: Seconds between polls.
            extra_headers: Headers added to each poll's request.

        Each poll waits for its answer no longer than the time left (at least a second); once
        the run has been seen, a poll that gets no answer, or 502/503/504 (a restarting
        service), is tried again until the deadline (with ``timeout=None``, raised at once).

        Raises:
            WaitTimeout: the run was still not terminal at the deadline (``exc.run`` is the
                last state seen).
            NotFound: ``run_not_found``.
        """
        deadline = Deadline(timeout, poll_interval)
        last: Run | None = None
        while True:
            request = _requests.get_run(run_id)
            try:
                run = await self._sender.send(
                    request, None, extra_headers, read_at_most=deadline.read_at_most()
                )
            except (APIConnectionError, APIStatusError) as exc:
                if last is None or timeout is None or not _passing(exc):
                    raise
                await asyncio.sleep(deadline.next_sleep(last))  # WaitTimeout at the deadline
                continue
            if run.is_terminal:
                return run
            last = run
            await asyncio.sleep(deadline.next_sleep(run))

    async def result(
        self,
        run_id: str,
        *,
        timeout: float | None = 300.0,
        poll_interval: float = 0.5,
        extra_headers: ExtraHeaders = None,
    ) -> dict[str, Any]:
        """Wait until a run is terminal and return its result: the run's ``output``.

        Args:
            run_id: The run.
            timeout: Seconds to wait at most (the whole call's deadline); None waits forever.
            poll_interval: Seconds between polls.
            extra_headers: Headers added to each poll's request.

        Returns:
            ``{task_key: output}`` of the run's sink tasks (those no other task depends on).

        Raises:
            RunFailed: the run failed (``exc.run`` is the run; its tasks say why).
            RunCanceled: the run was canceled (``exc.run``).
            WaitTimeout: the run was still not terminal at the deadline (``exc.run``).
            NotFound: ``run_not_found``.
        """
        run = await self.wait(
            run_id, timeout=timeout, poll_interval=poll_interval, extra_headers=extra_headers
        )
        return run_output(run)


def _passing(error: APIConnectionError | APIStatusError) -> bool:
    """Whether a poll's failure may pass while a wait goes on (no answer, or 502/503/504)."""
    return isinstance(error, APIConnectionError) or error.status in (502, 503, 504)
