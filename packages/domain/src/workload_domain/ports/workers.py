"""The worker store port: workers, their claims and remote attempts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from workload_domain.cursors import Page
from workload_domain.jsonvalues import JsonObject
from workload_domain.leases import LeasedAttempt
from workload_domain.workers import Activity, Claim, ClaimedAttempt, QueueStats, WorkerRecord

__all__ = ["WorkerStore"]


class WorkerStore(Protocol):
    """Remote attempts (SPEC §10): claims under leases, heartbeats, expiry; workers, queues.

    Claims and heartbeats are written by the store itself, atomically, because they must hold
    under concurrent claimers (``FOR UPDATE SKIP LOCKED``); outcomes of remote attempts are
    ordinary revision-checked commits.
    """

    async def claim(self, claim: Claim, now: datetime) -> Sequence[ClaimedAttempt]:
        """Hand out up to ``len(claim.token_digests)`` queued attempts, oldest first.

        Queued remote tool calls of agents (``kind`` ``tool_call``) are handed out first, then
        task attempts, each kind oldest first.

        Each becomes ``running`` under its lease (``attempt.started``, one commit per run:
        revision + 1); the worker is recorded as seen. Never hands an attempt to two claimers.
        """
        ...

    async def find_attempt(self, attempt_id: str) -> LeasedAttempt | None:
        """An attempt by id, with its run and its lease token's digest (None: unknown)."""
        ...

    async def heartbeat(
        self, attempt_id: str, token_digest: str, now: datetime, progress: JsonObject | None
    ) -> datetime | None:
        """Renew a held lease (and record ``progress``); return the new expiry.

        ``attempt_id`` names a task attempt or a remote tool call (its step id).

        None when the lease is not held at ``now`` (another token, not running, expired, or
        timed out): nothing is written.
        """
        ...

    async def due_attempts(self, now: datetime, limit: int) -> Sequence[tuple[str, str, int]]:
        """Remote attempts whose lease, start-to-close or schedule-to-start time has passed.

        ``(run_id, task_key, attempt)``, at most ``limit``, oldest deadline first.
        """
        ...

    async def page_workers(self, cursor: str | None, limit: int) -> Page[WorkerRecord]:
        """Workers in ``worker_id`` order."""
        ...

    async def forget_workers(self, seen_before: datetime) -> int:
        """Delete the workers last seen before ``seen_before`` that hold no work; how many."""
        ...

    async def queue_stats(self) -> Sequence[QueueStats]:
        """Every queue that has (or had) remote attempts, by name."""
        ...

    async def activity(self, active_since: datetime) -> Activity:
        """Runs not yet terminal, and workers seen at or after ``active_since`` (one read)."""
        ...

    def connection_counts(self) -> Mapping[str, int]:
        """The store's connections by state (``idle``, ``used``); empty without a pool."""
        ...
