"""The state of one ``Worker.serve()``: the attempts in flight, and how far stopping has gone."""

from __future__ import annotations

import signal

import anyio

from workload_worker._attempt import AttemptRunner
from workload_worker._loop import LoopCaller

__all__ = ["Serving"]


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
        self.first_signal: tuple[signal.Signals, float] | None = None
        """The signal that began stopping, and when (the loop's clock)."""
        self._changed = anyio.Event()

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
