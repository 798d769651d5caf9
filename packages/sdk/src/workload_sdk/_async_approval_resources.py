"""The async client's approvals and drafts: the twins of :mod:`workload_sdk._approval_resources`.

Arguments, results and errors are those of the sync twin, whose docstrings say them in full
(``timeout=`` and ``extra_headers=`` included); a test compares every signature of the pair.
"""

# ruff: noqa: ASYNC109 - ``timeout=`` is each call's HTTP timeout (or a wait's deadline), as in
# the sync twins (SPEC §8): the same surface, not a cancellation scope.
from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from workload_sdk import _approval_requests
from workload_sdk._base_client import Deadline, ExtraHeaders, RequestTimeout
from workload_sdk._sender import AsyncSender
from workload_sdk.models import Approval, Draft, Page
from workload_sdk.pagination import AsyncPager

__all__ = ["AsyncApprovals", "AsyncDrafts"]


class AsyncApprovals:
    """Approvals of agents' tool calls, awaited (see :class:`~workload_sdk.Approvals`)."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    def list(
        self,
        *,
        status: str | None = None,
        limit: int | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> AsyncPager[Approval]:
        """Every approval, optionally of one status (see :meth:`Approvals.list`)."""
        return AsyncPager(
            lambda cursor: self.list_page(
                status=status,
                limit=limit,
                cursor=cursor,
                timeout=timeout,
                extra_headers=extra_headers,
            )
        )

    async def list_page(
        self,
        *,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Page[Approval]:
        """One page of approvals (see :meth:`Approvals.list_page`)."""
        request = _approval_requests.list_approvals(status, limit, cursor)
        return await self._sender.send(request, timeout, extra_headers)

    async def get(
        self,
        approval_id: str,
        *,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Approval:
        """One approval (see :meth:`Approvals.get`)."""
        request = _approval_requests.get_approval(approval_id)
        return await self._sender.send(request, timeout, extra_headers)

    async def approve(
        self,
        approval_id: str,
        arguments_digest: str,
        *,
        comment: str | None = None,
        idempotency_key: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Approval:
        """Approve exactly the arguments of this digest (see :meth:`Approvals.approve`)."""
        request = _approval_requests.decide_approval(
            approval_id, "approve", arguments_digest, comment, idempotency_key
        )
        return await self._sender.send(request, timeout, extra_headers)

    async def reject(
        self,
        approval_id: str,
        arguments_digest: str,
        *,
        comment: str | None = None,
        idempotency_key: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Approval:
        """Reject the tool call (see :meth:`Approvals.reject`)."""
        request = _approval_requests.decide_approval(
            approval_id, "reject", arguments_digest, comment, idempotency_key
        )
        return await self._sender.send(request, timeout, extra_headers)


class AsyncDrafts:
    """Drafts, awaited (see :class:`~workload_sdk.Drafts`)."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    async def create(
        self,
        prompt: str,
        *,
        workflow_id: str | None = None,
        model: str = "mock",
        script: Sequence[Mapping[str, Any]] | None = None,
        idempotency_key: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Draft:
        """Ask a model for a workflow definition (see :meth:`Drafts.create`)."""
        request = _approval_requests.create_draft(
            prompt, workflow_id, model, script, idempotency_key
        )
        return await self._sender.send(request, timeout, extra_headers)

    def list(
        self,
        *,
        limit: int | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> AsyncPager[Draft]:
        """Every draft, oldest first (see :meth:`Drafts.list`)."""
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
    ) -> Page[Draft]:
        """One page of drafts."""
        request = _approval_requests.list_drafts(limit, cursor)
        return await self._sender.send(request, timeout, extra_headers)

    async def get(
        self,
        draft_id: str,
        *,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Draft:
        """One draft (see :meth:`Drafts.get`)."""
        return await self._sender.send(
            _approval_requests.get_draft(draft_id), timeout, extra_headers
        )

    async def approve(
        self,
        draft_id: str,
        definition_hash: str,
        *,
        idempotency_key: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Draft:
        """Make exactly this definition a version (see :meth:`Drafts.approve`)."""
        request = _approval_requests.approve_draft(draft_id, definition_hash, idempotency_key)
        return await self._sender.send(request, timeout, extra_headers)

    async def reject(
        self,
        draft_id: str,
        *,
        idempotency_key: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Draft:
        """Reject a ready or invalid draft (see :meth:`Drafts.reject`)."""
        request = _approval_requests.reject_draft(draft_id, idempotency_key)
        return await self._sender.send(request, timeout, extra_headers)

    async def wait(
        self,
        draft_id: str,
        *,
        timeout: float | None = 300.0,
        poll_interval: float = 0.5,
        extra_headers: ExtraHeaders = None,
    ) -> Draft:
        """Poll a draft until it is no longer ``generating`` (see :meth:`Drafts.wait`)."""
        deadline = Deadline(timeout, poll_interval)
        while True:
            draft = await self.get(draft_id, extra_headers=extra_headers)
            if not draft.is_generating:
                return draft
            await asyncio.sleep(deadline.next_sleep(draft))
