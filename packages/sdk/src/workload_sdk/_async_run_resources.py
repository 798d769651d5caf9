"""The async client's run endpoints: the twins of :mod:`workload_sdk._run_resources`, awaited.

Arguments, results and errors are those of the sync twin, whose docstrings say them in full
(``timeout=`` and ``extra_headers=`` included); a test compares every signature of the pair.
"""

# ruff: noqa: ASYNC109 - ``timeout=`` is each call's HTTP timeout (or a wait's deadline), as in
# the sync twins (SPEC §8): the same surface, not a cancellation scope.
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from typing import Any

from workload_sdk import _requests
from workload_sdk._async_run_task_resources import AsyncRunTasks
from workload_sdk._base_client import Deadline, ExtraHeaders, RequestTimeout, run_output
from workload_sdk._sender import AsyncSender
from workload_sdk._streams import END, EventFollower, SseDecoder, resumable
from workload_sdk.models import Event, Page, Run, RunStatus
from workload_sdk.pagination import AsyncPager

__all__ = ["AsyncRuns"]


class AsyncRuns(AsyncRunTasks):
    """Runs, awaited (see :class:`~workload_sdk.Runs`)."""

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

        See :meth:`Runs.start`.
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
        """Every run, newest first unless ``order="asc"``, page by page as you ``async for``.

        See :meth:`Runs.list`.
        """
        return AsyncPager(
            lambda cursor: self.list_page(
                workflow_id=workflow_id,
                status=status,
                order=order,
                created_after=created_after,
                created_before=created_before,
                limit=limit,
                cursor=cursor,
                timeout=timeout,
                extra_headers=extra_headers,
            )
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

        See :meth:`Runs.list_page`.
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
        """One run (with ``output`` once it has succeeded) (see :meth:`Runs.get`)."""
        return await self._sender.send(_requests.get_run(run_id), timeout, extra_headers)

    async def get_with_etag(
        self,
        run_id: str,
        *,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> tuple[Run, str]:
        """One run and its ``ETag`` (``'"<revision>"'``), for ``cancel(if_match=...)``.

        See :meth:`Runs.get_with_etag`.
        """
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

        See :meth:`Runs.cancel`.
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
        """A run's whole history, by sequence (see :meth:`Runs.events`)."""
        return AsyncPager(
            lambda cursor: self.events_page(
                run_id, limit=limit, cursor=cursor, timeout=timeout, extra_headers=extra_headers
            )
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
        """One page of a run's events (see :meth:`Runs.events_page`)."""
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

        See :meth:`Runs.stream_events`.
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

        See :meth:`Runs.wait`.
        """
        deadline = Deadline(timeout, poll_interval)
        while True:
            run = await self.get(run_id, extra_headers=extra_headers)
            if run.is_terminal:
                return run
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

        See :meth:`Runs.result`.
        """
        run = await self.wait(
            run_id, timeout=timeout, poll_interval=poll_interval, extra_headers=extra_headers
        )
        return run_output(run)
