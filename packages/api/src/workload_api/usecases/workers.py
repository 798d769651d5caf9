"""Workers (SPEC §10): claim attempts (long-poll), heartbeat, complete, fail; list workers, queues.

Reports are fenced by the lease, not by an idempotency key: a heartbeat, complete or fail
succeeds only while the attempt is ``running`` under the presented token, before its lease and
its start-to-close deadline; otherwise ``LeaseLost`` with a reason, and nothing is written.
Complete and fail repeated with the same token and the same body answer the same 200 again.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import Any

import anyio
from pydantic import BaseModel

from workload_api import resources, schemas
from workload_api.usecases._bodies import parse, storable
from workload_api.usecases._holds import Holds
from workload_domain.agent.journal import StepStatus
from workload_domain.agent.loop import tool_failed, tool_output
from workload_domain.errors import LeaseLost, TooLarge
from workload_domain.idempotency import request_hash
from workload_domain.jsonvalues import JsonObject, canonical_json, jsonb_value
from workload_domain.leases import (
    LeasedAttempt,
    LeasedToolCall,
    LeaseLostReason,
    lease_lost,
    presents_token,
    token_digest,
    tool_call_lease_lost,
)
from workload_domain.ports import Clock, Store
from workload_domain.records import AttemptRecord, TaskError
from workload_domain.statuses import AttemptStatus
from workload_domain.telemetry import NO_TELEMETRY, Telemetry
from workload_domain.workers import MAX_PROGRESS_BYTES, Claim
from workload_engine.planner import AttemptOutcome
from workload_engine.remote import RemoteAttempts
from workload_engine.signals import Listening, RunChanges, WorkSignal

__all__ = [
    "CLAIM_RETRY_AFTER",
    "MAX_WAITING_PER_PRINCIPAL",
    "MAX_WAITING_PER_WORKER",
    "WorkerUseCases",
]

_TOKEN_BYTES = 32
"""A lease token's random bytes (256 bits; SPEC §10 asks for at least 128)."""
MAX_WAITING_PER_WORKER = 16
"""Claims one worker id may hold at once (a worker of the SDK holds one)."""
MAX_WAITING_PER_PRINCIPAL = 1024
"""Claims one worker token may hold at once, over all its worker ids."""
CLAIM_RETRY_AFTER = 2
"""The ``Retry-After`` of a claim refused for a cap (seconds)."""


