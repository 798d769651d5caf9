"""Both clients' worker endpoints (SPEC §10): ``client.attempts``, ``.workers``, ``.queues``.

``client.attempts`` is the worker protocol, for a token of role ``worker``: claim attempts, renew
their leases, report their outcome. These calls are POSTs fenced by the lease instead of an
``Idempotency-Key``, and the SDK never repeats them by itself: a claim that got no answer may
have handed out attempts (their leases run out and they are retried), while a report may be
repeated by its caller with the same token and body (the server answers the same 200 again).
``workload_worker`` runs this protocol for you; use these methods to write your own loop.

``client.workers`` and ``client.queues`` are what an operator watches (viewer reads). Every
method also takes ``timeout=`` and ``extra_headers=`` (see :mod:`workload_sdk._async_resources`); a
claim's read timeout stays at least its ``wait_seconds`` plus a margin, whatever ``timeout``.
"""

# ruff: noqa: ASYNC109 - ``timeout=`` is each call's HTTP timeout, in both clients (SPEC §8):
# the same surface, not a cancellation scope.
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workload_sdk import _requests, _worker_requests
from workload_sdk._async_pagination import AsyncListing
from workload_sdk._async_sender import AsyncSender
from workload_sdk._base_client import ExtraHeaders, RequestTimeout
from workload_sdk._requests import ApiRequest
from workload_sdk.models import (
    Attempt,
    ClaimedAttempt,
    Cluster,
    Lease,
    Page,
    QueueStats,
    WorkerInfo,
)

__all__ = ["AsyncAttempts", "AsyncClusterInfo", "AsyncQueues", "AsyncWorkers"]


class AsyncAttempts:
    """The worker protocol: claim attempts under a lease, heartbeat, complete or fail them."""

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
        """Claim up to ``max_attempts`` attempts of these actions in these queues.

        The server answers as soon as matching work exists, or with an empty list after
        ``wait_seconds`` without any (the request's read timeout is longer than that wait).

        Args:
            worker_id: This worker's id (``^[A-Za-z0-9._-]{1,128}$``), chosen by the worker.
            queues: The queues to take work from (at least one).
            actions: The actions this worker runs (at least one).
            max_attempts: How many attempts at most (1-100).
            wait_seconds: How long the server waits for work (0-50).
            timeout: This call's HTTP timeout (None: the client's); its read timeout is
                raised to ``wait_seconds`` plus a margin when shorter.
            extra_headers: Headers added to this call's request.

        Returns:
            The claimed attempts, each with its ``lease_token``, oldest ready first.

        Raises:
            ValueError: ``queues`` or ``actions`` is empty.
            InvalidRequest: ``invalid_argument`` (a bound or a name the server refuses).
            Forbidden: the token is not a worker's.
        """
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
        """Renew an attempt's lease (by its ``heartbeat_timeout_seconds``), recording progress.

        Args:
            attempt_id: The claimed attempt.
            lease_token: The claim's lease token.
            progress: A JSON object shown on the attempt (``progress``); None keeps the last.
            timeout: This call's HTTP timeout (None: the client's).
            extra_headers: Headers added to this call's request.

        Raises:
            LeaseLost: the lease is gone (``exc.reason``): stop working on the attempt.
            PayloadTooLarge: ``progress`` is over 64 KiB.
        """
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
        """Report that an attempt succeeded, with its output (a JSON object).

        Repeating it with the same token and output is answered the same 200 again.

        Returns:
            The attempt, ``succeeded``.

        Raises:
            LeaseLost: too late (``expired``, ``canceled``, ``timed_out``), already reported
                otherwise (``finished``) or not this lease (``unknown``); nothing was written.
        """
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
        """Report that an attempt failed; the task's retry rule decides what happens next.

        Args:
            attempt_id: The claimed attempt.
            lease_token: The claim's lease token.
            code: A stable error code (e.g. the exception's class name).
            message: What went wrong, for people.
            retryable: Whether another attempt may succeed (False fails the task now).
            timeout: This call's HTTP timeout (None: the client's).
            extra_headers: Headers added to this call's request.

        Returns:
            The attempt, ``failed``.

        Raises:
            LeaseLost: as for :meth:`complete`.
        """
        request = _worker_requests.fail_attempt(attempt_id, lease_token, code, message, retryable)
        return await self._sender.send(request, timeout, extra_headers)


class AsyncWorkers(AsyncListing[WorkerInfo]):
    """The workers the server has seen claim work (viewer), listed by id.

    Each with its ``status`` (``active`` or ``gone``) and its ``in_flight`` attempts.
    """

    def _page_request(self, limit: int | None, cursor: str | None) -> ApiRequest[Page[WorkerInfo]]:
        return _worker_requests.list_workers(limit, cursor)


class AsyncClusterInfo:
    """The replicas that execute, and their shards (viewer, SPEC §16)."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    async def get(
        self, *, timeout: RequestTimeout = None, extra_headers: ExtraHeaders = None
    ) -> Cluster:
        """The live replicas and the shards each owns (a coordinator alone: one, owning all)."""
        return await self._sender.send(_requests.get_cluster(), timeout, extra_headers)


class AsyncQueues:
    """The queues of remote work (viewer)."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    async def list(
        self, *, timeout: RequestTimeout = None, extra_headers: ExtraHeaders = None
    ) -> list[QueueStats]:
        """Every queue with work or history: attempts queued and running, the oldest wait."""
        return await self._sender.send(_worker_requests.list_queues(), timeout, extra_headers)
