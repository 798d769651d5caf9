"""The draft store port: generated workflow drafts and their review."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from workload_domain.cursors import Page
from workload_domain.drafts import DraftApproval, DraftRecord
from workload_domain.idempotency import (
    IdempotencyRecord,
    PendingRecord,
    Replayed,
)

__all__ = ["DraftStore"]


class DraftStore(Protocol):
    """Drafts of workflows written by a model (SPEC §11)."""

    async def create_draft(
        self, draft: DraftRecord, idempotency: IdempotencyRecord | None = None
    ) -> DraftRecord | Replayed:
        """Write a new (generating) draft, with the idempotency record."""
        ...

    async def find_draft(self, draft_id: str) -> DraftRecord | None:
        """A draft by id (None: unknown)."""
        ...

    async def page_drafts(self, cursor: str | None, limit: int) -> Page[DraftRecord]:
        """Drafts in ``(created_at, draft_id)`` order."""
        ...

    async def generating_drafts(self) -> Sequence[str]:
        """Ids of drafts still generating (left by a stopped coordinator, at start-up)."""
        ...

    async def finish_draft(self, draft: DraftRecord) -> bool:
        """Write a generation's end (``ready`` or ``invalid``) if the draft is generating."""
        ...

    async def approve_draft(
        self, approval: DraftApproval, idempotency: PendingRecord[DraftRecord] | None = None
    ) -> DraftRecord | Replayed:
        """Make a ready draft a version, atomically.

        With ``approval.workflow`` (a new one): it and its version 1; else ``approval.version``
        as the next version of an existing workflow, numbered by the store (its ``version`` is
        ignored: concurrent new versions queue, each taking the next number).

        An approved draft with this hash is returned as it is (no second version).

        Raises:
            DraftNotFound · DraftChanged (another hash) · DraftNotReady (not ready) ·
            WorkflowExists · WorkflowNotFound.
        """
        ...

    async def reject_draft(
        self,
        draft_id: str,
        now: datetime,
        idempotency: PendingRecord[DraftRecord] | None = None,
    ) -> DraftRecord | Replayed:
        """Reject a ready or invalid draft (a rejected one is returned as it is).

        Raises:
            DraftNotFound · DraftNotReady (generating, or approved).
        """
        ...
