"""Writes made straight through ``PostgresStore``, behind the service's back.

They stand for what no request handed to the running service: a run committed by another
process, or one whose creating request lost its answer.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from workload_domain.compiler import compile_definition
from workload_domain.ids import uuid7
from workload_domain.records import VersionRecord, WorkflowRecord
from workload_engine.clock import SystemClock
from workload_engine.runs import build_run
from workload_store_postgres.store import PostgresStore

__all__ = ["write_run", "write_workflow"]


async def write_workflow(database_url: str, definition: Mapping[str, Any]) -> None:
    """Create a workflow and its version 1."""
    clock = SystemClock()
    compiled = compile_definition(dict(definition))
    now = clock.now()
    version = VersionRecord(
        compiled.workflow_id,
        1,
        compiled.definition_hash,
        len(compiled.tasks),
        now,
        compiled.document(),
    )
    workflow = WorkflowRecord(compiled.workflow_id, 1, compiled.definition.description, now, now)
    async with PostgresStore(database_url) as store:
        await store.create_workflow(workflow, version)


async def write_run(database_url: str, definition: Mapping[str, Any]) -> str:
    """Commit one pending run of version 1 of ``definition`` (already stored); return its id."""
    clock = SystemClock()
    compiled = compile_definition(dict(definition))
    run_id = uuid7(int(clock.now().timestamp() * 1000), secrets.token_bytes(10))
    new_run = build_run(compiled, version=1, run_id=run_id, run_input={}, clock=clock)
    async with PostgresStore(database_url) as store:
        await store.create_run(new_run)
    return run_id
