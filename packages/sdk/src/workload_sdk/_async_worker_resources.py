"""The async client's worker endpoints: the twins of :mod:`workload_sdk._worker_resources`.

Arguments, results and errors are those of the sync twin, whose docstrings say them in full
(``timeout=`` and ``extra_headers=`` included); a test compares every signature of the pair.
"""

# ruff: noqa: ASYNC109 - ``timeout=`` is each call's HTTP timeout, as in the sync twins (SPEC §8):
# the same surface, not a cancellation scope.
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workload_sdk import _requests, _worker_requests
from workload_sdk._base_client import ExtraHeaders, RequestTimeout
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

__all__ = ["AsyncAttempts", "AsyncClusterInfo", "AsyncQueues", "AsyncWorkers"]


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
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> list[ClaimedAttempt]:
        """Claim up to ``max_attempts`` attempts (see :meth:`Attempts.claim`)."""
        request = _worker_requests.claim_attempts(
            worker_id, queues, actions, max_attempts, wait_seconds
        )
        return await self._sender.send(request, timeout, extra_headers)

    async def heartbeat(
        self,
        attempt_id: str,
        lease_token: str,
        progress: Mapping[str, Any] | None = None,
        *,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Lease:
        """Renew an attempt's lease (see :meth:`Attempts.heartbeat`)."""
        request = _worker_requests.heartbeat_attempt(attempt_id, lease_token, progress)
        return await self._sender.send(request, timeout, extra_headers)

    async def complete(
        self,
        attempt_id: str,
        lease_token: str,
        output: Mapping[str, Any],
        *,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Attempt:
        """Report success (see :meth:`Attempts.complete`)."""
        request = _worker_requests.complete_attempt(attempt_id, lease_token, output)
        return await self._sender.send(request, timeout, extra_headers)

    async def fail(
        self,
        attempt_id: str,
        lease_token: str,
        code: str,
        message: str,
        *,
        retryable: bool = True,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Attempt:
        """Report failure (see :meth:`Attempts.fail`)."""
        request = _worker_requests.fail_attempt(attempt_id, lease_token, code, message, retryable)
        return await self._sender.send(request, timeout, extra_headers)


class AsyncWorkers:
    """The workers the server has seen claim work (viewer)."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    def list(
        self,
        *,
        limit: int | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> AsyncPager[WorkerInfo]:
        """Every worker seen, fetched page by page as you ``async for``."""
        return AsyncPager(
            lambda cursor: self.list_page(
                limit=limit, cursor=cursor, timeout=timeout, extra_headers=extra_headers
            )
        )

    async def list_page(
        self,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Page[WorkerInfo]:
        """One page of workers."""
        request = _worker_requests.list_workers(limit, cursor)
        return await self._sender.send(request, timeout, extra_headers)


class AsyncClusterInfo:
    """The replicas that execute, and their shards (viewer, SPEC §16)."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    async def get(
        self, *, timeout: RequestTimeout = None, extra_headers: ExtraHeaders = None
    ) -> Cluster:
        """The live replicas and the shards each owns (see :meth:`ClusterInfo.get`)."""
        return await self._sender.send(_requests.get_cluster(), timeout, extra_headers)


class AsyncQueues:
    """The queues of remote work (viewer)."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    async def list(
        self, *, timeout: RequestTimeout = None, extra_headers: ExtraHeaders = None
    ) -> list[QueueStats]:
        """Every queue with work or history."""
        return await self._sender.send(_worker_requests.list_queues(), timeout, extra_headers)
