"""Compiled definitions by (workflow, version), compiled once per process from the store."""

from __future__ import annotations

from workload_domain.compiler import CompiledWorkflow, compile_definition
from workload_domain.ports import ExecutionStore

__all__ = ["DefinitionCache"]


class DefinitionCache:
    """Versions are immutable, so a compiled version never needs invalidation."""

    def __init__(self, store: ExecutionStore) -> None:
        self._store = store
        self._compiled: dict[tuple[str, int], CompiledWorkflow] = {}

    def put(self, version: int, workflow: CompiledWorkflow) -> None:
        """Remember a version compiled elsewhere (when it was created)."""
        self._compiled[(workflow.workflow_id, version)] = workflow

    async def get(self, workflow_id: str, version: int) -> CompiledWorkflow:
        """Return the compiled version, rebuilding it from the stored definition if needed."""
        key = (workflow_id, version)
        compiled = self._compiled.get(key)
        if compiled is None:
            record = await self._store.get_version(workflow_id, version)
            compiled = compile_definition(record.definition)
            self._compiled[key] = compiled
        return compiled
