"""Approvals (SPEC §11): list and read them; decide one, idempotently, for exact arguments.

A decision is an operator's write with an ``Idempotency-Key``: a retry with the same key replays
the first answer, even after the approval was decided (by that very request). It is accepted
only while the approval is pending and only with the digest of its arguments; the decision
records a stable id of the deciding principal (``operator:`` + a short keyed hash), never its
token.
"""

from __future__ import annotations

from workload_api import resources, schemas
from workload_api.usecases._bodies import parse
from workload_api.usecases._result import Result
from workload_domain.approvals import ApprovalRecord, ApprovalStatus, Decision
from workload_domain.errors import ApprovalDecided, ApprovalNotFound, InvalidArgument
from workload_domain.idempotency import IdempotencyClaim, IdempotencyRecord, Outcome, Replayed
from workload_domain.jsonvalues import JsonObject, json_problems
from workload_domain.ports import Store
from workload_engine.approvals import ApprovalDecisions

__all__ = ["ApprovalUseCases", "decider"]


def decider(principal_id: str, role: str) -> str:
    """The stable id a decision records: the role and a short keyed hash of the token.

    ``principal_id`` is ``"hmac:" + hex``, an HMAC of the token under the deployment's key (the
    authenticator's, ADR 0026); its first twelve hex digits name a principal, and without the
    key they cannot be computed from a token, so they do not help to guess one.
    """
    digest = principal_id.partition(":")[2][:12]
    return f"{role}:{digest}"


class ApprovalUseCases:
    """What people do with approvals."""

    def __init__(self, store: Store, decisions: ApprovalDecisions) -> None:
        self._store = store
        self._decisions = decisions

    async def list(
        self, status: ApprovalStatus | None, cursor: str | None, limit: int
    ) -> JsonObject:
        """A page of approvals, optionally of one status."""
        found = await self._store.page_approvals(status, cursor, limit)
        return resources.page(found, resources.approval)

    async def get(self, approval_id: str) -> JsonObject:
        """One approval."""
        found = await self._store.find_approval(approval_id)
        if found is None:
            raise ApprovalNotFound(approval_id)
        return resources.approval(found)

    async def decide(
        self, approval_id: str, body: JsonObject | None, claim: IdempotencyClaim, decided_by: str
    ) -> Result:
        """Approve or reject a pending approval (200 with the approval)."""
        request = parse(schemas.DecisionRequest, body)
        if request.comment is not None:
            problems = tuple(json_problems(request.comment, ("comment",)))
            if problems:
                raise InvalidArgument("the comment cannot be stored", problems)
        # A retry replays even once its own first attempt decided the approval.
        stored = await self._store.find_outcome(claim)
        if stored is not None:
            return Result.of(stored, replayed=True)

        def save_with(decided: ApprovalRecord) -> IdempotencyRecord:
            return IdempotencyRecord(claim, Outcome(200, resources.approval(decided)))

        try:
            decided = await self._decisions.decide(
                approval_id,
                Decision(request.decision),
                request.arguments_digest,
                decided_by=decided_by,
                comment=request.comment,
                save_with=save_with,
            )
        except ApprovalDecided:
            # Decided by a concurrent duplicate of this very request: its answer is ours (the
            # approval and the key's outcome were committed together, so it is visible now).
            stored = await self._store.find_outcome(claim)
            if stored is not None:
                return Result.of(stored, replayed=True)
            raise
        if isinstance(decided, Replayed):
            return Result.replay(decided)
        return Result.of(save_with(decided).outcome)
