"""The workflow store port: workflows and their immutable versions."""

from __future__ import annotations

from typing import Protocol

from workload_domain.cursors import Page
from workload_domain.idempotency import (
    IdempotencyRecord,
    PendingRecord,
    Replayed,
)
from workload_domain.records import (
    AppliedVersion,
    NewVersion,
    VersionRecord,
    WorkflowRecord,
)

__all__ = ["WorkflowStore"]


class WorkflowStore(Protocol):
    """Workflows and their immutable versions."""

    async def create_workflow(
        self,
        workflow: WorkflowRecord,
        version: VersionRecord,
        idempotency: IdempotencyRecord | None = None,
    ) -> VersionRecord | Replayed:
        """Create a workflow and its version 1; ``WorkflowExists`` if the id is taken."""
        ...

    async def create_version(
        self,
        version: NewVersion,
        idempotency: PendingRecord[VersionRecord] | None = None,
    ) -> VersionRecord | Replayed:
        """Add ``version`` as the workflow's next one (``latest + 1``) and set its description.

        Concurrent new versions of one workflow queue (the workflow's row lock): each gets its
        own consecutive number and none fails for the others. The idempotency record is
        rendered from the numbered version and saved in the same transaction.

        Raises:
            WorkflowNotFound: there is no such workflow.
        """
        ...

    async def apply_version(
        self,
        version: NewVersion,
        idempotency: PendingRecord[AppliedVersion] | None = None,
    ) -> AppliedVersion | Replayed:
        """Make ``version`` the workflow's latest, unless the latest has its definition already.

        A new workflow is created with it as version 1; otherwise it is added as ``latest +
        1`` — or nothing is written when the latest version's definition hash is the same
        (``created`` False). Concurrent applies of one workflow queue (its row lock; a
        concurrent creation of a new one is retried): identical ones create one version.
        """
        ...

    async def get_workflow(self, workflow_id: str) -> WorkflowRecord:
        """Return a workflow; ``WorkflowNotFound`` if absent."""
        ...

    async def get_version(self, workflow_id: str, version: int) -> VersionRecord:
        """Return a version; ``WorkflowNotFound`` or ``VersionNotFound`` if absent."""
        ...

    async def page_workflows(self, cursor: str | None, limit: int) -> Page[WorkflowRecord]:
        """Workflows in ``(created_at, workflow_id)`` order."""
        ...

    async def page_versions(
        self, workflow_id: str, cursor: str | None, limit: int
    ) -> Page[VersionRecord]:
        """A workflow's versions by number; ``WorkflowNotFound`` if absent."""
        ...