class WorkerUseCases:
    """What workers do, and what viewers see of them."""

    def __init__(
        self,
        store: Store,
        *,
        remote: RemoteAttempts,
        signal: WorkSignal,
        clock: Clock,
        telemetry: Telemetry = NO_TELEMETRY,
        changes: RunChanges | None = None,
        max_waiting_per_worker: int = MAX_WAITING_PER_WORKER,
        max_waiting_per_principal: int = MAX_WAITING_PER_PRINCIPAL,
    ) -> None:
        self._store = store
        self._remote = remote
        self._signal = signal
        self._clock = clock
        self._telemetry = telemetry
        self._changes = changes or RunChanges()
        self._per_worker = max_waiting_per_worker
        self._per_principal = max_waiting_per_principal
        self.claims = Holds("claims", retry_after=CLAIM_RETRY_AFTER)
        """The claims in progress, per worker id and per principal (ADR 0025)."""

    async def claim(
        self,
        worker_id: str,
        body: JsonObject | None,
        gone: anyio.Event | None = None,
        *,
        principal: str = "",
    ) -> JsonObject:
        """Up to ``max_attempts`` queued attempts, waiting up to ``wait_seconds`` for some.

        ``gone`` is set when the worker hung up: a claim stops waiting then, and never hands
        out attempts to a worker that can no longer receive them. A worker id, and a
        ``principal`` (its token), hold only so many claims at once (ADR 0025).

        Raises:
            TooManyRequests: the worker id or the principal holds as many claims as it may.
        """
        request = parse(schemas.ClaimRequest, body)
        caps = [
            ("per_worker", worker_id, self._per_worker),
            ("per_principal", principal, self._per_principal),
        ]
        with (
            self.claims.hold(caps),
            self._signal.listen(request.queues, request.actions) as listening,
        ):
            return await self._claim(worker_id, request, listening, gone)

    async def _claim(
        self,
        worker_id: str,
        request: schemas.ClaimRequest,
        listening: Listening,
        gone: anyio.Event | None,
    ) -> JsonObject:
        queues, actions = (
            tuple(dict.fromkeys(request.queues)),
            tuple(dict.fromkeys(request.actions)),
        )
        deadline = anyio.current_time() + request.wait_seconds
        first = True
        while True:
            if gone is not None and gone.is_set():
                return {"attempts": []}
            waiter = listening.waiter()  # before looking: a notification now is not missed
            tokens = [secrets.token_urlsafe(_TOKEN_BYTES) for _ in range(request.max_attempts)]
            claim = Claim(
                worker_id,
                queues,
                actions,
                request.max_attempts,
                tuple(token_digest(t) for t in tokens),
                # The worker is recorded by the request's first look; a look after a wake-up
                # that finds nothing writes nothing (ADR 0025).
                record_seen=first,
            )
            first = False
            now = self._clock.now()
            claimed = await self._store.claim(claim, now)
            if claimed:
                for run_id in {c.run_id for c in claimed}:
                    self._changes.notify(run_id)  # the claim committed attempt.started
                # Each attempt's schedule-to-start is observed, and the worker is handed the
                # trace context to continue (SPEC §12).
                return {
                    "attempts": [
                        resources.claim_item(
                            c, tokens[c.token_index], self._telemetry.claimed(worker_id, c, now)
                        )
                        for c in claimed
                    ]
                }
            remaining = deadline - anyio.current_time()
            if remaining <= 0 or self._signal.closed:
                return {"attempts": []}
            await _first_of(remaining, waiter, gone)

    async def heartbeat(self, attempt_id: str, body: JsonObject | None) -> JsonObject:
        """Renew the lease (and record progress); ``LeaseLost`` if it is not held."""
        request = parse(schemas.HeartbeatRequest, body)
        if request.progress is not None:
            storable(request.progress, "progress")
            if len(canonical_json(request.progress)) > MAX_PROGRESS_BYTES:
                raise TooLarge("progress is larger than 64 KiB")
        now = self._clock.now()
        digest = token_digest(request.lease_token)
        expires = await self._store.heartbeat(attempt_id, digest, now, request.progress)
        if expires is None:
            leased = await self._store.find_attempt(attempt_id)
            if leased is None:
                tool_call = await self._store.find_tool_call(attempt_id)
                if tool_call is not None:
                    reason = tool_call_lease_lost(tool_call, request.lease_token, now)
                    raise _lost(reason or LeaseLostReason.EXPIRED)
            raise _lost(lease_lost(leased, request.lease_token, now) or LeaseLostReason.EXPIRED)
        return {"lease_expires_at": expires.isoformat().replace("+00:00", "Z")}

    async def complete(self, attempt_id: str, body: JsonObject | None) -> JsonObject:
        """Record the attempt's success with its output."""
        request = parse(schemas.CompleteRequest, body)
        storable(request.output, "output")
        # In the form JSONB reads back (1e+20 as an integer): the answer is what GETs show.
        output = jsonb_value(request.output)
        ended = (StepStatus.SUCCEEDED, tool_output(output))
        return await self._report(
            attempt_id, "complete", request, AttemptStatus.SUCCEEDED, ended, output=output
        )

    async def fail(self, attempt_id: str, body: JsonObject | None) -> JsonObject:
        """Record the attempt's failure (the retry rule decides what follows)."""
        request = parse(schemas.FailRequest, body)
        error = TaskError(request.error.code, request.error.message, request.error.retryable)
        storable(error.to_json(), "error")
        # A tool call's failure goes to the model, which decides what to do next.
        ended = (StepStatus.FAILED, tool_failed(error))
        return await self._report(
            attempt_id, "fail", request, AttemptStatus.FAILED, ended, error=error
        )

    async def _report(
        self,
        attempt_id: str,
        kind: str,
        request: schemas.CompleteRequest | schemas.FailRequest,
        status: AttemptStatus,
        ended: tuple[StepStatus, JsonObject],
        *,
        output: JsonObject | None = None,
        error: TaskError | None = None,
    ) -> JsonObject:
        """End the attempt as ``status`` (a tool call as ``ended``), fenced by its lease."""
        token = request.lease_token
        report = request_hash(kind, {"attempt_id": attempt_id}, _as_read(request))
        leased = await self._store.find_attempt(attempt_id)
        if leased is None:
            tool_call = await self._store.find_tool_call(attempt_id)
            if tool_call is not None:
                return await self._report_tool_call(tool_call, token, report, ended)
        repeated = _repeated(leased, token, report)
        if repeated is not None:
            return repeated
        reason = lease_lost(leased, token, self._clock.now())
        if (
            reason is LeaseLostReason.EXPIRED
            and leased is not None
            and leased.attempt.status is AttemptStatus.RUNNING
        ):
            # A heartbeat that found the lease held (by its own time) may have renewed it after
            # this read, without a revision: the lease as stored now decides (ADR 0048).
            leased = await self._store.find_attempt(attempt_id)
            repeated = _repeated(leased, token, report)  # a concurrent duplicate went first
            if repeated is not None:
                return repeated
            reason = lease_lost(leased, token, self._clock.now())
        if reason is not None or leased is None:
            raise _lost(reason or LeaseLostReason.UNKNOWN)
        digest = leased.token_digest

        def decide(current: AttemptRecord, now: Any) -> AttemptOutcome:
            lost = lease_lost(LeasedAttempt(leased.run_id, current, digest), token, now)
            if lost is not None:
                raise _lost(lost)
            return AttemptOutcome(
                current.task_key,
                current.attempt,
                status,
                self._clock.now(),
                output=output,
                error=error,
                report_hash=report,
            )

        attempt = leased.attempt
        settled = await self._remote.settle(
            leased.run_id, attempt.task_key, attempt.attempt, decide, leased
        )
        if settled is not None:
            if settled.attempt.status is AttemptStatus.CANCELED:
                # The run's cancel, committed first, ended the attempt instead (SPEC §10).
                raise _lost(LeaseLostReason.CANCELED)
            return resources.attempt(settled.attempt)
        # The attempt ended meanwhile: the same report (a concurrent duplicate) is answered as
        # the first one was; anything else lost.
        again = await self._store.find_attempt(attempt_id)
        repeated = _repeated(again, token, report)
        if repeated is not None:
            return repeated
        raise _lost(lease_lost(again, token, self._clock.now()) or LeaseLostReason.FINISHED)

    async def _report_tool_call(
        self,
        leased: LeasedToolCall,
        token: str,
        report: str,
        ended: tuple[StepStatus, JsonObject],
    ) -> JsonObject:
        """End an agent's remote tool call as its worker reports it (fenced by the lease)."""
        repeated = _repeated_tool_call(leased, token, report)
        if repeated is not None:
            return repeated
        reason = tool_call_lease_lost(leased, token, self._clock.now())
        # The expiry of a running call is the store's to judge, on the step as it writes it: a
        # heartbeat may have renewed the lease after this read, without a revision (ADR 0048).
        running = leased.step.status is StepStatus.RUNNING
        if reason is not None and not (reason is LeaseLostReason.EXPIRED and running):
            raise _lost(reason)
        status, response = ended
        step = replace(
            leased.step,
            status=status,
            response=response,
            finished_at=self._clock.now(),
            report_hash=report,
        )
        done = await self._remote.finish_tool_call(step, token_digest=leased.token_digest)
        if done is not None:
            return resources.tool_call_report(done)
        again = await self._store.find_tool_call(step.step_id)
        repeated = _repeated_tool_call(again, token, report)
        if repeated is not None:
            return repeated
        lost = tool_call_lease_lost(again, token, self._clock.now())
        if lost is None and again is not None and again.step.status is StepStatus.RUNNING:
            # Refused on the lease as stored then, renewed since by a heartbeat that read its
            # clock before the end: the report came after its lease ran out.
            lost = LeaseLostReason.EXPIRED
        raise _lost(lost or LeaseLostReason.FINISHED)

    async def list_workers(self, cursor: str | None, limit: int) -> JsonObject:
        """A page of workers (``active`` or ``gone``)."""
        now = self._clock.now()
        found = await self._store.page_workers(cursor, limit)
        return resources.page(found, lambda w: resources.worker(w, now))

    async def list_queues(self) -> JsonObject:
        """Every queue with work or history."""
        now = self._clock.now()
        return {"items": [resources.queue(q, now) for q in await self._store.queue_stats()]}


