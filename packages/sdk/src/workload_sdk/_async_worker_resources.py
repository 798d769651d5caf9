"""The async client's worker endpoints: the twins of :mod:`workload_sdk._worker_resources`.

Arguments, results and errors are those of the sync twin, whose docstrings say them in full.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workload_sdk import _requests
from workload_sdk._sender import AsyncSender
from workload_sdk.models import (
    Attempt,
    ClaimedAttempt,
    Cluster,
    Lease,
    Page,
    QueueStats,
    WorkerInfo,
)
from workload_sdk.pagination import AsyncPager

__all__ = ["AsyncAttempts", "AsyncQueues", "AsyncWorkers"]


class AsyncAttempts:
    """The worker protocol, awaited (see :class:`~workload_sdk.Attempts`)."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    async def claim(
        self,
        worker_id: str,
        queues: Sequence[str],
        actions: Sequence[str],
        *,
        max_attempts: int = 1,
        wait_seconds: float = 20,
    ) -> list[ClaimedAttempt]:
        """Claim up to ``max_attempts`` attempts (see :meth:`Attempts.claim`)."""
        request = _requests.claim_attempts(worker_id, queues, actions, max_attempts, wait_seconds)
        return await self._sender.send(request)

    async def heartbeat(
        self, attempt_id: str, lease_token: str, progress: Mapping[str, Any] | None = None
    ) -> Lease:
        """Renew an attempt's lease (see :meth:`Attempts.heartbeat`)."""
        return await self._sender.send(
            _requests.heartbeat_attempt(attempt_id, lease_token, progress)
        )

    async def complete(
        self, attempt_id: str, lease_token: str, output: Mapping[str, Any]
    ) -> Attempt:
        """Report success (see :meth:`Attempts.complete`)."""
        return await self._sender.send(_requests.complete_attempt(attempt_id, lease_token, output))

    async def fail(
        self, attempt_id: str, lease_token: str, code: str, message: str, *, retryable: bool = True
    ) -> Attempt:
        """Report failure (see :meth:`Attempts.fail`)."""
        request = _requests.fail_attempt(attempt_id, lease_token, code, message, retryable)
        return await self._sender.send(request)


class AsyncWorkers:
    """The workers the server has seen claim work (viewer)."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    def list(self, *, limit: int | None = None) -> AsyncPager[WorkerInfo]:
        """Every worker seen, fetched page by page as you ``async for``."""
        return AsyncPager(lambda cursor: self.list_page(limit=limit, cursor=cursor))

    async def list_page(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[WorkerInfo]:
        """One page of workers."""
        return await self._sender.send(_requests.list_workers(limit, cursor))


class AsyncClusterInfo:
    """The replicas that execute, and their shards (viewer, SPEC §16)."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    async def get(self) -> Cluster:
        """The live replicas and the shards each owns (see :meth:`ClusterInfo.get`)."""
        return await self._sender.send(_requests.get_cluster())


class AsyncQueues:
    """The queues of remote work (viewer)."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    async def list(self) -> list[QueueStats]:
        """Every queue with work or history."""
        return await self._sender.send(_requests.list_queues())
