"""The async client's workflow endpoints: the twins of :mod:`workload_sdk._resources`, awaited.

Arguments, results and errors are those of the sync twin, whose docstrings say them in full
(``timeout=`` and ``extra_headers=`` included); a test compares every signature of the pair.
"""

# ruff: noqa: ASYNC109 - ``timeout=`` is each call's HTTP timeout, as in the sync twins (SPEC §8):
# the same surface, not a cancellation scope.
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workload_sdk import _requests
from workload_sdk._base_client import ExtraHeaders, RequestTimeout
from workload_sdk._sender import AsyncSender
from workload_sdk.models import AppliedVersion, Page, Version, VersionSummary, Workflow
from workload_sdk.pagination import AsyncPager

__all__ = ["AsyncVersions", "AsyncWorkflows"]


class AsyncWorkflows:
    """Workflows, awaited (see :class:`~workload_sdk.Workflows`)."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    async def create(
        self,
        definition: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Version:
        """Create a workflow and its version 1 (see :meth:`Workflows.create`)."""
        request = _requests.create_workflow(definition, idempotency_key)
        return await self._sender.send(request, timeout, extra_headers)

    async def apply(
        self,
        definition: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> AppliedVersion:
        """Apply a definition by content (see :meth:`Workflows.apply`)."""
        request = _requests.apply_workflow(definition, idempotency_key)
        version, response = await self._sender.send_with_response(request, timeout, extra_headers)
        return AppliedVersion.of(version, created=response.status_code == 201)

    def list(
        self,
        *,
        limit: int | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> AsyncPager[Workflow]:
        """Every workflow, oldest first, as you ``async for`` (see :meth:`Workflows.list`)."""
        return AsyncPager(
            lambda cursor: self.list_page(
                limit=limit, cursor=cursor, timeout=timeout, extra_headers=extra_headers
            )
        )

    async def list_page(
        self,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Page[Workflow]:
        """One page of workflows (see :meth:`Workflows.list_page`)."""
        request = _requests.list_workflows(limit, cursor)
        return await self._sender.send(request, timeout, extra_headers)

    async def get(
        self,
        workflow_id: str,
        *,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Workflow:
        """One workflow (see :meth:`Workflows.get`)."""
        request = _requests.get_workflow(workflow_id)
        return await self._sender.send(request, timeout, extra_headers)


class AsyncVersions:
    """Versions, awaited (see :class:`~workload_sdk.Versions`)."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    async def create(
        self,
        workflow_id: str,
        definition: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Version:
        """Create the next version of a workflow (see :meth:`Versions.create`)."""
        request = _requests.create_version(workflow_id, definition, idempotency_key)
        return await self._sender.send(request, timeout, extra_headers)

    def list(
        self,
        workflow_id: str,
        *,
        limit: int | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> AsyncPager[VersionSummary]:
        """Every version of a workflow, by number, as you ``async for``."""
        return AsyncPager(
            lambda cursor: self.list_page(
                workflow_id,
                limit=limit,
                cursor=cursor,
                timeout=timeout,
                extra_headers=extra_headers,
            )
        )

    async def list_page(
        self,
        workflow_id: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Page[VersionSummary]:
        """One page of a workflow's versions (summaries, without definitions)."""
        request = _requests.list_versions(workflow_id, limit, cursor)
        return await self._sender.send(request, timeout, extra_headers)

    async def get(
        self,
        workflow_id: str,
        version: int,
        *,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Version:
        """One version with its normalized definition (see :meth:`Versions.get`)."""
        request = _requests.get_version(workflow_id, version)
        return await self._sender.send(request, timeout, extra_headers)
