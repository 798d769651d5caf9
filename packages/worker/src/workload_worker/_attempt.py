"""One claimed attempt, from claim to report: run its handler under a lease, then report.

:class:`AttemptRunner` runs two things side by side: the handler (cancelled at ``timeout_at``,
when the lease is lost, or when the worker's grace period ends) and the heartbeats that keep the
lease alive until the outcome is recorded. A result that comes after the lease was lost or the
attempt timed out is dropped: the server would refuse it (409 ``lease_lost``) and another
attempt may already be running. A report that was not recorded — no answer, a 5xx (503
``unavailable`` is how a server says "not now, again shortly"), or a 409 ``revision_conflict``
from an older server — is sent again with backoff while the lease, still heartbeated, holds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import anyio.to_thread

from workload_sdk import (
    APIConnectionError,
    APIResponseValidationError,
    AsyncClient,
    ClaimedAttempt,
    Conflict,
    InvalidRequest,
    LeaseLost,
    PayloadTooLarge,
    ServerError,
    WorkloadError,
)
from workload_worker._backoff import Backoff
from workload_worker._context import Context
from workload_worker._lease import LeaseClock
from workload_worker._loop import LoopCaller
from workload_worker._outcome import (
    INVALID_OUTPUT,
    Completed,
    Failed,
    Outcome,
    clean_json,
    failure_of,
    outcome_of,
    shutdown_failure,
)
from workload_worker._tracing import HandlerSpan, handler_span

__all__ = [
    "ABANDON_REPORT_SECONDS",
    "SYNC_HANDLER_THREADS",
    "Action",
    "AttemptRunner",
    "Threads",
]

logger = logging.getLogger("workload.worker")

ABANDON_REPORT_SECONDS = 5.0
"""How long a worker that is being torn down tries to report an attempt it gives up."""
SYNC_HANDLER_THREADS: set[int] = set()
"""The threads running a sync handler now, in this process (a stopped worker's are the ones
that ignored their cancellation: see ``Worker.handlers_left_running``)."""
_MIN_BEAT_SPACING = 0.25  # at most this many heartbeats a second asked by Context.heartbeat()
_TRANSIENT = (APIConnectionError, ServerError, APIResponseValidationError)
_REVISION_CONFLICT = "revision_conflict"
_KINDS = frozenset({"task", "tool_call"})


class Threads(Protocol):
    """Where a sync handler's thread, abandoned while it runs, is counted until it returns."""

    def thread_left(self) -> None:
        """It still runs (called in the loop, as its attempt stops waiting for it)."""
        ...

    def thread_returned(self) -> None:
        """It returned (called in that thread)."""
        ...


# Why the worker stopped waiting for a handler (Context.cancel_reason).
LEASE_LOST = "lease_lost"
TIMED_OUT = "timed_out"
SHUTDOWN = "worker_shutdown"


@dataclass(frozen=True, slots=True)
class Action:
    """A declared action: its handler, and whether the handler is a coroutine function."""

    name: str
    handler: Callable[[Context, dict[str, Any]], Any]
    is_async: bool


