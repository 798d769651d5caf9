"""Wake-ups for waiting claims: work was queued, look again (SPEC §10: not a polling tick)."""

from __future__ import annotations

import anyio

__all__ = ["StepKey", "StepSignal", "WorkSignal"]


class WorkSignal:
    """A broadcast: every claim waiting now wakes when any attempt is queued.

    A claimer takes a :meth:`waiter` *before* it looks for work, and waits on it only if it
    found none: a notification between the two sets that waiter, so none is missed. Waiters
    claim again and wait again if they still find nothing, so a signal carries no payload.
    :meth:`close` wakes everyone for good (the service is stopping: long-polls answer now).
    """

    def __init__(self) -> None:
        self._event: anyio.Event | None = None
        self.closed = False

    def waiter(self) -> anyio.Event:
        """The event the next notification sets."""
        if self._event is None:
            self._event = anyio.Event()
            if self.closed:
                self._event.set()
        return self._event

    def notify(self) -> None:
        """Wake every waiter (work was committed)."""
        event, self._event = self._event, None
        if event is not None:
            event.set()

    def close(self) -> None:
        """Wake every waiter now and from now on."""
        self.closed = True
        self.notify()


StepKey = tuple[str, str, int]
"""``(run_id, task_key, attempt)``: an agent attempt, whose journal a loop may wait on."""


class StepSignal:
    """Wake-ups for agent loops waiting on remote tool calls (SPEC §11).

    Whoever ends a tool call's step — a worker's report, the lease reaper — notifies the
    attempt's key; its loop re-reads its journal. Like :class:`WorkSignal`, a loop takes its
    :meth:`waiter` before it reads, so a notification in between is not missed. (A loop also
    re-reads on a slow tick, for ends written by another process.)
    """

    def __init__(self) -> None:
        self._events: dict[StepKey, anyio.Event] = {}

    def waiter(self, key: StepKey) -> anyio.Event:
        """The event the next notification of ``key`` sets."""
        event = self._events.get(key)
        if event is None:
            event = self._events[key] = anyio.Event()
        return event

    def notify(self, key: StepKey) -> None:
        """A step of ``key``'s journal ended."""
        event = self._events.pop(key, None)
        if event is not None:
            event.set()
