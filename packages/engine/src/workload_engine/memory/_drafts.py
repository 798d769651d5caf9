"""Drafts in the in-memory store (SPEC §11): the same contract as the PostgreSQL store's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

import anyio

from workload_domain import listings
from workload_domain.cursors import Page, Position
from workload_domain.drafts import (
    DraftApproval,
    DraftRecord,
    DraftStatus,
    approvable,
    rejectable,
)
from workload_domain.errors import (
    DraftNotFound,
    StoreIntegrityError,
    WorkflowExists,
    WorkflowNotFound,
)
from workload_domain.idempotency import IdempotencyRecord, PendingRecord, Replayed
from workload_engine.memory._part import MemoryState, copied, is_canonical_uuid

__all__ = ["MemoryDrafts"]


class MemoryDrafts(MemoryState):
    """The ``DraftStore`` part of the in-memory store."""

    async def create_draft(
        self, draft: DraftRecord, idempotency: IdempotencyRecord | None = None
    ) -> DraftRecord | Replayed:
        """Write a new draft with the idempotency record."""
        await anyio.lowlevel.checkpoint()
        if (replayed := self._replayed(idempotency)) is not None:
            return replayed
        if not is_canonical_uuid(draft.draft_id) or draft.draft_id in self._drafts:
            raise StoreIntegrityError("a new draft has a fresh canonical UUID")
        self._drafts[draft.draft_id] = copied(draft)
        self._remember(idempotency)
        return copied(draft)

    async def find_draft(self, draft_id: str) -> DraftRecord | None:
        """A draft by id."""
        await anyio.lowlevel.checkpoint()
        return copied(self._drafts.get(draft_id))

    async def page_drafts(self, cursor: str | None, limit: int) -> Page[DraftRecord]:
        """Drafts in (created_at, draft_id) order."""

        async def fetch(after: Position | None, n: int) -> Sequence[DraftRecord]:
            await anyio.lowlevel.checkpoint()
            found = sorted(self._drafts.values(), key=listings.DRAFTS.position)
            return copied(listings.rows_after(found, listings.DRAFTS, after, n))

        return await listings.paginate(
            self._codec, listings.DRAFTS, scope={}, cursor=cursor, limit=limit, fetch=fetch
        )

    async def generating_drafts(self) -> Sequence[str]:
        """Ids of drafts still generating."""
        await anyio.lowlevel.checkpoint()
        return sorted(
            d.draft_id for d in self._drafts.values() if d.status is DraftStatus.GENERATING
        )

    async def finish_draft(self, draft: DraftRecord) -> bool:
        """Write a generation's end if the draft is still generating."""
        await anyio.lowlevel.checkpoint()
        stored = self._drafts.get(draft.draft_id)
        if stored is None or stored.status is not DraftStatus.GENERATING:
            return False
        self._drafts[draft.draft_id] = copied(draft)
        return True

    async def approve_draft(
        self, approval: DraftApproval, idempotency: PendingRecord[DraftRecord] | None = None
    ) -> DraftRecord | Replayed:
        """Make a ready draft a version, atomically (see ``DraftStore``)."""
        return await self._decide(
            approval.draft_id, idempotency, lambda d: self._approve(d, approval)
        )

    async def reject_draft(
        self,
        draft_id: str,
        now: datetime,
        idempotency: PendingRecord[DraftRecord] | None = None,
    ) -> DraftRecord | Replayed:
        """Reject a ready or invalid draft (see ``DraftStore``)."""

        def reject(draft: DraftRecord) -> DraftRecord:
            if not rejectable(draft):
                return draft
            rejected = replace(draft, status=DraftStatus.REJECTED, updated_at=now)
            self._drafts[draft_id] = rejected
            return rejected

        return await self._decide(draft_id, idempotency, reject)

    async def _decide(
        self,
        draft_id: str,
        idempotency: PendingRecord[DraftRecord] | None,
        decide: Callable[[DraftRecord], DraftRecord],
    ) -> DraftRecord | Replayed:
        """Replay the same decision made before, or ``decide`` on the draft and remember it."""
        await anyio.lowlevel.checkpoint()
        if (replayed := self._replayed(idempotency)) is not None:
            return replayed
        draft = self._drafts.get(draft_id)
        if draft is None:
            raise DraftNotFound(draft_id)
        decided = decide(draft)
        self._remember(None if idempotency is None else idempotency.record(decided))
        return copied(decided)

    def _approve(self, draft: DraftRecord, approval: DraftApproval) -> DraftRecord:
        if not approvable(draft, approval.definition_hash):
            return draft
        version, workflow = approval.version, approval.workflow
        if workflow is not None:
            if workflow.workflow_id in self._workflows:
                raise WorkflowExists(workflow.workflow_id)
            self._workflows[workflow.workflow_id] = workflow
        else:
            current = self._workflows.get(version.workflow_id)
            if current is None:
                raise WorkflowNotFound(version.workflow_id)
            # The store numbers it: the next version, whatever was created meanwhile.
            version = replace(version, version=current.latest_version + 1)
            self._workflows[version.workflow_id] = replace(
                current,
                latest_version=version.version,
                updated_at=version.created_at,
                description=str(version.definition.get("description", "")),
            )
        self._versions[(version.workflow_id, version.version)] = copied(version)
        approved = replace(
            draft,
            status=DraftStatus.APPROVED,
            version=version.version,
            workflow_id=version.workflow_id,
            updated_at=approval.now,
        )
        self._drafts[approval.draft_id] = approved
        return approved
