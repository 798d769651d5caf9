"""The state of one ``Worker.serve()``: the attempts in flight, and how far stopping has gone."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from workload_worker._attempt import AttemptRunner
from workload_worker._loop import LoopCaller

if TYPE_CHECKING:
    from workload_worker._signals import RunSignals

__all__ = ["LINGERING_RECHECK_SECONDS", "SAME_SIGNAL_SECONDS", "SHUTDOWN_REPORT_SECONDS", "Serving"]

logger = logging.getLogger("workload.worker")

SHUTDOWN_REPORT_SECONDS = 10.0
"""After the grace period, how long cancelled attempts get to report ``worker_shutdown``."""
SAME_SIGNAL_SECONDS = 0.5
"""A repeat of the first stop signal this soon is the same signal delivered twice."""
LINGERING_RECHECK_SECONDS = 0.2
"""How often a worker short of slots looks whether an abandoned handler's thread returned."""


class Serving:
    """Slots in use, the grace deadline, and the events the claim loop and the drain wait on."""

    def __init__(self, grace_seconds: float) -> None:
        self.grace_seconds = grace_seconds
        self.loop = LoopCaller()
        self.active: set[AttemptRunner] = set()
        self.draining = anyio.Event()
        self.hurry = anyio.Event()
        self.deadline = float("inf")
        self.claim_scope: anyio.CancelScope | None = None
        self.on_stop: Callable[[], None] | None = None
        """What else stopping ends (the MCP servers' start-up, while they start)."""
        self.first_signal: tuple[signal.Signals, float] | None = None
        """The signal that began stopping, and when (the loop's clock)."""
        self._changed = anyio.Event()
        self._lingering_lock = threading.Lock()
        self._lingering = 0

    @property
    def lingering(self) -> int:
        """Sync handlers still running in their threads after their attempts were abandoned.

        A thread cannot be cancelled: until it returns, it holds its slot of ``concurrency``,
        so that a handler that ignores ``ctx.cancelled`` never makes the worker run more
        threads than that.
        """
        with self._lingering_lock:
            return self._lingering

    def thread_left(self) -> None:
        """An abandoned attempt's handler thread still runs (from the loop)."""
        with self._lingering_lock:
            self._lingering += 1

    def thread_returned(self) -> None:
        """An abandoned attempt's handler thread returned (from that thread): a slot is free.

        Counted only: the thread never waits for the loop (which may have stopped by then); a
        claim loop short of slots looks again every :data:`LINGERING_RECHECK_SECONDS`.
        """
        with self._lingering_lock:
            self._lingering -= 1

    def changed(self) -> None:
        """Something the loops wait on changed (a slot freed, a stop asked)."""
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_change(self) -> None:
        """Wait until :meth:`changed` is called."""
        await self._changed.wait()

    def stop(self, *, now: bool) -> None:
        """Stop claiming; with ``now``, cancel running handlers without waiting (in the loop)."""
        if not self.draining.is_set():
            self.draining.set()
            self.deadline = anyio.current_time() + self.grace_seconds
        if now:
            self.hurry.set()
            self.deadline = anyio.current_time()
        if self.on_stop is not None:
            self.on_stop()
        if self.claim_scope is not None:
            # A claim waiting on the server is cut off at once, or an idle worker would take up
            # to wait_seconds to stop. The server hands no attempt to a worker that hung up (it
            # watches the connection while the claim waits); only an answer already on its way
            # is lost, and its attempts are retried once their lease expires, like a crashed
            # worker's. Running handlers keep their grace period: they are not in this scope.
            self.claim_scope.cancel()
        self.changed()

    async def pause(self, seconds: float) -> None:
        """Sleep, unless stopping begins."""
        with anyio.move_on_after(seconds):
            await self.draining.wait()

    async def drain(self, attempts: anyio.abc.TaskGroup, worker_id: str) -> None:
        """Wait for running attempts until the grace deadline, then cancel and report them."""
        if self.active:
            left = max(0.0, self.deadline - anyio.current_time())
            logger.info(
                "worker %s: stopping, waiting up to %.0f s for %d attempt(s)",
                worker_id,
                left,
                len(self.active),
            )
            with anyio.move_on_at(self.deadline):
                while self.active and not self.hurry.is_set():
                    await self.wait_change()
        if self.active:
            logger.warning(
                "worker %s: cancelling %d attempt(s), reported worker_shutdown",
                worker_id,
                len(self.active),
            )
            for runner in list(self.active):
                runner.shutdown()
            with anyio.move_on_after(SHUTDOWN_REPORT_SECONDS):
                while self.active:
                    await self.wait_change()
        attempts.cancel_scope.cancel()

    async def route_signals(
        self, stack: contextlib.AsyncExitStack, handle_signals: bool, run: RunSignals | None
    ) -> None:
        """Take stop signals as :meth:`signalled` until ``stack`` closes, from the very start.

        The MCP servers' start-up included. The signals are its own
        (``serve(handle_signals=True)``), or those ``Worker.run`` holds (``run``).
        """
        if handle_signals:
            watching = await stack.enter_async_context(anyio.create_task_group())
            await watching.start(self.watch_signals)
            stack.callback(watching.cancel_scope.cancel)  # first out: the watcher ends
        elif run is not None:
            stack.enter_context(run.serving(self.signalled))

    async def watch_signals(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Take SIGTERM and SIGINT as :meth:`signalled` (``serve(handle_signals=True)``)."""
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
            task_status.started()
            async for signum in received:
                self.signalled(signal.Signals(signum))

    def signalled(self, received: signal.Signals) -> None:
        """A stop signal (in the loop): the first drains, the next stops now.

        The first signal again within :data:`SAME_SIGNAL_SECONDS` is the same stop delivered
        twice: a process group signalled through ``uv run`` (Ctrl-C in a terminal, systemd's
        control-group kill) gets it directly and forwarded. Taken as a second signal, it would
        cancel every running handler without its grace period.
        """
        now = anyio.current_time()
        first = self.first_signal
        if first is not None and first[0] is received and now - first[1] < SAME_SIGNAL_SECONDS:
            logger.warning("%s again at once: the same stop, delivered twice", received.name)
        elif self.draining.is_set():
            logger.warning("%s again: stopping now", received.name)
            self.stop(now=True)
        else:
            self.first_signal = (received, now)
            logger.warning(
                "%s: stopping (running handlers get %g s; again to stop now)",
                received.name,
                self.grace_seconds,
            )
            self.stop(now=False)
