"""The async client's endpoints: the twins of :mod:`workload_sdk._resources`, awaiting I/O.

Writes (``create``, ``start``, ``cancel``) take an ``idempotency_key``. When it is not given a
fresh one (a random UUID) is generated, and the write is sent exactly once: the SDK never retries
a write by itself. If a write fails without an answer (:class:`~workload_sdk.APIConnectionError`)
it may or may not have been applied; retry it with the key the exception carries
(``exc.idempotency_key``) and the server answers the original outcome instead of writing twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from workload_sdk import _requests
from workload_sdk._base_client import Deadline
from workload_sdk._sender import AsyncSender
from workload_sdk._streams import END, EventFollower, SseDecoder, resumable
from workload_sdk.models import (
    Attempt,
    Event,
    Page,
    Run,
    RunStatus,
    Step,
    TaskRun,
    Version,
    VersionSummary,
    Workflow,
)
from workload_sdk.pagination import AsyncPager

__all__ = ["AsyncRuns", "AsyncVersions", "AsyncWorkflows"]


class AsyncWorkflows:
    """Workflows: the ids under which immutable versions are created."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    async def create(
        self, definition: Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> Version:
        """Create a workflow and its version 1.

        Args:
            definition: The workflow definition (``id``, ``tasks``, optional ``description``).
            idempotency_key: The write's ``Idempotency-Key``; generated when not given. Pass
                the same key to retry this write safely.

        Returns:
            Version 1, with its normalized definition.

        Raises:
            InvalidRequest: ``invalid_definition``, with every problem in ``errors``.
            Conflict: ``workflow_exists``, or ``idempotency_key_reused`` (the key was used for
                another request).
        """
        return await self._sender.send(_requests.create_workflow(definition, idempotency_key))

    def list(self, *, limit: int | None = None) -> AsyncPager[Workflow]:
        """Every workflow, oldest first, fetched page by page as you ``async for``.

        Args:
            limit: Page size (1-200; the server's default is 50).
        """
        return AsyncPager(lambda cursor: self.list_page(limit=limit, cursor=cursor))

    async def list_page(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Workflow]:
        """One page of workflows.

        Args:
            limit: Page size (1-200; the server's default is 50).
            cursor: The ``next_cursor`` of the previous page; None for the first page.

        Raises:
            InvalidRequest: ``invalid_cursor`` or ``invalid_argument`` (a bad limit).
        """
        return await self._sender.send(_requests.list_workflows(limit, cursor))

    async def get(self, workflow_id: str) -> Workflow:
        """One workflow.

        Raises:
            NotFound: ``workflow_not_found``.
        """
        return await self._sender.send(_requests.get_workflow(workflow_id))


class AsyncVersions:
    """Versions: immutable, numbered definitions of a workflow."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    async def create(
        self,
        workflow_id: str,
        definition: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> Version:
        """Create the next version of a workflow.

        Args:
            workflow_id: The workflow.
            definition: The new definition; its ``id`` may be omitted (it defaults to
                ``workflow_id``).
            idempotency_key: The write's ``Idempotency-Key``; generated when not given. Pass
                the same key to retry this write safely.

        Returns:
            The new version, with its normalized definition.

        Raises:
            InvalidRequest: ``invalid_definition`` or ``workflow_id_mismatch``.
            NotFound: ``workflow_not_found``.
        """
        return await self._sender.send(
            _requests.create_version(workflow_id, definition, idempotency_key)
        )

    def list(self, workflow_id: str, *, limit: int | None = None) -> AsyncPager[VersionSummary]:
        """Every version of a workflow, by number, fetched page by page as you ``async for``."""
        return AsyncPager(lambda cursor: self.list_page(workflow_id, limit=limit, cursor=cursor))

    async def list_page(
        self, workflow_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[VersionSummary]:
        """One page of a workflow's versions (summaries, without definitions)."""
        return await self._sender.send(_requests.list_versions(workflow_id, limit, cursor))

    async def get(self, workflow_id: str, version: int) -> Version:
        """One version with its normalized definition.

        Raises:
            NotFound: ``workflow_not_found`` or ``version_not_found``.
        """
        return await self._sender.send(_requests.get_version(workflow_id, version))


