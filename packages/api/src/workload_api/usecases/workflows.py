"""Workflows and their immutable versions: create and apply (compiled, idempotent), and read."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from workload_api import resources
from workload_api.usecases._result import Result
from workload_domain.compiler import CompiledWorkflow, compile_definition
from workload_domain.errors import VersionNotFound
from workload_domain.idempotency import (
    IdempotencyClaim,
    IdempotencyRecord,
    Outcome,
    PendingRecord,
    Replayed,
)
from workload_domain.jsonvalues import JsonObject
from workload_domain.ports import Clock, WorkflowStore
from workload_domain.records import AppliedVersion, NewVersion, VersionRecord, WorkflowRecord
from workload_engine.definitions import DefinitionCache

__all__ = ["WorkflowUseCases"]


class WorkflowUseCases:
    """Create workflows and versions; read them."""

    def __init__(
        self,
        store: WorkflowStore,
        definitions: DefinitionCache,
        clock: Clock,
        endpoints: Collection[str] | None = None,
    ) -> None:
        self._store = store
        self._definitions = definitions
        self._clock = clock
        self._endpoints = endpoints
        """The model endpoints configured here: an agent naming another is refused (§11)."""

    async def create(self, body: JsonObject, claim: IdempotencyClaim) -> Result:
        """Compile the definition and create the workflow with it as version 1."""
        compiled = compile_definition(body, endpoints=self._endpoints)
        now = self._clock.now()
        version = _version(compiled, 1, now)
        workflow = WorkflowRecord(
            compiled.workflow_id, 1, compiled.definition.description, now, now
        )
        outcome = _outcome(version)
        written = await self._store.create_workflow(
            workflow, version, IdempotencyRecord(claim, outcome)
        )
        return self._created(written, compiled, outcome)

    async def create_version(
        self, workflow_id: str, body: JsonObject, claim: IdempotencyClaim
    ) -> Result:
        """Compile the definition and add it as the workflow's next version."""
        await self._store.get_workflow(workflow_id)  # 404 before 400
        compiled = compile_definition(body, workflow_id=workflow_id, endpoints=self._endpoints)
        version = _new_version(compiled, self._clock.now())
        # The store numbers the version (concurrent ones queue) and renders its outcome.
        written = await self._store.create_version(version, PendingRecord(claim, _outcome))
        if isinstance(written, Replayed):
            return Result.replay(written)
        self._definitions.put(written.version, compiled)
        return Result.of(_outcome(written))

    async def apply(
        self, workflow_id: str, body: JsonObject, claim: IdempotencyClaim | None
    ) -> Result:
        """Apply a definition by content (``PUT``, SPEC §6): a new version only if it differs.

        201 with the version created (version 1 of a new workflow, or the next one), or 200
        with the latest version when it has this definition already — nothing written.
        """
        compiled = compile_definition(body, workflow_id=workflow_id, endpoints=self._endpoints)
        version = _new_version(compiled, self._clock.now())
        pending = None if claim is None else PendingRecord(claim, _applied)
        written = await self._store.apply_version(version, pending)
        if isinstance(written, Replayed):
            return Result.replay(written)
        if written.created:
            self._definitions.put(written.version.version, compiled)
        return Result.of(_applied(written))

    def _created(
        self, written: VersionRecord | Replayed, compiled: CompiledWorkflow, outcome: Outcome
    ) -> Result:
        if isinstance(written, Replayed):
            return Result.replay(written)
        self._definitions.put(written.version, compiled)
        return Result.of(outcome)

    async def list(self, cursor: str | None, limit: int) -> JsonObject:
        """A page of workflows."""
        return resources.page(await self._store.page_workflows(cursor, limit), resources.workflow)

    async def get(self, workflow_id: str) -> JsonObject:
        """One workflow."""
        return resources.workflow(await self._store.get_workflow(workflow_id))

    async def list_versions(self, workflow_id: str, cursor: str | None, limit: int) -> JsonObject:
        """A page of a workflow's version summaries."""
        found = await self._store.page_versions(workflow_id, cursor, limit)
        return resources.page(found, resources.version_summary)

    async def get_version(self, workflow_id: str, version: int | str) -> JsonObject:
        """One version with its definition (a non-numeric version names no version)."""
        if isinstance(version, str):
            await self._store.get_workflow(workflow_id)
            raise VersionNotFound(workflow_id, version)
        return resources.version(await self._store.get_version(workflow_id, version))


def _outcome(version: VersionRecord) -> Outcome:
    return Outcome(201, resources.version(version))


def _applied(applied: AppliedVersion) -> Outcome:
    return Outcome(201 if applied.created else 200, resources.version(applied.version))


def _version(compiled: CompiledWorkflow, number: int, now: datetime) -> VersionRecord:
    return VersionRecord(
        compiled.workflow_id,
        number,
        compiled.definition_hash,
        len(compiled.tasks),
        now,
        compiled.document(),
    )


def _new_version(compiled: CompiledWorkflow, now: datetime) -> NewVersion:
    """The next version of a workflow, before the store numbers it."""
    return NewVersion(
        compiled.workflow_id,
        compiled.definition_hash,
        len(compiled.tasks),
        now,
        compiled.document(),
        compiled.definition.description,
    )
