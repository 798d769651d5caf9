"""The approval store port: approval requests and their decisions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from workload_domain.approvals import ApprovalRecord, ApprovalStatus
from workload_domain.cursors import Page

__all__ = ["ApprovalStore"]


class ApprovalStore(Protocol):
    """Approvals of agents' tool calls (SPEC §11), written by the run's commits."""

    async def find_approval(self, approval_id: str) -> ApprovalRecord | None:
        """An approval by id (None: unknown, or an id that cannot be one)."""
        ...

    async def page_approvals(
        self, status: ApprovalStatus | None, cursor: str | None, limit: int
    ) -> Page[ApprovalRecord]:
        """Approvals in ``(requested_at, approval_id)`` order, optionally of one status."""
        ...

    async def due_approvals(self, now: datetime, limit: int) -> Sequence[ApprovalRecord]:
        """Pending approvals whose ``expires_at`` has passed, oldest first, at most ``limit``."""
        ...
