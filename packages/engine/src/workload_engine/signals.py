"""Wake-ups instead of polling ticks: work was queued (claims), a run changed (event streams).

SPEC §10 wants a waiting claim woken as soon as matching work is committed, and SPEC §13 wants a
run's event stream to carry each new event promptly; neither polls on a fixed tick.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager

import anyio

__all__ = [
    "Following",
    "Listening",
    "RunChanges",
    "StepKey",
    "StepSignal",
    "Work",
    "WorkSignal",
]


Work = tuple[str, str]
"""``(queue, action)``: what queued work a notification names (SPEC §10)."""


class WorkSignal:
    """Wake-ups of waiting claims: work queued wakes the claims that could take it.

    A claim listens (:meth:`listen`) for its queues and actions for as long as it waits; a
    notification naming what was queued (``(queue, action)`` pairs) wakes only the claims whose
    queues and actions both match, so idle claims on other queues cost nothing. A notification
    that names nothing (``None``: an older peer, a payload too long to send) wakes every claim:
    nothing is ever missed, at the price of a look each. A claimer takes a
    :meth:`Listening.waiter` *before* it looks for work and waits on it only if it found none, so
    a notification between the two is not missed. :meth:`close` wakes everyone for good (the
    service is stopping: long-polls answer now).
    """

    def __init__(self) -> None:
        self._by_queue: dict[str, set[Listening]] = {}
        self._listening: set[Listening] = set()
        self.closed = False

    @property
    def waiting(self) -> int:
        """How many claims listen now."""
        return len(self._listening)

    @contextmanager
    def listen(self, queues: Collection[str], actions: Collection[str]) -> Iterator[Listening]:
        """Listen for work of ``queues`` × ``actions`` for the duration of the block."""
        listening = Listening(self, frozenset(queues), frozenset(actions))
        self._listening.add(listening)
        for queue in listening.queues:
            self._by_queue.setdefault(queue, set()).add(listening)
        try:
            yield listening
        finally:
            self._listening.discard(listening)
            for queue in listening.queues:
                found = self._by_queue.get(queue)
                if found is not None:
                    found.discard(listening)
                    if not found:
                        del self._by_queue[queue]

    def notify(self, work: Iterable[Work] | None = None) -> None:
        """Wake the claims that match ``work`` (work was committed); None wakes every claim."""
        if work is None:
            for listening in self._listening:
                listening.wake()
            return
        for queue, action in work:
            for listening in self._by_queue.get(queue, ()):
                if action in listening.actions:
                    listening.wake()

    def close(self) -> None:
        """Wake every waiter now and from now on."""
        self.closed = True
        self.notify()


class Listening:
    """One waiting claim's view of :class:`WorkSignal`: the queues and actions it can take."""

    def __init__(self, signal: WorkSignal, queues: frozenset[str], actions: frozenset[str]) -> None:
        self._signal = signal
        self.queues = queues
        self.actions = actions
        self._event = anyio.Event()

    def waiter(self) -> anyio.Event:
        """The event the next matching notification sets (set at once once closed)."""
        if self._event.is_set() and not self._signal.closed:
            self._event = anyio.Event()
        elif self._signal.closed:
            self._event.set()
        return self._event

    def wake(self) -> None:
        """Matching work was queued."""
        self._event.set()


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
