"""Drafts (SPEC §11): written by their generation once, approved into a version atomically.

Approving locks the draft row (``FOR UPDATE``), checks its status and hash, creates the
workflow or its next version and marks the draft ``approved`` with that version, all in one
transaction with the idempotency record: a draft becomes at most one version, only with the
definition whose hash the approver saw.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from workload_domain import listings
from workload_domain.cursors import Page, Position, from_micros
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
    VersionTaken,
    WorkflowExists,
    WorkflowNotFound,
)
from workload_domain.idempotency import IdempotencyRecord, PendingRecord, Replayed
from workload_domain.records import VersionRecord
from workload_domain.usage import Usage
from workload_store_postgres import _rows
from workload_store_postgres._db import Conn, Row, one
from workload_store_postgres._part import StorePart
from workload_store_postgres._queries import query

__all__ = ["Drafts"]

_NIL_UUID = uuid.UUID(int=0)
_MIN_TIME = from_micros(-62135596800 * 1_000_000)  # 0001-01-01T00:00:00Z


def _draft(row: Row) -> DraftRecord:
    values = dict(row)
    usage = Usage(
        model_calls=values.pop("model_calls"),
        input_tokens=values.pop("input_tokens"),
        output_tokens=values.pop("output_tokens"),
    )
    script = values.pop("script")
    return DraftRecord(
        **{
            **values,
            "draft_id": str(row["draft_id"]),
            "status": DraftStatus(row["status"]),
            "problems": tuple(row["problems"]),
            "script": None if script is None else tuple(script),
        },
        usage=usage,
    )


def _params(draft: DraftRecord) -> dict[str, Any]:
    parsed = _rows.maybe_uuid(draft.draft_id)
    if parsed is None:
        raise StoreIntegrityError("draft ids are canonical UUIDs")
    return {
        "draft_id": parsed,
        "status": draft.status.value,
        "prompt": draft.prompt,
        "model": draft.model,
        "script": None if draft.script is None else Jsonb(list(draft.script)),
        "requested_workflow_id": draft.requested_workflow_id,
        "workflow_id": draft.workflow_id,
        "definition": None if draft.definition is None else Jsonb(draft.definition),
        "definition_hash": draft.definition_hash,
        "problems": Jsonb(list(draft.problems)),
        "model_calls": draft.usage.model_calls,
        "input_tokens": draft.usage.input_tokens,
        "output_tokens": draft.usage.output_tokens,
        "created_by": draft.created_by,
        "created_at": draft.created_at,
        "updated_at": draft.updated_at,
    }


class Drafts(StorePart):
    """The ``DraftStore`` part of the store."""

    async def create_draft(
        self, draft: DraftRecord, idempotency: IdempotencyRecord | None = None
    ) -> DraftRecord | Replayed:
        """Write a new draft with the idempotency record."""

        async def work(conn: Conn) -> DraftRecord:
            await conn.execute(query("insert_draft"), _params(draft))
            return draft

        return await self._db.write(work, idempotency)

    async def find_draft(self, draft_id: str) -> DraftRecord | None:
        """A draft by id."""
        uid = _rows.maybe_uuid(draft_id)
        if uid is None:
            return None
        async with self._db.tx() as conn:
            row = await one(conn, "find_draft", {"draft_id": uid})
        return None if row is None else _draft(row)

    async def page_drafts(self, cursor: str | None, limit: int) -> Page[DraftRecord]:
        """Drafts in (created_at, draft_id) order."""

        async def fetch(after: Position | None, n: int) -> Sequence[DraftRecord]:
            params = {
                "after_at": from_micros(int(after[0])) if after else _MIN_TIME,
                "after_id": (_rows.maybe_uuid(str(after[1])) or _NIL_UUID) if after else _NIL_UUID,
                "limit": n,
            }
            return await self._read("page_drafts", params, _draft)

        return await self._paginate(listings.DRAFTS, {}, cursor, limit, fetch)

    async def generating_drafts(self) -> Sequence[str]:
        """Ids of drafts still generating."""
        return await self._read("generating_drafts", {}, lambda r: str(r["draft_id"]))

    async def finish_draft(self, draft: DraftRecord) -> bool:
        """Write a generation's end if the draft is still generating."""
        async with self._db.tx() as conn:
            return await one(conn, "finish_draft", _params(draft)) is not None

    async def approve_draft(
        self, approval: DraftApproval, idempotency: PendingRecord[DraftRecord] | None = None
    ) -> DraftRecord | Replayed:
        """Make a ready draft a version, atomically (see ``DraftStore``)."""
        version, workflow = approval.version, approval.workflow

        async def work(conn: Conn) -> DraftRecord:
            draft = await _locked(conn, approval.draft_id)
            if not approvable(draft, approval.definition_hash):
                return draft
            numbered = version
            if workflow is not None:
                await conn.execute(query("insert_workflow"), _rows.workflow_params(workflow))
            else:
                # The store numbers it, under the workflow row's lock (as POST …/versions):
                # concurrent new versions queue instead of conflicting.
                params = {
                    "workflow_id": version.workflow_id,
                    "created_at": version.created_at,
                    "description": version.definition.get("description", ""),
                }
                row = await one(conn, "next_version", params)
                if row is None:
                    raise WorkflowNotFound(version.workflow_id)
                numbered = replace(version, version=row["latest_version"])
            await conn.execute(query("insert_version"), _rows.version_params(numbered))
            return await _settle(conn, draft, DraftStatus.APPROVED, approval.now, numbered)

        return await self._db.write(
            work,
            idempotency,
            {
                "workflows_pkey": lambda: WorkflowExists(version.workflow_id),
                "workflow_versions_pkey": lambda: VersionTaken(
                    version.workflow_id, version.version
                ),
            },
        )

    async def reject_draft(
        self,
        draft_id: str,
        now: datetime,
        idempotency: PendingRecord[DraftRecord] | None = None,
    ) -> DraftRecord | Replayed:
        """Reject a ready or invalid draft (see ``DraftStore``)."""

        async def work(conn: Conn) -> DraftRecord:
            draft = await _locked(conn, draft_id)
            if not rejectable(draft):
                return draft
            return await _settle(conn, draft, DraftStatus.REJECTED, now, None)

        return await self._db.write(work, idempotency)


async def _locked(conn: Conn, draft_id: str) -> DraftRecord:
    uid = _rows.maybe_uuid(draft_id)
    row = None if uid is None else await one(conn, "lock_draft", {"draft_id": uid})
    if row is None:
        raise DraftNotFound(draft_id)
    return _draft(row)


async def _settle(
    conn: Conn,
    draft: DraftRecord,
    status: DraftStatus,
    now: datetime,
    version: VersionRecord | None,
) -> DraftRecord:
    settled = replace(
        draft,
        status=status,
        updated_at=now,
        version=None if version is None else version.version,
        workflow_id=draft.workflow_id if version is None else version.workflow_id,
    )
    await conn.execute(
        query("settle_draft"),
        {
            "draft_id": uuid.UUID(draft.draft_id),
            "status": status.value,
            "version": settled.version,
            "workflow_id": settled.workflow_id,
            "updated_at": now,
        },
    )
    return settled
