"""Both clients' reads of a run's tasks: ``client.runs.tasks``, ``attempts``, ``steps``.

A part of :class:`~workload_sdk._async_run_resources.AsyncRuns` (kept apart to keep each module
small); every method takes ``timeout=`` and ``extra_headers=`` as the others do.
"""

# ruff: noqa: ASYNC109 - ``timeout=`` is each call's HTTP timeout, in both clients.
from __future__ import annotations

from workload_sdk import _requests
from workload_sdk._async_pagination import paged
from workload_sdk._async_sender import AsyncSender
from workload_sdk._base_client import ExtraHeaders, RequestTimeout
from workload_sdk.models import Attempt, Page, Step, TaskRun
from workload_sdk.pagination import AsyncPager

__all__ = ["AsyncRunTasks"]


class AsyncRunTasks:
    """A run's tasks, their attempts and an agent task's steps."""

    _sender: AsyncSender

    def tasks(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> AsyncPager[TaskRun]:
        """Every task of a run, in definition order."""
        return paged(
            self.tasks_page, run_id, limit=limit, timeout=timeout, extra_headers=extra_headers
        )

    async def tasks_page(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Page[TaskRun]:
        """One page of a run's tasks."""
        request = _requests.list_tasks(run_id, limit, cursor)
        return await self._sender.send(request, timeout, extra_headers)

    async def task(
        self,
        run_id: str,
        task_key: str,
        *,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> TaskRun:
        """One task of a run.

        Raises:
            NotFound: ``run_not_found`` or ``task_not_found``.
        """
        request = _requests.get_task(run_id, task_key)
        return await self._sender.send(request, timeout, extra_headers)

    def attempts(
        self,
        run_id: str,
        task_key: str,
        *,
        limit: int | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> AsyncPager[Attempt]:
        """Every attempt at one task, by number."""
        return paged(
            self.attempts_page,
            run_id,
            task_key,
            limit=limit,
            timeout=timeout,
            extra_headers=extra_headers,
        )

    async def attempts_page(
        self,
        run_id: str,
        task_key: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Page[Attempt]:
        """One page of a task's attempts."""
        request = _requests.list_attempts(run_id, task_key, limit, cursor)
        return await self._sender.send(request, timeout, extra_headers)

    def steps(
        self,
        run_id: str,
        task_key: str,
        *,
        limit: int | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> AsyncPager[Step]:
        """Every step of an agent task (model and tool calls), by attempt and sequence.

        Raises:
            NotFound: ``run_not_found`` or ``task_not_found`` (when the first page is read).
        """
        return paged(
            self.steps_page,
            run_id,
            task_key,
            limit=limit,
            timeout=timeout,
            extra_headers=extra_headers,
        )

    async def steps_page(
        self,
        run_id: str,
        task_key: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Page[Step]:
        """One page of an agent task's steps (a task of another action has none)."""
        request = _requests.list_steps(run_id, task_key, limit, cursor)
        return await self._sender.send(request, timeout, extra_headers)
