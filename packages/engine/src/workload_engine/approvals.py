"""Deciding approvals (SPEC §11): a person's decision, and expiry, as run commits.

A decision is a revision-checked commit of the approval's run, made by whoever receives it;
it is accepted only while the approval is pending and only for exactly its arguments (the
digest), so among any number of concurrent or replayed decisions exactly one takes effect. The
coordinator expires pending approvals whose ``expires_at`` passed — also the ones that passed
while it was down — and an expired approval is handled as a rejection. Either way the run's
runner is told, and it launches the paused agent attempt again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from workload_domain.approvals import ApprovalRecord, ApprovalStatus, Decision
from workload_domain.errors import (
    ApprovalChanged,
    ApprovalDecided,
    ApprovalNotFound,
    RevisionConflict,
)
from workload_domain.idempotency import IdempotencyRecord, Replayed
from workload_domain.ports import ApprovalStore, ExecutionStore
from workload_engine.approval_planning import decision_commit
from workload_engine.engine import Engine

__all__ = ["ApprovalDecisions", "DecisionStore"]

_MAX_TRIES = 50


class DecisionStore(ExecutionStore, ApprovalStore, Protocol):
    """What deciding approvals needs from the store."""


SaveWith = Callable[[ApprovalRecord], IdempotencyRecord]
"""The idempotency record to save with a decision, made from the decided approval."""


class ApprovalDecisions:
    """Commits people's decisions on approvals, and expires those nobody decided in time."""

    def __init__(self, store: DecisionStore, engine: Engine) -> None:
        self._store = store
        self._engine = engine
        self._clock = engine.clock

    async def decide(
        self,
        approval_id: str,
        decision: Decision,
        digest: str,
        *,
        decided_by: str,
        comment: str | None = None,
        save_with: SaveWith | None = None,
    ) -> ApprovalRecord | Replayed:
        """Approve or reject a pending approval of exactly these arguments.

        Raises:
            ApprovalNotFound: no such approval.
            ApprovalDecided: it is no longer pending, or its ``expires_at`` has passed (then
                it is expired by this call, as the reaper would have).
            ApprovalChanged: ``digest`` is not its arguments' digest.
        """
        status = (
            ApprovalStatus.APPROVED if decision is Decision.APPROVE else ApprovalStatus.REJECTED
        )
        for _ in range(_MAX_TRIES):
            approval = await self._store.find_approval(approval_id)
            if approval is None:
                raise ApprovalNotFound(approval_id)
            if approval.status is not ApprovalStatus.PENDING:
                raise ApprovalDecided(approval_id, approval.status.value)
            if approval.expires_at <= self._clock.now():
                # Its time ran out before this decision: it is expired, whether or not the
                # reaper got to it yet (SPEC §11) — expire it now, and refuse the decision.
                if await self._commit(approval, ApprovalStatus.EXPIRED, None, None, None):
                    raise ApprovalDecided(approval_id, ApprovalStatus.EXPIRED.value)
                continue  # the run changed meanwhile: read the approval again
            if digest != approval.arguments_digest:
                raise ApprovalChanged(approval_id)
            decided = await self._commit(approval, status, decided_by, comment, save_with)
            if decided is not None:
                return decided
        raise RevisionConflict(approval_id, -1)

    async def expire_due(self, limit: int = 200) -> int:
        """Expire every pending approval whose ``expires_at`` has passed; how many."""
        expired = 0
        for approval in await self._store.due_approvals(self._clock.now(), limit):
            for _ in range(_MAX_TRIES):
                current = await self._store.find_approval(approval.approval_id)
                if current is None or current.status is not ApprovalStatus.PENDING:
                    break
                if await self._commit(current, ApprovalStatus.EXPIRED, None, None, None):
                    expired += 1
                    break
        return expired

    async def _commit(
        self,
        approval: ApprovalRecord,
        status: ApprovalStatus,
        decided_by: str | None,
        comment: str | None,
        save_with: SaveWith | None,
    ) -> ApprovalRecord | Replayed | None:
        """One try: None when the run changed meanwhile (try again)."""
        snapshot = await self._store.load_run(approval.run_id)
        now = self._clock.now()
        planned = decision_commit(
            snapshot,
            approval.approval_id,
            status,
            now=now,
            decided_by=decided_by,
            comment=comment,
        )
        if planned is None:
            return None  # not pending in this snapshot: read the approval again
        commit, _ = planned
        decided = next(a for a in commit.approvals if a.approval_id == approval.approval_id)
        try:
            replayed = await self._store.commit(
                commit, None if save_with is None else save_with(decided)
            )
        except RevisionConflict:
            return None
        # The runner launches the paused attempt again (it reads the decision).
        self._engine.notify(approval.run_id)
        if replayed is None:
            self._engine.committed(commit)  # every commit passes there once (the telemetry)
        return decided if replayed is None else replayed