class AsyncRuns:
    """Runs of workflow versions, their tasks, attempts, agent steps and events."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    async def start(
        self,
        workflow_id: str,
        version: int,
        input: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> Run:
        """Start a run of a version; it exists once this returns (status ``pending``).

        Args:
            workflow_id: The workflow.
            version: The version number to run.
            input: The run's input object (sent as ``{"input": ...}``); None sends no body.
            idempotency_key: The write's ``Idempotency-Key``; generated when not given. Pass
                the same key to retry this write safely: a replay returns the same run.

        Raises:
            NotFound: ``workflow_not_found`` or ``version_not_found``.
            Conflict: ``idempotency_key_reused``.
        """
        return await self._sender.send(
            _requests.start_run(workflow_id, version, input, idempotency_key)
        )

    def list(
        self,
        *,
        workflow_id: str | None = None,
        status: RunStatus | str | None = None,
        limit: int | None = None,
    ) -> AsyncPager[Run]:
        """Every run, oldest first, optionally filtered, fetched page by page as you ``async for``.

        Args:
            workflow_id: Only this workflow's runs.
            status: Only runs in this status.
            limit: Page size (1-200; the server's default is 50).
        """
        return AsyncPager(
            lambda cursor: self.list_page(
                workflow_id=workflow_id, status=status, limit=limit, cursor=cursor
            )
        )

    async def list_page(
        self,
        *,
        workflow_id: str | None = None,
        status: RunStatus | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Run]:
        """One page of runs; a cursor only works with the filters it was issued for.

        Raises:
            InvalidRequest: ``invalid_cursor`` or ``invalid_argument`` (an unknown status).
        """
        return await self._sender.send(_requests.list_runs(workflow_id, status, limit, cursor))

    async def get(self, run_id: str) -> Run:
        """One run.

        Raises:
            NotFound: ``run_not_found``.
        """
        return await self._sender.send(_requests.get_run(run_id))

    async def get_with_etag(self, run_id: str) -> tuple[Run, str]:
        """One run and its ``ETag`` (``'"<revision>"'``), for ``cancel(if_match=...)``."""
        run, response = await self._sender.send_with_response(_requests.get_run(run_id))
        return run, response.headers.get("etag") or f'"{run.revision}"'

    async def cancel(
        self,
        run_id: str,
        *,
        if_revision: int | None = None,
        if_match: str | None = None,
        idempotency_key: str | None = None,
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

        Returns:
            The run with ``cancel_requested`` set (already ``canceled`` if it was).

        Raises:
            NotFound: ``run_not_found``.
            Conflict: ``run_finished`` (the run succeeded or failed).
            PreconditionFailed: the run's revision changed.
        """
        return await self._sender.send(
            _requests.cancel_run(
                run_id,
                if_revision=if_revision,
                if_match=if_match,
                idempotency_key=idempotency_key,
            )
        )

    def tasks(self, run_id: str, *, limit: int | None = None) -> AsyncPager[TaskRun]:
        """Every task of a run, in definition order."""
        return AsyncPager(lambda cursor: self.tasks_page(run_id, limit=limit, cursor=cursor))

    async def tasks_page(
        self, run_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[TaskRun]:
        """One page of a run's tasks."""
        return await self._sender.send(_requests.list_tasks(run_id, limit, cursor))

    async def task(self, run_id: str, task_key: str) -> TaskRun:
        """One task of a run.

        Raises:
            NotFound: ``run_not_found`` or ``task_not_found``.
        """
        return await self._sender.send(_requests.get_task(run_id, task_key))

    def attempts(
        self, run_id: str, task_key: str, *, limit: int | None = None
    ) -> AsyncPager[Attempt]:
        """Every attempt at one task, by number."""
        return AsyncPager(
            lambda cursor: self.attempts_page(run_id, task_key, limit=limit, cursor=cursor)
        )

    async def attempts_page(
        self, run_id: str, task_key: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Attempt]:
        """One page of a task's attempts."""
        return await self._sender.send(_requests.list_attempts(run_id, task_key, limit, cursor))

    def steps(self, run_id: str, task_key: str, *, limit: int | None = None) -> AsyncPager[Step]:
        """Every step of an agent task (model and tool calls), by attempt and sequence.

        Raises:
            NotFound: ``run_not_found`` or ``task_not_found`` (when the first page is read).
        """
        return AsyncPager(
            lambda cursor: self.steps_page(run_id, task_key, limit=limit, cursor=cursor)
        )

    async def steps_page(
        self, run_id: str, task_key: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Step]:
        """One page of an agent task's steps (a task of another action has none)."""
        return await self._sender.send(_requests.list_steps(run_id, task_key, limit, cursor))

    def events(self, run_id: str, *, limit: int | None = None) -> AsyncPager[Event]:
        """A run's whole history, by sequence."""
        return AsyncPager(lambda cursor: self.events_page(run_id, limit=limit, cursor=cursor))

    async def events_page(
        self, run_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Event]:
        """One page of a run's events."""
        return await self._sender.send(_requests.list_events(run_id, limit, cursor))

    async def stream_events(
        self,
        run_id: str,
        *,
        after: int = 0,
        timeout: float | None = None,  # noqa: ASYNC109 - a deadline, as in the sync twin
        reconnects: int | None = None,
    ) -> AsyncIterator[Event]:
        """A run's events as they are committed, each once, until the run is terminal.

        The twin of :meth:`workload_sdk.Runs.stream_events` (same arguments and errors).
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
                async with self._sender.stream(request, follower.remaining()) as response:
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
        timeout: float | None = 300.0,  # noqa: ASYNC109 - a polling deadline, as in the sync twin
        poll_interval: float = 0.5,
    ) -> Run:
        """Poll a run until it is terminal (succeeded, failed or canceled) and return it.

        Args:
            run_id: The run.
            timeout: Seconds to wait at most; None waits forever.
            poll_interval: Seconds between polls.

        Raises:
            WaitTimeout: the run was still not terminal at the deadline (``exc.run`` is the
                last state seen).
            NotFound: ``run_not_found``.
        """
        deadline = Deadline(timeout, poll_interval)
        while True:
            run = await self.get(run_id)
            if run.is_terminal:
                return run
            await asyncio.sleep(deadline.next_sleep(run))
