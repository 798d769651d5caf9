"""The async client's approvals and drafts: the twins of :mod:`workload_sdk._approval_resources`.

Arguments, results and errors are those of the sync twin, whose docstrings say them in full.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from workload_sdk import _requests
from workload_sdk._base_client import Deadline
from workload_sdk._sender import AsyncSender
from workload_sdk.models import Approval, Draft, Page
from workload_sdk.pagination import AsyncPager

__all__ = ["AsyncApprovals", "AsyncDrafts"]


class AsyncApprovals:
    """Approvals of agents' tool calls, awaited (see :class:`~workload_sdk.Approvals`)."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    def list(self, *, status: str | None = None, limit: int | None = None) -> AsyncPager[Approval]:
        """Every approval, optionally of one status (see :meth:`Approvals.list`)."""
        return AsyncPager(lambda cursor: self.list_page(status=status, limit=limit, cursor=cursor))

    async def list_page(
        self, *, status: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> Page[Approval]:
        """One page of approvals (see :meth:`Approvals.list_page`)."""
        return await self._sender.send(_requests.list_approvals(status, limit, cursor))

    async def get(self, approval_id: str) -> Approval:
        """One approval (see :meth:`Approvals.get`)."""
        return await self._sender.send(_requests.get_approval(approval_id))

    async def approve(
        self,
        approval_id: str,
        arguments_digest: str,
        *,
        comment: str | None = None,
        idempotency_key: str | None = None,
    ) -> Approval:
        """Approve exactly the arguments of this digest (see :meth:`Approvals.approve`)."""
        return await self._sender.send(
            _requests.decide_approval(
                approval_id, "approve", arguments_digest, comment, idempotency_key
            )
        )

    async def reject(
        self,
        approval_id: str,
        arguments_digest: str,
        *,
        comment: str | None = None,
        idempotency_key: str | None = None,
    ) -> Approval:
        """Reject the tool call (see :meth:`Approvals.reject`)."""
        return await self._sender.send(
            _requests.decide_approval(
                approval_id, "reject", arguments_digest, comment, idempotency_key
            )
        )


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
    ) -> Draft:
        """Ask a model for a workflow definition (see :meth:`Drafts.create`)."""
        return await self._sender.send(
            _requests.create_draft(prompt, workflow_id, model, script, idempotency_key)
        )

    def list(self, *, limit: int | None = None) -> AsyncPager[Draft]:
        """Every draft, oldest first (see :meth:`Drafts.list`)."""
        return AsyncPager(lambda cursor: self.list_page(limit=limit, cursor=cursor))

    async def list_page(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Draft]:
        """One page of drafts."""
        return await self._sender.send(_requests.list_drafts(limit, cursor))

    async def get(self, draft_id: str) -> Draft:
        """One draft (see :meth:`Drafts.get`)."""
        return await self._sender.send(_requests.get_draft(draft_id))

    async def approve(
        self, draft_id: str, definition_hash: str, *, idempotency_key: str | None = None
    ) -> Draft:
        """Make exactly this definition a version (see :meth:`Drafts.approve`)."""
        return await self._sender.send(
            _requests.approve_draft(draft_id, definition_hash, idempotency_key)
        )

    async def reject(self, draft_id: str, *, idempotency_key: str | None = None) -> Draft:
        """Reject a ready or invalid draft (see :meth:`Drafts.reject`)."""
        return await self._sender.send(_requests.reject_draft(draft_id, idempotency_key))

    async def wait(
        self,
        draft_id: str,
        *,
        timeout: float | None = 300.0,  # noqa: ASYNC109 - a polling deadline, as in the sync twin
        poll_interval: float = 0.5,
    ) -> Draft:
        """Poll a draft until it is no longer ``generating`` (see :meth:`Drafts.wait`)."""
        deadline = Deadline(timeout, poll_interval)
        while True:
            draft = await self.get(draft_id)
            if not draft.is_generating:
                return draft
            await asyncio.sleep(deadline.next_sleep(draft))
