"""A run's event stream (SPEC §13): every event once, in sequence order, then the end.

:meth:`EventStreams.open` checks the run exists (``RunNotFound`` before anything is sent) and
returns the stream's items: batches of events read from the store *after* the last sequence sent
(the primary key's order, at most :data:`BATCH` per read), a keep-alive every ``keepalive``
seconds while nothing happens, and :class:`End` once the run is terminal and every event up to
its terminal one was sent.

Between reads the stream waits on :class:`~workload_engine.signals.RunChanges`, which every
commit to the run notifies in this process, so an event reaches the client as soon as it is
committed, without a polling tick. A commit made by another process (a replica, SPEC §14) has
no in-process signal: the stream also re-reads every ``recheck`` seconds, its safety net. When
the service stops, the signal closes and the stream ends without :class:`End`; a client resumes
with ``Last-Event-ID`` and gets the events it missed, none twice.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass

import anyio

from workload_api import resources
from workload_domain.events import EventType
from workload_domain.jsonvalues import JsonObject
from workload_domain.model import RunRecord
from workload_domain.ports import Store
from workload_domain.statuses import RunStatus
from workload_engine.signals import Following, RunChanges

__all__ = ["BATCH", "End", "EventStreams", "Events", "KeepAlive", "StreamItem"]

BATCH = 200
"""Events read (and sent) at most per store read."""

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


class EventStreams:
    """Opens event streams of runs over the store and the engine's change signal."""

    def __init__(
        self,
        store: Store,
        changes: RunChanges,
        *,
        keepalive: float = 15.0,
        recheck: float = 5.0,
    ) -> None:
        self._store = store
        self._changes = changes
        self._keepalive = keepalive
        self._recheck = recheck

    async def open(self, run_id: str, after: int) -> AsyncGenerator[StreamItem, None]:
        """The items of ``run_id``'s stream, starting after sequence ``after``.

        Raises:
            RunNotFound: no such run (raised here, before the first item).
        """
        run = await self._store.get_run(run_id)
        return self._items(run, after)

    async def _items(self, run: RunRecord, after: int) -> AsyncGenerator[StreamItem, None]:
        # A run that was terminal when read has all its events committed: read them, then end.
        terminal = run.status in _TERMINAL_RUNS
        status = run.status.value
        quiet_since = anyio.current_time()
        with self._changes.follow(run.run_id) as following:
            while True:
                waiter = following.waiter()  # before reading: a commit now is not missed
                found = await self._store.list_events(run.run_id, after, BATCH)
                if found:
                    after = found[-1].sequence
                    for event in found:
                        if event.type in _TERMINAL_EVENTS:
                            terminal = True
                            status = event.type.value.removeprefix("run.")
                    yield Events([resources.event(e) for e in found])
                    quiet_since = anyio.current_time()
                    if len(found) == BATCH:
                        continue  # more may be waiting: read on before anything else
                if terminal:
                    yield End(run.run_id, status)
                    return
                if following.closed:
                    return
                if await self._wait(following, waiter, quiet_since):
                    yield KeepAlive()
                    quiet_since = anyio.current_time()

    async def _wait(self, following: Following, waiter: anyio.Event, quiet_since: float) -> bool:
        """Wait for a commit, the recheck or a keep-alive; True when a keep-alive is due."""
        due = quiet_since + self._keepalive
        wait = max(0.0, min(due - anyio.current_time(), self._recheck))
        with anyio.move_on_after(wait):
            await waiter.wait()
        return not following.closed and anyio.current_time() >= due
