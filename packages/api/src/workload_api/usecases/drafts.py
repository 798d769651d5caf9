"""Drafts (SPEC §11): a workflow from a sentence, a version only once a person approves it.

``POST /drafts`` writes the draft (``generating``) with its idempotency record and hands it to
the :class:`~workload_engine.drafting.DraftWriter` after the commit; the answer is 202. Approval
names the ``definition_hash`` the approver saw: the store turns a ``ready`` draft with exactly
that hash into the workflow (or its next version) in one transaction; approving an approved
draft again returns it, and no path makes a model's output a version without that approval.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection

from workload_api import resources, schemas
from workload_api.usecases._bodies import parse, storable
from workload_api.usecases._result import Result
from workload_domain.agent.spec import unknown_endpoint
from workload_domain.drafts import DraftApproval, DraftRecord, DraftStatus
from workload_domain.errors import (
    DraftNotFound,
    InvalidArgument,
    Problem,
    VersionTaken,
    WorkflowExists,
    WorkflowNotFound,
)
from workload_domain.idempotency import (
    IdempotencyClaim,
    IdempotencyRecord,
    Outcome,
    PendingRecord,
    Replayed,
)
from workload_domain.ids import uuid7
from workload_domain.jsonvalues import JsonObject
from workload_domain.ports import Clock, Store
from workload_domain.records import VersionRecord, WorkflowRecord
from workload_engine.drafting import DraftWriter

__all__ = ["DraftUseCases"]

_APPROVE_TRIES = 10


class DraftUseCases:
    """Create, read, approve and reject drafts."""

    def __init__(
        self,
        store: Store,
        writer: DraftWriter,
        clock: Clock,
        endpoints: Collection[str] | None = None,
    ) -> None:
        self._store = store
        self._writer = writer
        self._clock = clock
        self._endpoints = endpoints

    async def create(
        self, body: JsonObject | None, claim: IdempotencyClaim, created_by: str
    ) -> Result:
        """Write a draft and start its generation (202)."""
        request = parse(schemas.CreateDraftRequest, body)
        storable(request.prompt, "prompt")
        script = None
        if request.script is not None:
            if request.model != "mock":
                raise InvalidArgument(
                    "the request body is invalid",
                    (Problem("/script", "only the mock model follows a script"),),
                )
            problems = [
                Problem(f"/script/{i}", 'a turn is {"content": "…"}')
                for i, turn in enumerate(request.script)
                if set(turn) != {"content"} or not isinstance(turn["content"], str)
            ]
            if problems:
                raise InvalidArgument("the request body is invalid", tuple(problems))
            storable(request.script, "script")
            script = tuple(request.script)
        unknown = unknown_endpoint(request.model, self._endpoints)
        if unknown is not None:  # refused now, as in a definition (SPEC §11)
            raise InvalidArgument("the request body is invalid", (Problem("/model", unknown),))
        now = self._clock.now()
        draft = DraftRecord(
            draft_id=uuid7(int(now.timestamp() * 1000), secrets.token_bytes(10)),
            status=DraftStatus.GENERATING,
            prompt=request.prompt,
            model=request.model,
            created_by=created_by,
            created_at=now,
            updated_at=now,
            workflow_id=request.workflow_id,
            requested_workflow_id=request.workflow_id,
            script=script,
        )
        outcome = Outcome(202, resources.draft(draft))
        written = await self._store.create_draft(draft, IdempotencyRecord(claim, outcome))
        if isinstance(written, Replayed):
            draft_id = written.outcome.body.get("draft_id")
            if isinstance(draft_id, str):
                self._writer.submit(draft_id)  # no-op unless it is still to be generated
            return Result.replay(written)
        self._writer.submit(draft.draft_id)
        return Result.of(outcome)

    async def list(self, cursor: str | None, limit: int) -> JsonObject:
        """A page of drafts."""
        return resources.page(await self._store.page_drafts(cursor, limit), resources.draft)

    async def get(self, draft_id: str) -> JsonObject:
        """One draft."""
        return resources.draft(await self._find(draft_id))

    async def approve(
        self, draft_id: str, body: JsonObject | None, claim: IdempotencyClaim
    ) -> Result:
        """Make a ready draft a version, for exactly the hash the approver saw (200)."""
        request = parse(schemas.ApproveDraftRequest, body)
        stored = await self._store.find_outcome(claim)
        if stored is not None:
            return Result.of(stored, replayed=True)

        for _ in range(_APPROVE_TRIES):
            draft = await self._find(draft_id)
            version, workflow = await self._next_version(draft)
            try:
                approval = DraftApproval(
                    draft_id, request.definition_hash, version, workflow, self._clock.now()
                )
                approved = await self._store.approve_draft(approval, PendingRecord(claim, _decided))
            except (VersionTaken, WorkflowExists):
                continue  # another version or workflow was created meanwhile: look again
            # Approving an approved draft with its hash returns it (its record saved with it).
            return _answer(approved)
        raise VersionTaken(draft_id, -1)

    async def reject(
        self, draft_id: str, body: JsonObject | None, claim: IdempotencyClaim
    ) -> Result:
        """Reject a ready or invalid draft (200)."""
        if body:
            raise InvalidArgument("reject takes no body fields")
        stored = await self._store.find_outcome(claim)
        if stored is not None:
            return Result.of(stored, replayed=True)
        await self._find(draft_id)
        now = self._clock.now()
        return _answer(
            await self._store.reject_draft(draft_id, now, PendingRecord(claim, _decided))
        )

    async def _find(self, draft_id: str) -> DraftRecord:
        draft = await self._store.find_draft(draft_id)
        if draft is None:
            raise DraftNotFound(draft_id)
        return draft

    async def _next_version(
        self, draft: DraftRecord
    ) -> tuple[VersionRecord, WorkflowRecord | None]:
        """The version a ready draft would become: of its workflow if it exists, else new."""
        definition = draft.definition or {}
        workflow_id = draft.workflow_id or str(definition.get("id", ""))
        now = self._clock.now()
        try:
            latest = (await self._store.get_workflow(workflow_id)).latest_version
            workflow = None
        except WorkflowNotFound:
            latest = 0
            description = str(definition.get("description", ""))
            workflow = WorkflowRecord(workflow_id, 1, description, now, now)
        version = VersionRecord(
            workflow_id=workflow_id,
            version=latest + 1,
            definition_hash=draft.definition_hash or "",
            task_count=len(definition.get("tasks", [])),
            created_at=now,
            definition=definition,
        )
        return version, workflow


def _decided(draft: DraftRecord) -> Outcome:
    """The outcome of an approval or a rejection, saved with it."""
    return Outcome(200, resources.draft(draft))


def _answer(written: DraftRecord | Replayed) -> Result:
    if isinstance(written, Replayed):  # a concurrent duplicate with the same key won
        return Result.replay(written)
    return Result.of(_decided(written))
