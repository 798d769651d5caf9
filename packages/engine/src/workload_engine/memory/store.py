"""An in-memory ``Store`` with the transactional semantics of the PostgreSQL one.

Every write validates everything first and then applies all of it without an ``await`` in
between, so it is all-or-nothing and atomic with respect to other tasks, like a database
transaction. Commits are conditioned on the run's revision exactly like
``UPDATE … WHERE revision = $expected``. JSON values are copied in and out, so callers can never
alias stored state.

The store is split by concern into the parts the PostgreSQL store has, under the same names
(``workload_store_postgres``): :class:`~._workflows.MemoryWorkflows` (workflows and versions),
:class:`~._runs.MemoryRuns` (create, load and commit runs; the recovery scans),
:class:`~._reads.MemoryReads` (the API's reads and pages), :class:`~._workers.MemoryWorkers`
(claims, leases, workers, queues), :class:`~._journal.MemoryJournal` (agent steps),
:class:`~._approvals.MemoryApprovals`, :class:`~._drafts.MemoryDrafts`,
:class:`~._idempotency.MemoryIdempotency`, :class:`~._cluster.MemoryCluster`,
:class:`~._sessions.MemorySessions` (console sessions) and :class:`~._retention.MemoryRetention`;
they share :class:`~._part.MemoryState` (the tables and the checks the PostgreSQL schema makes).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import anyio

from workload_domain.errors import Fenced, StoreIntegrityError
from workload_engine.memory._approvals import MemoryApprovals
from workload_engine.memory._cluster import MemoryCluster
from workload_engine.memory._drafts import MemoryDrafts
from workload_engine.memory._idempotency import MemoryIdempotency
from workload_engine.memory._reads import MemoryReads
from workload_engine.memory._retention import MemoryRetention
from workload_engine.memory._runs import MemoryRuns
from workload_engine.memory._sessions import MemorySessions
from workload_engine.memory._workers import MemoryWorkers
from workload_engine.memory._workflows import MemoryWorkflows

__all__ = ["InMemoryStore", "StoreIntegrityError"]


class InMemoryStore(
    MemoryWorkflows,
    MemoryRuns,
    MemoryReads,
    MemoryWorkers,
    MemoryApprovals,
    MemoryDrafts,
    MemoryIdempotency,
    MemoryCluster,
    MemorySessions,
    MemoryRetention,
):
    """The whole ``Store`` port in process memory (tests, ``run-local``).

    Args:
        clock: the time written into idempotency records (default: the wall clock).
        telemetry: told of the remote tool calls a commit closed, as the PostgreSQL store is.
        shards_total: how runs are split into shards (one process executes them all here).
    """

    async def open(self) -> None:
        """Nothing to connect to."""
        await anyio.lowlevel.checkpoint()

    async def close(self) -> None:
        """Nothing to release."""
        await anyio.lowlevel.checkpoint()

    def fence(self, epoch: int | None, on_fenced: Callable[[Fenced], None] | None = None) -> None:
        """One process per store: nothing to fence (SPEC §14 needs a shared database)."""

    def announce(self, enabled: bool) -> None:
        """One process per store: nobody to announce to."""

    def shard_notices(self, shards_total: int) -> None:
        """One process per store: nobody to announce to."""

    async def secret(self, name: str) -> bytes:
        """A random secret per name, kept as long as this store (this process)."""
        await anyio.lowlevel.checkpoint()
        return self._secrets.setdefault(name, secrets.token_bytes(32))
