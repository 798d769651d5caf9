"""Ports: what the core needs from the outside world, as small Protocols.

Adapters: the engine package ships ``InMemoryStore``, ``FakeClock``, ``SystemClock`` and
``MockExecutor``; the PostgreSQL package ships the database ``Store`` and ``CoordinatorLock``.

One port (or one closely related group) a module; every name is re-exported here, so
``from workload_domain.ports import Store`` is the way to import one.
"""

from workload_domain.console_sessions import ConsoleSessionStore
from workload_domain.ports.approvals import ApprovalStore
from workload_domain.ports.clock import Clock, Expiry
from workload_domain.ports.coordination import (
    ClusterReads,
    CoordinatorLock,
    Notifications,
    NotifyHandlers,
    ShardLeases,
)
from workload_domain.ports.drafts import DraftStore
from workload_domain.ports.execution import ExecutionStore
from workload_domain.ports.executor import Executor
from workload_domain.ports.idempotency import IdempotencyStore
from workload_domain.ports.journal import JournalStore
from workload_domain.ports.resource import Resource
from workload_domain.ports.run_reads import RunReads
from workload_domain.ports.secrets import SecretStore
from workload_domain.ports.store import Store
from workload_domain.ports.workers import WorkerStore
from workload_domain.ports.workflows import WorkflowStore

__all__ = [
    "ApprovalStore",
    "Clock",
    "ClusterReads",
    "ConsoleSessionStore",
    "CoordinatorLock",
    "DraftStore",
    "ExecutionStore",
    "Executor",
    "Expiry",
    "IdempotencyStore",
    "JournalStore",
    "Notifications",
    "NotifyHandlers",
    "Resource",
    "RunReads",
    "SecretStore",
    "ShardLeases",
    "Store",
    "WorkerStore",
    "WorkflowStore",
]
