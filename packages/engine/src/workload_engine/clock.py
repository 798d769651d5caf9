"""Clock adapters: the system clock, and a fake clock that tests move by hand or by autojump."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import TracebackType

import anyio

__all__ = ["FakeClock", "SystemClock", "wait_until_idle"]


async def wait_until_idle() -> None:
    """Return once no other task can run without time passing or outside I/O completing.

    On asyncio this watches the loop's ready queue, which is immediate; anyio's portable
    ``wait_all_tasks_blocked`` polls every 100 ms and would make fake-clock tests slow.
    Only one task at a time may wait for idleness: two would keep each other busy.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # another backend (trio): use the portable, slower check
        await anyio.wait_all_tasks_blocked()
        return
    quiet_rounds = 0
    while quiet_rounds < _QUIET_ROUNDS:
        await anyio.lowlevel.checkpoint()
        # Our own wake-up was just taken off the queue: anything left is another task's.
        quiet_rounds = 0 if getattr(loop, "_ready", None) else quiet_rounds + 1


_QUIET_ROUNDS = 3


class _CancelAt:
    """A cancel scope bounded by a deadline; ``expired``: the deadline passed while it ran.

    Expired even if the block swallowed the cancellation and finished anyway: what it did
    after its deadline does not count.
    """

    __slots__ = ("_on_exit", "_scope", "expired")

    def __init__(self, scope: anyio.CancelScope, on_exit: Callable[[], None] | None = None) -> None:
        self._scope = scope
        self._on_exit = on_exit
        self.expired = False

    def __enter__(self) -> _CancelAt:
        self._scope.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        try:
            return bool(self._scope.__exit__(kind, error, traceback))
        finally:
            self.expired = self._scope.cancel_called
            if self._on_exit is not None:
                self._on_exit()


class SystemClock:
    """Wall-clock time in UTC; sleeping uses the event loop's timer."""

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(UTC)

    async def sleep_until(self, deadline: datetime) -> None:
        """Sleep until ``deadline``; loops because loop timers may wake a little early."""
        while True:
            remaining = (deadline - self.now()).total_seconds()
            if remaining <= 0:
                await anyio.lowlevel.checkpoint()
                return
            await anyio.sleep(remaining)

    def cancel_at(self, deadline: datetime) -> _CancelAt:
        """A block cancelled once ``deadline`` has passed: a cancel scope on the loop's timer."""
        remaining = (deadline - self.now()).total_seconds()
        return _CancelAt(anyio.CancelScope(deadline=anyio.current_time() + remaining))


class FakeClock:
    """A clock that only moves when told to; sleepers wake when their deadline is reached.

    Tests either call :meth:`advance` / :meth:`advance_to`, or run :meth:`autojump` in a task:
    whenever every other task is blocked it jumps to the earliest pending deadline, so a run that
    waits for hours of backoff completes in milliseconds, deterministically.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._sleepers: list[_Sleeper] = []
        self._counter = itertools.count()

    def now(self) -> datetime:
        """Return the fake current time."""
        return self._now

    async def sleep_until(self, deadline: datetime) -> None:
        """Wait until the fake time reaches ``deadline``."""
        if deadline <= self._now:
            await anyio.lowlevel.checkpoint()
            return
        sleeper = _Sleeper(deadline, next(self._counter))
        heapq.heappush(self._sleepers, sleeper)
        try:
            await sleeper.event.wait()
        finally:
            # A cancelled sleeper must not make autojump move time to its deadline.
            sleeper.active = False

    def cancel_at(self, deadline: datetime) -> _CancelAt:
        """A block cancelled once the fake time reaches ``deadline`` (at once if it has)."""
        scope = anyio.CancelScope()
        if deadline <= self._now:
            scope.cancel()
            return _CancelAt(scope)
        sleeper = _Sleeper(deadline, next(self._counter), scope.cancel)
        heapq.heappush(self._sleepers, sleeper)

        def finished() -> None:
            # Like a cancelled sleeper, a finished block must not make autojump move time.
            sleeper.active = False

        return _CancelAt(scope, finished)

    def next_deadline(self) -> datetime | None:
        """Return the earliest deadline someone is still sleeping towards."""
        self._drop_abandoned()
        return self._sleepers[0].deadline if self._sleepers else None

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` and wake every sleeper now due."""
        self.advance_to(self._now + timedelta(seconds=seconds))

    def advance_to(self, instant: datetime) -> None:
        """Move time forward to ``instant`` (never backwards) and wake every sleeper now due."""
        self._now = max(self._now, instant)
        while self._sleepers and self._sleepers[0].deadline <= self._now:
            heapq.heappop(self._sleepers).wake()

    async def autojump(self, idle_poll_seconds: float = 0.001) -> None:
        """Forever: once all other tasks are blocked, jump to the next deadline."""
        while True:
            await wait_until_idle()
            deadline = self.next_deadline()
            if deadline is None:
                # Blocked on something that is not time (or finished): wait in real time.
                await anyio.sleep(idle_poll_seconds)
            else:
                self.advance_to(deadline)

    def _drop_abandoned(self) -> None:
        while self._sleepers and not self._sleepers[0].active:
            heapq.heappop(self._sleepers)


class _Sleeper:
    __slots__ = ("active", "deadline", "event", "on_due", "order")

    def __init__(
        self, deadline: datetime, order: int, on_due: Callable[[], object] | None = None
    ) -> None:
        self.deadline = deadline
        self.order = order
        self.event = anyio.Event()
        self.on_due = on_due
        self.active = True

    def wake(self) -> None:
        """The deadline is reached: wake the sleeper (or cancel its block, if still inside)."""
        if self.on_due is None:
            self.event.set()
        elif self.active:
            self.on_due()

    def __lt__(self, other: _Sleeper) -> bool:
        return (self.deadline, self.order) < (other.deadline, other.order)
