"""The sync client's reads of a run's tasks: ``client.runs.tasks``, ``attempts``, ``steps``.

A part of :class:`~workload_sdk._run_resources.Runs` (kept apart to keep each module small);
every method takes ``timeout=`` and ``extra_headers=`` as the others do.
"""

from __future__ import annotations

from workload_sdk import _requests
from workload_sdk._base_client import ExtraHeaders, RequestTimeout
from workload_sdk._sender import SyncSender
from workload_sdk.models import Attempt, Page, Step, TaskRun
from workload_sdk.pagination import Pager

__all__ = ["RunTasks"]


class RunTasks:
    """A run's tasks, their attempts and an agent task's steps."""

    _sender: SyncSender

    def tasks(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Pager[TaskRun]:
        """Every task of a run, in definition order."""
        return Pager(
            lambda cursor: self.tasks_page(
                run_id, limit=limit, cursor=cursor, timeout=timeout, extra_headers=extra_headers
            )
        )

    def tasks_page(
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
        return self._sender.send(request, timeout, extra_headers)

    def task(
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
        return self._sender.send(request, timeout, extra_headers)

    def attempts(
        self,
        run_id: str,
        task_key: str,
        *,
        limit: int | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Pager[Attempt]:
        """Every attempt at one task, by number."""
        return Pager(
            lambda cursor: self.attempts_page(
                run_id,
                task_key,
                limit=limit,
                cursor=cursor,
                timeout=timeout,
                extra_headers=extra_headers,
            )
        )

    def attempts_page(
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
        return self._sender.send(request, timeout, extra_headers)

    def steps(
        self,
        run_id: str,
        task_key: str,
        *,
        limit: int | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Pager[Step]:
        """Every step of an agent task (model and tool calls), by attempt and sequence.

        Raises:
            NotFound: ``run_not_found`` or ``task_not_found`` (when the first page is read).
        """
        return Pager(
            lambda cursor: self.steps_page(
                run_id,
                task_key,
                limit=limit,
                cursor=cursor,
                timeout=timeout,
                extra_headers=extra_headers,
            )
        )

    def steps_page(
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
        return self._sender.send(request, timeout, extra_headers)
