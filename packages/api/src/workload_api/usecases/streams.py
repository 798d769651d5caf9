"""A run's event stream (SPEC §13): every event once, in sequence order, then the end.

:meth:`EventStreams.open` checks the caps (ADR 0025: streams per principal and per run, else
``TooManyRequests`` — 429 with ``Retry-After``) and that the run exists (``RunNotFound``), both
before anything is sent, and returns the stream: batches of events after the last sequence sent
(the primary key's order, at most :data:`BATCH` at a time), a keep-alive every ``keepalive``
seconds while nothing happens, and :class:`End` once the run is terminal and every event up to
its terminal one was sent.

A stream reads its run once when it opens (from its own position: ``Last-Event-ID``); after
that, the run's streams in this process share one reader (:class:`~._feeds.RunFeed`), which
reads once per commit the engine signals (``RunChanges``), and every ``recheck`` seconds for
commits made by another process (a replica, SPEC §14) — once for all of them, not once per
stream. When the service stops, the signal closes and the stream ends without :class:`End`; a
client resumes with ``Last-Event-ID`` and gets the events it missed, none twice.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import ExitStack
from dataclasses import dataclass

import anyio

from workload_api import resources
from workload_api.usecases._feeds import BATCH, Feeds, RunFeed
from workload_api.usecases._holds import Holds
from workload_domain.events import EventType
from workload_domain.jsonvalues import JsonObject
from workload_domain.ports import Store
from workload_domain.records import RunRecord
from workload_domain.statuses import RunStatus
from workload_engine.signals import RunChanges

__all__ = [
    "BATCH",
    "MAX_STREAMS_PER_PRINCIPAL",
    "MAX_STREAMS_PER_RUN",
    "STREAM_RETRY_AFTER",
    "End",
    "EventStream",
    "EventStreams",
    "Events",
    "KeepAlive",
    "StreamItem",
]

MAX_STREAMS_PER_PRINCIPAL = 100
"""Event streams one principal (a token, with its console sessions) may hold open at once."""
MAX_STREAMS_PER_RUN = 500
"""Event streams of one run open at once."""
STREAM_RETRY_AFTER = 5
"""The ``Retry-After`` of a stream refused for a cap (seconds)."""

_TERMINAL_EVENTS = frozenset(
    {EventType.RUN_SUCCEEDED, EventType.RUN_FAILED, EventType.RUN_CANCELED}
)
_TERMINAL_RUNS = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELED})


@dataclass(frozen=True, slots=True)
class Events:
    """Events to send, in sequence order (each carries its ``sequence``)."""

    items: list[JsonObject]


@dataclass(frozen=True, slots=True)
class KeepAlive:
    """Nothing happened for a while: a comment keeps proxies from closing the stream."""


@dataclass(frozen=True, slots=True)
class End:
    """The run is terminal and every one of its events was sent."""

    run_id: str
    status: str


StreamItem = Events | KeepAlive | End


class EventStream:
    """One open stream: its items, and :meth:`aclose`.

    Closing gives the stream's place under the caps back; call it whether or not the items
    were ever iterated.
    """

    def __init__(
        self, items: AsyncGenerator[StreamItem, None], release: Callable[[], None]
    ) -> None:
        self._items = items
        self._release: Callable[[], None] | None = release

    def __aiter__(self) -> AsyncIterator[StreamItem]:
        return self._items

    async def aclose(self) -> None:
        """End the stream (idempotent)."""
        release, self._release = self._release, None
        if release is not None:
            release()
        await self._items.aclose()


class EventStreams:
    """Opens event streams of runs over the store and the engine's change signal."""

    def __init__(
        self,
        store: Store,
        changes: RunChanges,
        *,
        keepalive: float = 15.0,
        recheck: float = 5.0,
        max_per_principal: int = MAX_STREAMS_PER_PRINCIPAL,
        max_per_run: int = MAX_STREAMS_PER_RUN,
    ) -> None:
        self._store = store
        self._keepalive = keepalive
        self._feeds = Feeds(store, changes, recheck=recheck)
        self._per_principal = max_per_principal
        self._per_run = max_per_run
        self.open_streams = Holds("event streams", retry_after=STREAM_RETRY_AFTER)
        """The streams open now, per principal and per run (ADR 0025)."""

    @property
    def feeds(self) -> int:
        """How many runs have a shared reader now."""
        return len(self._feeds)

    async def open(self, run_id: str, after: int, *, principal: str = "") -> EventStream:
        """The stream of ``run_id``, starting after sequence ``after``.

        Raises:
            TooManyRequests: the principal or the run has as many streams open as it may.
            RunNotFound: no such run (raised here, before the first item).
        """
        caps = [
            ("per_principal", principal, self._per_principal),
            ("per_run", run_id, self._per_run),
        ]
        with ExitStack() as stack:
            stack.enter_context(self.open_streams.hold(caps))
            run = await self._store.get_run(run_id)
            held = stack.pop_all()
        return EventStream(self._items(run, after), held.close)

    async def _items(self, run: RunRecord, after: int) -> AsyncGenerator[StreamItem, None]:
        # A run that was terminal when read has all its events committed: read them, then end.
        terminal = run.status in _TERMINAL_RUNS
        status = run.status.value
        quiet_since = anyio.current_time()
        with self._feeds.join(run.run_id) as feed:
            # Its own first read, from its own position; the feed's reads after that.
            found = await self._store.list_events(run.run_id, after, BATCH)
            sent = False  # whether ``after`` is an event's (else the client's position)
            if not feed.begun:  # from where this stream's read ended, if that is a real place
                known = found[-1].sequence if found else after
                feed.begin(known if found or await self._exists(run.run_id, after) else 0)
            while True:
                if found:
                    after, sent = found[-1].sequence, True
                    for event in found:
                        if event.type in _TERMINAL_EVENTS:
                            terminal = True
                            status = event.type.value.removeprefix("run.")
                    yield Events([resources.event(e) for e in found])
                    quiet_since = anyio.current_time()
                    if len(found) == BATCH:
                        found = await feed.events(after, read=True)  # more may be waiting
                        continue
                if terminal:
                    yield End(run.run_id, status)
                    return
                if feed.closed:
                    return
                if await self._wait(feed, after, quiet_since):
                    yield KeepAlive()
                    quiet_since = anyio.current_time()
                found = await feed.events(after, read=sent)

    async def _exists(self, run_id: str, sequence: int) -> bool:
        """Whether the run has an event ``sequence`` (0: the start, always there)."""
        return sequence == 0 or bool(await self._store.list_events(run_id, sequence - 1, 1))

    async def _wait(self, feed: RunFeed, after: int, quiet_since: float) -> bool:
        """Wait for new events, a due read or a keep-alive; True when a keep-alive is due."""
        due = quiet_since + self._keepalive
        if not (feed.has_after(after) or feed.due()):
            wait = max(0.0, min(due, feed.next_recheck()) - anyio.current_time())
            with anyio.move_on_after(wait):
                async with anyio.create_task_group() as tg:

                    async def until(event: anyio.Event) -> None:
                        await event.wait()
                        tg.cancel_scope.cancel()

                    tg.start_soon(until, feed.appended)
                    tg.start_soon(until, feed.pending)
        return not feed.closed and anyio.current_time() >= due
