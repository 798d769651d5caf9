"""Wake-ups instead of polling ticks: work was queued (claims), a run changed (event streams).

SPEC §10 wants a waiting claim woken as soon as matching work is committed, and SPEC §13 wants a
run's event stream to carry each new event promptly; neither polls on a fixed tick.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

__all__ = ["Following", "RunChanges", "StepKey", "StepSignal", "WorkSignal"]


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


class RunChanges:
    """Wake-ups per run: a commit to a run wakes whoever follows that run (event streams).

    A follower takes a :meth:`Following.waiter` *before* it reads the run's new events and
    waits on it only if it found none, so a commit between the two is not missed. Entries exist
    only while a run has followers, so the map is bounded by the open streams, not by the runs.
    :meth:`close` wakes every follower for good (the service is stopping: streams end now).
    """

    def __init__(self) -> None:
        self._events: dict[str, anyio.Event] = {}
        self._followers: dict[str, int] = {}
        self.closed = False

    @contextmanager
    def follow(self, run_id: str) -> Iterator[Following]:
        """Follow ``run_id`` for the duration of the block."""
        self._followers[run_id] = self._followers.get(run_id, 0) + 1
        try:
            yield Following(self, run_id)
        finally:
            left = self._followers[run_id] - 1
            if left:
                self._followers[run_id] = left
            else:
                del self._followers[run_id]
                self._events.pop(run_id, None)

    def _waiter(self, run_id: str) -> anyio.Event:
        event = self._events.get(run_id)
        if event is None:
            event = anyio.Event()
            if self.closed:
                event.set()
            elif run_id in self._followers:
                self._events[run_id] = event
        return event

    def notify(self, run_id: str) -> None:
        """Wake the followers of ``run_id`` (a commit to it succeeded)."""
        event = self._events.pop(run_id, None)
        if event is not None:
            event.set()

    def close(self) -> None:
        """Wake every follower now and from now on."""
        self.closed = True
        events, self._events = self._events, {}
        for event in events.values():
            event.set()


class Following:
    """One follower's view of :class:`RunChanges` for one run."""

    def __init__(self, changes: RunChanges, run_id: str) -> None:
        self._changes = changes
        self.run_id = run_id

    @property
    def closed(self) -> bool:
        """Whether the service is stopping (no more wake-ups will come)."""
        return self._changes.closed

    def waiter(self) -> anyio.Event:
        """The event the next commit to the run sets."""
        return self._changes._waiter(self.run_id)
