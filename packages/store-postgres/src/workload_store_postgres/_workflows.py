"""Workflows and their immutable versions."""

from __future__ import annotations

from typing import Any

from workload_domain import listings
from workload_domain.cursors import Page, Position, from_micros, to_micros
from workload_domain.errors import (
    VersionNotFound,
    WorkflowExists,
    WorkflowNotFound,
    WorkloadError,
)
from workload_domain.idempotency import IdempotencyRecord, PendingRecord, Replayed
from workload_domain.records import AppliedVersion, NewVersion, VersionRecord, WorkflowRecord
from workload_store_postgres import _rows
from workload_store_postgres._db import Conn, one, rows
from workload_store_postgres._part import StorePart
from workload_store_postgres._queries import query

__all__ = ["Workflows"]

_MIN_TIME = from_micros(-62135596800 * 1_000_000)  # 0001-01-01T00:00:00Z
_APPLY_TRIES = 3


class _ConcurrentFirstApply(WorkloadError):
    """Another apply created the workflow between this one's read and its insert."""


def _first_apply() -> WorkloadError:
    return _ConcurrentFirstApply("another apply created the workflow first")


_FIRST_APPLY = {"workflows_pkey": _first_apply}


class Workflows(StorePart):
    """The ``WorkflowStore`` part of the store."""

    async def create_workflow(
        self,
        workflow: WorkflowRecord,
        version: VersionRecord,
        idempotency: IdempotencyRecord | None = None,
    ) -> VersionRecord | Replayed:
        """Create a workflow and its version 1."""

        async def work(conn: Conn) -> VersionRecord:
            await conn.execute(query("insert_workflow"), _rows.workflow_params(workflow))
            await conn.execute(query("insert_version"), _rows.version_params(version))
            return version

        return await self._db.write(
            work,
            idempotency,
            {"workflows_pkey": lambda: WorkflowExists(workflow.workflow_id)},
        )

    async def create_version(
        self,
        version: NewVersion,
        idempotency: PendingRecord[VersionRecord] | None = None,
    ) -> VersionRecord | Replayed:
        """Add the next version: concurrent ones queue on the workflow's row lock, none fails."""
        workflow_id = version.workflow_id

        async def work(conn: Conn) -> VersionRecord:
            params = {
                "workflow_id": workflow_id,
                "created_at": version.created_at,
                "description": version.description,
            }
            row = await one(conn, "next_version", params)
            if row is None:
                raise WorkflowNotFound(workflow_id)
            numbered = version.numbered(row["latest_version"])
            await conn.execute(query("insert_version"), _rows.version_params(numbered))
            return numbered

        return await self._db.write(work, idempotency)

    async def apply_version(
        self,
        version: NewVersion,
        idempotency: PendingRecord[AppliedVersion] | None = None,
    ) -> AppliedVersion | Replayed:
        """Make ``version`` the latest unless the latest has its definition (see the port).

        Under the workflow's row lock. Two first applies of one new workflow: the second's
        insert waits for the first's commit, fails on the key and is tried again — it then
        finds the workflow (and, for the same definition, writes nothing).
        """
        workflow_id = version.workflow_id

        async def work(conn: Conn) -> AppliedVersion:
            found = await one(conn, "lock_latest_version", {"workflow_id": workflow_id})
            if found is None:
                numbered = version.numbered(1)
                at = version.created_at
                new = WorkflowRecord(workflow_id, 1, version.description, at, at)
                await conn.execute(query("insert_workflow"), _rows.workflow_params(new))
            elif found["definition_hash"] == version.definition_hash:
                latest = await one(
                    conn,
                    "get_version",
                    {"workflow_id": workflow_id, "version": found["latest_version"]},
                )
                assert latest is not None  # joined above, under the row lock
                return AppliedVersion(_rows.version(latest), created=False)
            else:
                params = {
                    "workflow_id": workflow_id,
                    "created_at": version.created_at,
                    "description": version.description,
                }
                row = await one(conn, "next_version", params)
                assert row is not None  # the row is locked: it is still there
                numbered = version.numbered(row["latest_version"])
            await conn.execute(query("insert_version"), _rows.version_params(numbered))
            return AppliedVersion(numbered, created=True)

        for _ in range(_APPLY_TRIES - 1):
            try:
                return await self._db.write(work, idempotency, _FIRST_APPLY)
            except _ConcurrentFirstApply:
                continue  # another apply created the workflow first: decide again
        return await self._db.write(work, idempotency)

    async def get_workflow(self, workflow_id: str) -> WorkflowRecord:
        """Return a workflow."""
        async with self._db.single() as conn:
            row = await one(conn, "get_workflow", {"workflow_id": workflow_id})
        if row is None:
            raise WorkflowNotFound(workflow_id)
        return _rows.workflow(row)

    async def get_version(self, workflow_id: str, version: int) -> VersionRecord:
        """Return one version with its definition."""
        async with self._db.single() as conn:
            row = await one(conn, "get_version", {"workflow_id": workflow_id, "version": version})
            if row is None:
                if await one(conn, "get_workflow", {"workflow_id": workflow_id}) is None:
                    raise WorkflowNotFound(workflow_id)
                raise VersionNotFound(workflow_id, version)
        return _rows.version(row)

    async def page_workflows(self, cursor: str | None, limit: int) -> Page[WorkflowRecord]:
        """Workflows in (created_at, workflow_id) order."""

        async def fetch(after: Position | None, n: int) -> list[WorkflowRecord]:
            at, last = after or (to_micros(_MIN_TIME), "")
            params = {"after_at": from_micros(int(at)), "after_id": str(last), "limit": n}
            return await self._read("page_workflows", params, _rows.workflow)

        return await self._paginate(listings.WORKFLOWS, {}, cursor, limit, fetch)

    async def page_versions(
        self, workflow_id: str, cursor: str | None, limit: int
    ) -> Page[VersionRecord]:
        """A workflow's versions by number."""

        async def fetch(after: Position | None, n: int) -> list[VersionRecord]:
            params: dict[str, Any] = {
                "workflow_id": workflow_id,
                "after": after[0] if after else 0,
                "limit": n,
            }
            async with self._db.tx() as conn:
                found = [_rows.version(r) for r in await rows(conn, "page_versions", params)]
                if not found and await one(conn, "get_workflow", params) is None:
                    raise WorkflowNotFound(workflow_id)
            return found

        scope = {"workflow_id": workflow_id}
        return await self._paginate(listings.VERSIONS, scope, cursor, limit, fetch)