async def _first_of(seconds: float, *events: anyio.Event | None) -> None:
    """Return when any of ``events`` is set, or after ``seconds``."""
    with anyio.move_on_after(seconds):
        async with anyio.create_task_group() as tg:

            async def wait(event: anyio.Event) -> None:
                await event.wait()
                tg.cancel_scope.cancel()

            for event in events:
                if event is not None:
                    tg.start_soon(wait, event)


def _as_read(request: BaseModel) -> JsonObject:
    """A report as it was understood, defaults included: what makes two reports the same.

    ``{"retryable": true}`` spelled out or left to its default is one report (SPEC §10: the
    same body repeated is answered the same 200 again).
    """
    read: JsonObject = request.model_dump(mode="json")
    return read


def _repeated(leased: LeasedAttempt | None, token: str, report: str) -> JsonObject | None:
    """The answer to a report repeated with the same token and body (None: it is not one)."""
    if leased is None or leased.attempt.report_hash != report:
        return None
    return resources.attempt(leased.attempt) if presents_token(leased, token) else None


def _repeated_tool_call(
    leased: LeasedToolCall | None, token: str, report: str
) -> JsonObject | None:
    if leased is None or leased.step.report_hash != report:
        return None
    return resources.tool_call_report(leased.step) if presents_token(leased, token) else None


def _lost(reason: LeaseLostReason) -> LeaseLost:
    messages = {
        LeaseLostReason.EXPIRED: "the lease ran out: the attempt is no longer this worker's",
        LeaseLostReason.CANCELED: "the run or the task was canceled",
        LeaseLostReason.FINISHED: "the attempt already completed or failed",
        LeaseLostReason.TIMED_OUT: "the attempt passed its start-to-close timeout",
        LeaseLostReason.UNKNOWN: "no such attempt, or a token that is not this attempt's",
    }
    return LeaseLost(reason.value, messages[reason])
