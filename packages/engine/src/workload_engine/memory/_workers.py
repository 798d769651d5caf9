"""Remote attempts in the in-memory store: claims, heartbeats, deadlines, workers, queues.

The same contract as the PostgreSQL store's (``tests/contract``): a claim takes the oldest
queued attempts first, makes each ``running`` under its lease with ``attempt.started``, one
commit per run; it all happens with no ``await`` in between, so two claimers can never take
the same attempt.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

import anyio

from workload_domain import listings
from workload_domain.agent.journal import StepStatus
from workload_domain.approvals import ApprovalStatus
from workload_domain.cursors import Page, Position
from workload_domain.events import EventType
from workload_domain.jsonvalues import JsonObject
from workload_domain.leases import LeasedAttempt, RunPosition
from workload_domain.records import AttemptRecord, EventRecord
from workload_domain.statuses import AttemptStatus
from workload_domain.workers import (
    SEEN_SECONDS,
    Activity,
    Claim,
    ClaimedAttempt,
    QueueStats,
    WorkerRecord,
    still_claimable,
)
from workload_engine.memory._journal import MemoryJournal
from workload_engine.memory._part import RunData, copied, renew_lease

__all__ = ["MemoryWorkers"]


class MemoryWorkers(MemoryJournal):
    """The ``WorkerStore`` part of the in-memory store."""

    async def claim(self, claim: Claim, now: datetime) -> Sequence[ClaimedAttempt]:
        """Hand out the oldest matching queued work under leases (see ``WorkerStore``).

        Task attempts and agents' tool calls are one FIFO by ready time (on a tie, the tool
        call first: its agent is waiting); each gets the token of its place in that order.
        """
        await anyio.lowlevel.checkpoint()
        queues, actions = set(claim.queues), set(claim.actions)
        tasks = sorted(
            (a.started_at, run_id, a.task_key, a.attempt)
            for run_id, data in self._runs.items()
            for a in data.attempts.values()
            if a.status is AttemptStatus.QUEUED
            and a.queue in queues
            and a.action in actions
            and still_claimable(now, a.schedule_deadline)
        )[: len(claim.token_digests)]
        work = sorted(
            [(at, 0, step_id, "", "", 0) for at, step_id in self._queued_tool_calls(claim, now)]
            + [(at, 1, "", run_id, key, number) for at, run_id, key, number in tasks]
        )[: len(claim.token_digests)]
        self._seen(claim, now, claimed=bool(work))
        claimed: list[ClaimedAttempt] = []
        by_run: dict[str, list[tuple[int, tuple[str, int]]]] = defaultdict(list)
        for index, (_, rank, step_id, run_id, task_key, number) in enumerate(work):
            if rank == 0:
                claimed.append(self._lease_tool_call(step_id, claim, index, now))
            else:
                by_run[run_id].append((index, (task_key, number)))
        for run_id, picked in by_run.items():
            data = self._runs[run_id]
            for index, key in sorted(picked, key=lambda p: p[1]):
                attempt = self._lease(data, key, claim, index, now)
                claimed.append(self._item(run_id, data, attempt, index))
            data.run = replace(data.run, revision=data.run.revision + 1, updated_at=now)
        return sorted(claimed, key=lambda c: c.token_index)

    def _lease(
        self, data: RunData, key: tuple[str, int], claim: Claim, index: int, now: datetime
    ) -> AttemptRecord:
        attempt = data.attempts[key]
        assert attempt.heartbeat_timeout_seconds is not None  # every queued attempt has one
        assert attempt.timeout_seconds is not None
        leased = replace(
            attempt,
            status=AttemptStatus.RUNNING,
            worker_id=claim.worker_id,
            claimed_at=now,
            lease_expires_at=now + timedelta(seconds=attempt.heartbeat_timeout_seconds),
            timeout_at=now + timedelta(seconds=attempt.timeout_seconds),
        )
        data.attempts[key] = leased
        self._tokens[attempt.attempt_id] = claim.token_digests[index]
        data.events.append(
            EventRecord(
                len(data.events) + 1,
                EventType.ATTEMPT_STARTED,
                now,
                key[0],
                key[1],
                {"worker_id": claim.worker_id},
            )
        )
        return leased

    def _item(
        self, run_id: str, data: RunData, attempt: AttemptRecord, index: int
    ) -> ClaimedAttempt:
        run = data.run
        task = data.tasks[attempt.task_key]
        definition = self._versions[(run.workflow_id, run.version)].definition
        assert attempt.lease_expires_at is not None
        assert attempt.timeout_at is not None
        assert attempt.heartbeat_timeout_seconds is not None
        upstream: JsonObject = {
            dep: data.tasks[dep].output or {} for dep in task.depends_on if dep in data.tasks
        }
        return ClaimedAttempt(
            attempt_id=attempt.attempt_id,
            run_id=run_id,
            workflow_id=run.workflow_id,
            version=run.version,
            task_key=attempt.task_key,
            attempt=attempt.attempt,
            queue=attempt.queue,
            action=attempt.action,
            input=copied(definition["tasks"][task.position].get("input", {})),
            run_input=copied(run.input),
            upstream=copied(upstream),
            lease_expires_at=attempt.lease_expires_at,
            timeout_at=attempt.timeout_at,
            heartbeat_timeout_seconds=attempt.heartbeat_timeout_seconds,
            token_index=index,
            queued_at=attempt.started_at,
            traceparent=run.traceparent,
        )

    def _seen(self, claim: Claim, now: datetime, *, claimed: bool = True) -> None:
        known = self._workers.get(claim.worker_id)
        if not claimed and not claim.record_seen:
            return  # a long-poll's look after a wake-up writes only what it claims
        if (
            not claimed
            and known is not None
            and (known.queues, known.actions) == (claim.queues, claim.actions)
            and (now - known.last_seen_at).total_seconds() < SEEN_SECONDS
        ):
            return  # an idle worker is recorded at most every SEEN_SECONDS, as in PostgreSQL
        self._workers[claim.worker_id] = WorkerRecord(
            claim.worker_id,
            claim.queues,
            claim.actions,
            known.first_seen_at if known else now,
            now,
            0,
        )

    async def find_attempt(self, attempt_id: str) -> LeasedAttempt | None:
        """An attempt by id, with its run and its lease token's digest."""
        await anyio.lowlevel.checkpoint()
        found = self._attempt_ids.get(attempt_id)
        if found is None:
            return None
        run_id, key = found
        data = self._runs[run_id]
        position = RunPosition(data.run.revision, len(data.events), data.run.updated_at)
        attempt = copied(data.attempts[key])
        return LeasedAttempt(run_id, attempt, self._tokens.get(attempt_id), position)

    async def heartbeat(
        self, attempt_id: str, token_digest: str, now: datetime, progress: JsonObject | None
    ) -> datetime | None:
        """Renew a held lease; None (nothing written) when it is not held."""
        await anyio.lowlevel.checkpoint()
        found = self._attempt_ids.get(attempt_id)
        if found is None:
            renewed = self._renew_tool_call(attempt_id, token_digest, now, progress)
            if renewed is None:
                return None
            self._saw_worker(renewed[0].worker_id, now)
            return renewed[1]
        if self._tokens.get(attempt_id) != token_digest:
            return None
        run_id, key = found
        data = self._runs[run_id]
        attempt = data.attempts[key]
        if attempt.status is not AttemptStatus.RUNNING:
            return None
        renewal = renew_lease(attempt, now, progress)
        if renewal is None:
            return None
        data.attempts[key], expires = renewal
        self._saw_worker(attempt.worker_id, now)
        return expires

    def _saw_worker(self, worker_id: str | None, now: datetime) -> None:
        worker = self._workers.get(worker_id or "")
        if worker is not None:
            self._workers[worker.worker_id] = replace(worker, last_seen_at=now)

    async def due_attempts(self, now: datetime, limit: int) -> Sequence[tuple[str, str, int]]:
        """Remote attempts whose lease, start-to-close or schedule-to-start time passed."""
        await anyio.lowlevel.checkpoint()
        due: list[tuple[datetime, str, str, int]] = []
        for run_id, data in self._runs.items():
            for a in data.attempts.values():
                deadlines = (
                    [a.schedule_deadline]
                    if a.status is AttemptStatus.QUEUED
                    else [a.lease_expires_at, a.timeout_at]
                    if a.status is AttemptStatus.RUNNING
                    else []
                )
                passed = [d for d in deadlines if d is not None and d <= now]
                if passed:
                    due.append((min(passed), run_id, a.task_key, a.attempt))
        return [(run_id, key, number) for _, run_id, key, number in sorted(due)[:limit]]

    async def page_workers(self, cursor: str | None, limit: int) -> Page[WorkerRecord]:
        """Workers in ``worker_id`` order, with how many attempts each holds now."""

        async def fetch(after: Position | None, n: int) -> Sequence[WorkerRecord]:
            await anyio.lowlevel.checkpoint()
            in_flight = self._in_flight()
            workers = [
                replace(w, in_flight=in_flight[w.worker_id])
                for _, w in sorted(self._workers.items())
            ]
            return copied(listings.rows_after(workers, listings.WORKERS, after, n))

        return await listings.paginate(
            self._codec, listings.WORKERS, scope={}, cursor=cursor, limit=limit, fetch=fetch
        )

    async def forget_workers(self, seen_before: datetime) -> int:
        """Delete the workers last seen before ``seen_before`` that hold no work."""
        await anyio.lowlevel.checkpoint()
        holding = self._in_flight()
        old = [
            w.worker_id
            for w in self._workers.values()
            if w.last_seen_at < seen_before and not holding.get(w.worker_id)
        ]
        for worker_id in old:
            del self._workers[worker_id]
        return len(old)

    async def queue_stats(self) -> Sequence[QueueStats]:
        """Every queue that has (or had) remote attempts, by name."""
        await anyio.lowlevel.checkpoint()
        queued: dict[str, int] = defaultdict(int)
        running: dict[str, int] = defaultdict(int)
        oldest: dict[str, datetime] = {}
        remote: list[tuple[str, bool, bool, datetime]] = [
            (a.queue, a.status is AttemptStatus.QUEUED, a.worker_id is not None, a.started_at)
            for data in self._runs.values()
            for a in data.attempts.values()
            if a.status.is_live
        ]
        remote.extend(
            (s.queue, s.worker_id is None, s.worker_id is not None, s.started_at)
            for journal in self._journals.values()
            for s in journal.values()
            if s.queue is not None and s.status is StepStatus.RUNNING
        )
        for queue, waiting, leased, started_at in remote:
            if waiting:
                queued[queue] += 1
                oldest[queue] = min(oldest.get(queue, started_at), started_at)
            elif leased:
                running[queue] += 1
        return [QueueStats(q, queued[q], running[q], oldest.get(q)) for q in sorted(self._queues)]

    async def activity(self, active_since: datetime) -> Activity:
        """What is going on: open runs, active workers, approvals waiting for a decision."""
        await anyio.lowlevel.checkpoint()
        runs = sum(1 for data in self._runs.values() if not data.run.status.is_terminal)
        holding = self._in_flight()
        workers = sum(
            1
            for w in self._workers.values()
            if w.last_seen_at >= active_since or holding[w.worker_id]
        )
        pending = [a for a in self._approvals.values() if a.status is ApprovalStatus.PENDING]
        oldest = min((a.requested_at for a in pending), default=None)
        return Activity(runs, workers, len(pending), oldest)

    def _in_flight(self) -> defaultdict[str, int]:
        """How many attempts and tool calls each worker holds now."""
        in_flight: defaultdict[str, int] = defaultdict(int)
        for data in self._runs.values():
            for a in data.attempts.values():
                if a.status is AttemptStatus.RUNNING and a.worker_id is not None:
                    in_flight[a.worker_id] += 1
        for journal in self._journals.values():
            for step in journal.values():
                if step.status is StepStatus.RUNNING and step.worker_id is not None:
                    in_flight[step.worker_id] += 1
        return in_flight

    def connection_counts(self) -> Mapping[str, int]:
        """No connections: the store is in memory."""
        return {}
