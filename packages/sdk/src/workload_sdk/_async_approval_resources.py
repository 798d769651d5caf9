"""Both clients' human-in-the-loop endpoints (SPEC §11): ``client.approvals``, ``.drafts``.

Both are places where a model proposes and a person decides, and in both the decision names
what the person saw: an approval's ``arguments_digest``, a draft's ``definition_hash``. If the
server's copy differs, nothing happens (:class:`~workload_sdk.ApprovalChanged`,
:class:`~workload_sdk.DraftChanged`). Decisions are writes: each is sent once with an
``Idempotency-Key`` (generated when not given), as every write of the SDK. Every method also
takes ``timeout=`` and ``extra_headers=`` (see
:mod:`workload_sdk._async_resources`); ``drafts.wait``
keeps ``timeout=`` for the deadline of the whole wait.
"""

# ruff: noqa: ASYNC109 - ``timeout=`` is each call's HTTP timeout (or a wait's deadline), in both
# clients (SPEC §8): the same surface, not a cancellation scope.
from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from workload_sdk import _approval_requests
from workload_sdk._async_pagination import AsyncListing, paged
from workload_sdk._async_sender import AsyncSender
from workload_sdk._base_client import Deadline, ExtraHeaders, RequestTimeout
from workload_sdk._requests import ApiRequest
from workload_sdk.models import Approval, Draft, Page
from workload_sdk.pagination import AsyncPager

__all__ = ["AsyncApprovals", "AsyncDrafts"]


class AsyncApprovals:
    """Approvals of agents' tool calls that require one (``requires_approval: true``)."""

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
        """Every approval, oldest first, optionally of one status, fetched as you iterate.

        Args:
            status: Only approvals in this status (``pending``, ``approved``, ``rejected``,
                ``expired``, ``canceled``).
            limit: Page size (1-200; the server's default is 50).
            timeout: The HTTP timeout of each page's request (None: the client's).
            extra_headers: Headers added to each page's request.
        """
        return paged(
            self.list_page, status=status, limit=limit, timeout=timeout, extra_headers=extra_headers
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
        """One page of approvals; a cursor only works with the status it was issued for.

        Raises:
            InvalidRequest: ``invalid_cursor`` or ``invalid_argument`` (an unknown status).
        """
        request = _approval_requests.list_approvals(status, limit, cursor)
        return await self._sender.send(request, timeout, extra_headers)

    async def get(
        self,
        approval_id: str,
        *,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Approval:
        """One approval.

        Raises:
            NotFound: ``not_found`` (no such approval).
        """
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
        """Approve the tool call: it runs, once, with exactly the arguments of this digest.

        Args:
            approval_id: The approval.
            arguments_digest: The ``arguments_digest`` of the approval you looked at.
            comment: Recorded with the decision (at most 4096 characters).
            idempotency_key: The write's ``Idempotency-Key``; generated when not given. Pass
                the same key to retry this write safely.
            timeout: This call's HTTP timeout (None: the client's).
            extra_headers: Headers added to this call's request.

        Returns:
            The approval, ``approved``, with ``decided_by`` and ``decided_at``.

        Raises:
            ApprovalChanged: the digest is not that of the approval's arguments.
            ApprovalDecided: it is no longer pending (decided, expired or canceled).
            NotFound: ``not_found`` (no such approval).
        """
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
        """Reject the tool call: it never runs, and the model is told so (with the comment).

        Arguments, result and errors are those of :meth:`approve`.
        """
        request = _approval_requests.decide_approval(
            approval_id, "reject", arguments_digest, comment, idempotency_key
        )
        return await self._sender.send(request, timeout, extra_headers)


class AsyncDrafts(AsyncListing[Draft]):
    """Drafts: workflow definitions written by a model, made versions only by a person.

    Listed oldest first.
    """

    def _page_request(self, limit: int | None, cursor: str | None) -> ApiRequest[Page[Draft]]:
        return _approval_requests.list_drafts(limit, cursor)

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
        """Ask a model for a workflow definition; the draft is returned ``generating``.

        Args:
            prompt: What the workflow should do.
            workflow_id: Draft the next version of this workflow instead of a new workflow.
            model: ``mock`` or ``<endpoint>:<model-name>`` (``openai:gpt-4o``).
            script: The mock model's answers, turns ``{"content": "…"}`` (mock only).
            idempotency_key: The write's ``Idempotency-Key``; generated when not given. Pass
                the same key to retry this write safely: a replay returns the same draft.
            timeout: This call's HTTP timeout (None: the client's).
            extra_headers: Headers added to this call's request.

        Raises:
            InvalidRequest: ``invalid_argument`` (e.g. a script for another model).
        """
        request = _approval_requests.create_draft(
            prompt, workflow_id, model, script, idempotency_key
        )
        return await self._sender.send(request, timeout, extra_headers)

    async def get(
        self,
        draft_id: str,
        *,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Draft:
        """One draft.

        Raises:
            NotFound: ``not_found`` (no such draft).
        """
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
        """Make exactly the definition of this hash the workflow (or its next version).

        Args:
            draft_id: The draft.
            definition_hash: The ``definition_hash`` of the draft you looked at.
            idempotency_key: The write's ``Idempotency-Key``; generated when not given.
            timeout: This call's HTTP timeout (None: the client's).
            extra_headers: Headers added to this call's request.

        Returns:
            The draft, ``approved``, with ``version`` set (an approved draft is returned as it
            is: approving again makes no second version).

        Raises:
            DraftChanged: the hash is not that of the draft's definition.
            DraftNotReady: the draft is generating, invalid or rejected.
            NotFound: ``not_found`` (no such draft).
        """
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
        """Reject a ready or invalid draft; it never becomes a version.

        Raises:
            DraftNotReady: the draft is generating or already approved.
            NotFound: ``not_found`` (no such draft).
        """
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
        """Poll a draft until the model is done with it (no longer ``generating``).

        Args:
            draft_id: The draft.
            timeout: Seconds to wait at most (the whole call's deadline); None waits forever.
            poll_interval: Seconds between polls.
            extra_headers: Headers added to each poll's request.

        Returns:
            The draft: ``ready``, ``invalid`` (or already decided).

        Raises:
            DraftWaitTimeout: still generating at the deadline (``exc.draft`` is the last
                state seen).
            NotFound: ``not_found`` (no such draft).
        """
        deadline = Deadline(timeout, poll_interval)
        while True:
            draft = await self.get(draft_id, extra_headers=extra_headers)
            if not draft.is_generating:
                return draft
            await asyncio.sleep(deadline.next_sleep(draft))
