"""The whole persistence port: every store port in one Protocol."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from workload_domain.console_sessions import ConsoleSessionStore
from workload_domain.errors import Fenced
from workload_domain.ports.approvals import ApprovalStore
from workload_domain.ports.coordination import ClusterReads
from workload_domain.ports.drafts import DraftStore
from workload_domain.ports.execution import ExecutionStore
from workload_domain.ports.idempotency import IdempotencyStore
from workload_domain.ports.journal import JournalStore
from workload_domain.ports.resource import Resource
from workload_domain.ports.run_reads import RunReads
from workload_domain.ports.secrets import SecretStore
from workload_domain.ports.workers import WorkerStore
from workload_domain.ports.workflows import WorkflowStore
from workload_domain.retention import RetentionStore

__all__ = ["Store"]


class Store(
    WorkflowStore,
    ExecutionStore,
    IdempotencyStore,
    RunReads,
    WorkerStore,
    JournalStore,
    ApprovalStore,
    DraftStore,
    SecretStore,
    ConsoleSessionStore,
    ClusterReads,
    RetentionStore,
    Resource,
    Protocol,
):
    """The whole persistence port: every adapter implements all of it."""

    def fence(self, epoch: int | None, on_fenced: Callable[[Fenced], None] | None = None) -> None:
        """Fence execution writes with ``epoch`` (refused once it is no longer current).

        ``on_fenced`` is told of each refusal, with the error: a newer coordinator epoch, or
        (``Fenced.shard``) a shard another replica took.
        """
        ...

    def announce(self, enabled: bool) -> None:
        """Announce writes to other replicas (SPEC §14)."""
        ...

    def shard_notices(self, shards_total: int) -> None:
        """Announce runs on their shard's channel, to its owner only (a replica, SPEC §16)."""
        ...
