"""Fixtures shared by the PostgreSQL store's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.store_postgres.test_store_postgres import T0, WORKFLOW
from workload_domain.records import VersionRecord, WorkflowRecord
from workload_store_postgres.shard_leases import PostgresShardLeases
from workload_store_postgres.store import PostgresStore


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[PostgresStore]:
    """An open store holding workflow ``wf`` (``WORKFLOW``, version 1)."""
    async with PostgresStore(database_url, max_size=8) as opened:
        await opened.create_workflow(
            WorkflowRecord("wf", 1, "", T0, T0),
            VersionRecord("wf", 1, WORKFLOW.definition_hash, 3, T0, WORKFLOW.document()),
        )
        yield opened


@pytest.fixture
async def leases(database_url: str) -> AsyncIterator[list[PostgresShardLeases]]:
    """Replicas' memberships made by the test (each left at teardown)."""
    made: list[PostgresShardLeases] = []
    yield made
    for membership in made:
        await membership.leave()