class AttemptRunner:
    """Runs one claimed attempt to its report (or until it is lost).

    Args:
        client: The worker's API client.
        item: The claimed attempt.
        action: Its action, or None if this worker does not serve it (a server bug).
        limiter: The threads sync handlers may use (one per slot).
        backoff: Makes the backoff of retried heartbeats and reports.
        grace_seconds: The worker's grace period (for the ``worker_shutdown`` message).
        worker_id: The worker's id (an attribute of the attempt's span).
    """

    def __init__(
        self,
        client: AsyncClient,
        item: ClaimedAttempt,
        action: Action | None,
        *,
        limiter: anyio.CapacityLimiter,
        backoff: Callable[[], Backoff],
        grace_seconds: float,
        worker_id: str = "",
        threads: Threads | None = None,
    ) -> None:
        self.item = item
        self._threads = threads
        self._worker_id = worker_id
        self._client = client
        self._action = action
        self._limiter = limiter
        self._backoff = backoff
        self._grace = grace_seconds
        self._clock = LeaseClock.of(item, anyio.current_time())
        self._loop = LoopCaller()
        self._wake = anyio.Event()
        self._lock = threading.Lock()
        self._progress: dict[str, Any] | None = None
        self._scope: anyio.CancelScope | None = None
        self._handler_done = False
        self._stop: str | None = None
        self._lost: str | None = None
        self._pending: Outcome | None = None
        self._finished = False
        self.context = Context(item, heartbeat=self._on_heartbeat)

    @property
    def label(self) -> str:
        """The attempt as log lines name it."""
        item = self.item
        where = f"{item.run_id}/{item.task_key}#{item.attempt}"
        return f"attempt {item.attempt_id} ({item.action} {where})"

    def shutdown(self) -> None:
        """The worker's grace period is over: cancel the handler, report ``worker_shutdown``."""
        self._interrupt(SHUTDOWN)

    async def run(self) -> None:
        """Run the handler under the lease and report its outcome; never raises on its own.

        The whole attempt — handler, heartbeats, report — is one span continuing the claim
        item's trace context, when OpenTelemetry is installed.
        """
        with handler_span(self.item, self._worker_id) as span:
            await self._run(span)

    async def _run(self, span: HandlerSpan) -> None:
        logger.info("%s: started", self.label)
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._heartbeats)
                outcome = await self._execute()
                if outcome is None:
                    span.outcome("dropped")
                elif isinstance(outcome, Completed):
                    span.outcome("completed")
                else:
                    span.outcome("failed", outcome.code)
                if outcome is not None:
                    await self._report(outcome)
                tasks.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            # The worker itself is being torn down: say so rather than let the lease run out.
            with anyio.CancelScope(shield=True), anyio.move_on_after(ABANDON_REPORT_SECONDS):
                await self._abandon()
            raise
        finally:
            self._finished = True

    # -- the handler ------------------------------------------------------------------------

    async def _execute(self) -> Outcome | None:
        """The handler's outcome, or None when its result is to be dropped."""
        item = self.item
        if self._action is None:  # the server handed out an action this worker did not claim
            return Failed("unknown_action", f"this worker does not serve {item.action!r}", True)
        if item.kind not in _KINDS:
            return Failed("unsupported_kind", f"this worker cannot run a {item.kind!r}", True)
        result: object = None
        error: Exception | None = None
        with anyio.CancelScope(deadline=self._clock.deadline) as scope:
            self._scope = scope
            try:
                result = await self._call(self._action)
            except Exception as exc:  # any error of the handler is the attempt's outcome
                error = exc
        self._scope = None
        if scope.cancelled_caught and self._stop is None:
            self._interrupt(TIMED_OUT)
        self._handler_done = True
        if self._stop == SHUTDOWN:
            logger.warning("%s: cancelled, the worker is stopping", self.label)
            return shutdown_failure(self._grace)
        if self._stop is not None:
            logger.warning("%s: cancelled (%s), result dropped", self.label, self._why())
            return None
        if error is not None:
            failure = failure_of(error)
            logger.warning(
                "%s: the handler raised %s (%s)",
                self.label,
                failure.code,
                "retryable" if failure.retryable else "not retryable",
                exc_info=error,
            )
            return failure
        outcome = outcome_of(result)
        if isinstance(outcome, Failed):
            logger.warning("%s: %s", self.label, outcome.message)
        return outcome

    async def _call(self, action: Action) -> object:
        data = dict(self.item.input)
        if action.is_async:
            return await action.handler(self.context, data)
        # A thread cannot be cancelled: on cancellation the worker stops waiting for it and the
        # handler learns it through context.cancelled.
        context = self.context
        threads = self._threads
        lock = threading.Lock()
        state = {"running": False, "abandoned": False}

        def in_thread() -> object:
            ident = threading.get_ident()
            SYNC_HANDLER_THREADS.add(ident)
            with lock:
                state["running"] = True
            try:
                return action.handler(context, data)
            finally:
                SYNC_HANDLER_THREADS.discard(ident)
                with lock:
                    state["running"] = False
                    abandoned = state["abandoned"]
                if abandoned and threads is not None:
                    threads.thread_returned()

        try:
            return await anyio.to_thread.run_sync(
                in_thread, abandon_on_cancel=True, limiter=self._limiter
            )
        except BaseException:
            with lock:  # abandoned while it runs: it keeps its slot until it returns
                state["abandoned"] = state["running"]
            if state["abandoned"] and threads is not None:
                threads.thread_left()
            raise

    def _interrupt(self, reason: str) -> None:
        """Stop waiting for the handler (if it still runs) and tell it why."""
        if self._stop is not None or self._handler_done:
            return
        self._stop = reason
        self.context._cancel(reason)
        if self._scope is not None:
            self._scope.cancel()

    def _why(self) -> str:
        if self._stop == LEASE_LOST:
            return f"lease lost: {self._lost}"
        return "timeout_at passed" if self._stop == TIMED_OUT else str(self._stop)

    # -- heartbeats ---------------------------------------------------------------------------

    def _on_heartbeat(self, progress: dict[str, Any] | None) -> None:
        """Context.heartbeat(): remember the progress, wake the heartbeat loop (any thread)."""
        if self._finished:
            return
        if progress is not None:
            progress = clean_json(progress)  # sendable whatever the handler put in it
            with self._lock:
                self._progress = progress
        self._loop.call_soon(self._wake_up)

    def _wake_up(self) -> None:
        self._wake.set()  # the current event, looked up in the loop (it is replaced per beat)

    def _take_progress(self) -> dict[str, Any] | None:
        with self._lock:
            progress, self._progress = self._progress, None
        return progress

    def _keep_progress(self, progress: dict[str, Any] | None) -> None:
        """A heartbeat that carried ``progress`` failed: send it again unless newer exists."""
        with self._lock:
            if self._progress is None:
                self._progress = progress

    async def _heartbeats(self) -> None:
        """Renew the lease every third of its length (sooner when asked) until cancelled."""
        backoff = self._backoff()
        clock = self._clock
        last_sent = clock.renewed_at
        retry_at: float | None = None
        while True:
            due = clock.renewed_at + clock.interval if retry_at is None else retry_at
            with anyio.move_on_at(due):
                await self._wake.wait()
                await anyio.sleep_until(last_sent + min(_MIN_BEAT_SPACING, clock.interval))
            self._wake = anyio.Event()
            progress = self._take_progress()
            last_sent = anyio.current_time()
            try:
                with anyio.fail_at(clock.give_up_at(last_sent)):  # not the client's 30 s
                    await self._client.attempts.heartbeat(
                        self.item.attempt_id, self.item.lease_token, progress
                    )
            except TimeoutError:
                # Sent again at once: the try that hung already spaced the heartbeats.
                self._keep_progress(progress)
                logger.warning("%s: heartbeat unanswered in time; sent again", self.label)
                retry_at = anyio.current_time()
                continue
            except LeaseLost as exc:
                self._lease_lost(exc.reason)
                return
            except PayloadTooLarge:
                logger.warning("%s: progress over the server's limit (64 KiB) dropped", self.label)
                retry_at = anyio.current_time()
                continue
            except InvalidRequest as exc:
                if progress is not None:
                    # The server refused this progress (400): drop it, keep the lease.
                    logger.warning("%s: progress refused (%s), dropped", self.label, exc)
                    retry_at = anyio.current_time()
                    continue
                delay = min(backoff.next_delay(), clock.interval)
                logger.warning("%s: heartbeat failed (%s); again in %.1f s", self.label, exc, delay)
                retry_at = anyio.current_time() + delay
                continue
            except WorkloadError as exc:
                self._keep_progress(progress)
                delay = min(backoff.next_delay(), clock.interval)
                logger.warning("%s: heartbeat failed (%s); again in %.1f s", self.label, exc, delay)
                retry_at = anyio.current_time() + delay
                continue
            clock.renewed(last_sent)
            backoff.reset()
            retry_at = None

    def _lease_lost(self, reason: str) -> None:
        if self._lost is None:
            self._lost = reason
            if self._pending is None and self._handler_done:
                return  # after the outcome was recorded: nothing to tell
            # "finished" while a report is in flight: that very report was recorded.
            level = logging.INFO if reason == "finished" else logging.WARNING
            logger.log(level, "%s: lease lost (%s)", self.label, reason)
        self._interrupt(LEASE_LOST)

    # -- reports ------------------------------------------------------------------------------

    async def _send(self, outcome: Outcome) -> WorkloadError | None:
        """Report ``outcome`` once; the error that prevented it, or None when recorded."""
        item = self.item
        try:
            if isinstance(outcome, Completed):
                await self._client.attempts.complete(
                    item.attempt_id, item.lease_token, outcome.output
                )
            else:
                await self._client.attempts.fail(
                    item.attempt_id,
                    item.lease_token,
                    outcome.code,
                    outcome.message,
                    retryable=outcome.retryable,
                )
        except WorkloadError as exc:
            return exc
        return None

    async def _report(self, outcome: Outcome) -> None:
        """Report until the server records it, refuses it, or the lease must be gone."""
        backoff = self._backoff()
        self._pending = outcome
        while self._lost is None:
            error = await self._send(outcome)
            if error is None:
                self._pending = None
                done = "completed" if isinstance(outcome, Completed) else f"failed ({outcome.code})"
                logger.info("%s: %s", self.label, done)
                return
            if isinstance(error, LeaseLost):
                self._lost = error.reason
                break
            if isinstance(error, PayloadTooLarge | InvalidRequest) and isinstance(
                outcome, Completed
            ):
                # The output itself is refused (too large, not storable): fail, not retryable.
                outcome = Failed(INVALID_OUTPUT, f"output refused: {error.detail}", False)
                self._pending = outcome
                continue
            left = self._clock.expires - anyio.current_time()
            if not _transient(error) or left <= 0:
                why = "the lease ran out" if left <= 0 else "the server refused it"
                logger.error("%s: not reported, %s: %s", self.label, why, error)
                return
            delay = min(backoff.next_delay(), left)
            logger.warning("%s: report failed (%s); again in %.1f s", self.label, error, delay)
            await anyio.sleep(delay)
        self._pending = None
        if self._lost == "finished":  # our own earlier report was recorded, its answer lost
            logger.info("%s: the server had already recorded the outcome", self.label)
        else:
            logger.warning("%s: outcome dropped, lease lost (%s)", self.label, self._lost)

    async def _abandon(self) -> None:
        """One last report when torn down: the pending outcome, or ``worker_shutdown``."""
        if self._lost is not None or (self._handler_done and self._pending is None):
            return
        error = await self._send(self._pending or shutdown_failure())
        if error is not None:
            logger.warning("%s: could not report while stopping: %s", self.label, error)


def _transient(error: WorkloadError) -> bool:
    """Whether a report that failed with ``error`` may be sent again (it is idempotent).

    Connection errors and 5xx (503 ``unavailable`` is what a server answers a report it could
    not record now) — and 409 ``revision_conflict``, which an older server answered a report
    that met concurrent reports on its run: nothing was recorded, the lease still holds.
    """
    if isinstance(error, _TRANSIENT):
        return True
    return isinstance(error, Conflict) and error.code == _REVISION_CONFLICT
