"""Workflows and their versions in the in-memory store, with the PostgreSQL store's contract."""

from __future__ import annotations

from dataclasses import replace

import anyio

from workload_domain.errors import (
    StoreIntegrityError,
    VersionNotFound,
    WorkflowExists,
    WorkflowNotFound,
)
from workload_domain.idempotency import IdempotencyRecord, PendingRecord, Replayed
from workload_domain.records import AppliedVersion, NewVersion, VersionRecord, WorkflowRecord
from workload_engine.memory._part import MemoryState, copied

__all__ = ["MemoryWorkflows"]


class MemoryWorkflows(MemoryState):
    """The ``WorkflowStore`` part of the in-memory store."""

    async def create_workflow(
        self,
        workflow: WorkflowRecord,
        version: VersionRecord,
        idempotency: IdempotencyRecord | None = None,
    ) -> VersionRecord | Replayed:
        """Create a workflow and its version 1."""
        await anyio.lowlevel.checkpoint()
        if (replayed := self._replayed(idempotency)) is not None:
            return replayed
        if workflow.workflow_id in self._workflows:
            raise WorkflowExists(workflow.workflow_id)
        if version.version != 1 or workflow.latest_version != 1:
            raise StoreIntegrityError("a new workflow starts at version 1")
        self._workflows[workflow.workflow_id] = workflow
        self._versions[(workflow.workflow_id, 1)] = copied(version)
        self._remember(idempotency)
        return copied(version)

    async def create_version(
        self,
        version: NewVersion,
        idempotency: PendingRecord[VersionRecord] | None = None,
    ) -> VersionRecord | Replayed:
        """Add ``version`` as the workflow's next one (no ``await`` between read and write)."""
        await anyio.lowlevel.checkpoint()
        if (replayed := self._replayed(idempotency)) is not None:
            return replayed
        workflow = self._workflows.get(version.workflow_id)
        if workflow is None:
            raise WorkflowNotFound(version.workflow_id)
        numbered = version.numbered(workflow.latest_version + 1)
        self._workflows[version.workflow_id] = replace(
            workflow,
            latest_version=numbered.version,
            updated_at=version.created_at,
            description=version.description,
        )
        self._versions[(version.workflow_id, numbered.version)] = copied(numbered)
        self._remember(None if idempotency is None else idempotency.record(numbered))
        return copied(numbered)

    async def apply_version(
        self,
        version: NewVersion,
        idempotency: PendingRecord[AppliedVersion] | None = None,
    ) -> AppliedVersion | Replayed:
        """Make ``version`` the latest unless the latest has its definition (see the port)."""
        await anyio.lowlevel.checkpoint()
        if (replayed := self._replayed(idempotency)) is not None:
            return replayed
        workflow_id = version.workflow_id
        workflow = self._workflows.get(workflow_id)
        if workflow is None:
            numbered = version.numbered(1)
            at = version.created_at
            self._workflows[workflow_id] = WorkflowRecord(
                workflow_id, 1, version.description, at, at
            )
            applied = AppliedVersion(numbered, created=True)
        else:
            latest = self._versions[(workflow_id, workflow.latest_version)]
            if latest.definition_hash == version.definition_hash:
                applied = AppliedVersion(copied(latest), created=False)
            else:
                numbered = version.numbered(workflow.latest_version + 1)
                self._workflows[workflow_id] = replace(
                    workflow,
                    latest_version=numbered.version,
                    updated_at=version.created_at,
                    description=version.description,
                )
                applied = AppliedVersion(numbered, created=True)
        if applied.created:
            stored = applied.version
            self._versions[(workflow_id, stored.version)] = copied(stored)
        self._remember(None if idempotency is None else idempotency.record(applied))
        return AppliedVersion(copied(applied.version), applied.created)

    async def get_workflow(self, workflow_id: str) -> WorkflowRecord:
        """Return a workflow."""
        await anyio.lowlevel.checkpoint()
        try:
            return self._workflows[workflow_id]
        except KeyError:
            raise WorkflowNotFound(workflow_id) from None

    async def get_version(self, workflow_id: str, version: int) -> VersionRecord:
        """Return one version with its definition."""
        await anyio.lowlevel.checkpoint()
        if workflow_id not in self._workflows:
            raise WorkflowNotFound(workflow_id)
        try:
            return copied(self._versions[(workflow_id, version)])
        except KeyError:
            raise VersionNotFound(workflow_id, version) from None
