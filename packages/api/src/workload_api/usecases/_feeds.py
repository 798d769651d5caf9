"""One shared reader per followed run: N event streams of a run make one store read per change.

A :class:`RunFeed` keeps a window of a run's latest events (contiguous by sequence) and reads
new ones from the store for all of the run's streams in this process. A read is made, by
whichever stream asks first (the others wait on the feed's lock, then find it done), only when
it is due:

- a commit to the run was signalled since the last read began (``RunChanges``: the feed takes
  the run's waiter *before* each read, so a commit during a read is not missed);
- the last read filled a whole batch (more may be waiting);
- the last read began ``recheck`` seconds ago or more (commits of other processes have no
  in-process signal: the safety net).

Each stream still keeps its own position (its ``Last-Event-ID``): it takes the window's events
after it, or — behind the window (it joined with an old position, or its client is slow) —
reads its own way up to it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

import anyio

from workload_domain.ports import Store
from workload_domain.records import EventRecord
from workload_engine.signals import Following, RunChanges

__all__ = ["BATCH", "WINDOW", "Feeds", "RunFeed"]

BATCH = 200
"""Events read (and sent) at most per store read."""
WINDOW = 4 * BATCH
"""Events a feed keeps for its streams; one further behind reads on its own."""


class RunFeed:
    """The shared reader of one run's events (see the module docstring)."""

    def __init__(self, store: Store, following: Following, recheck: float) -> None:
        self._store = store
        self._following = following
        self._recheck = recheck
        self._lock = anyio.Lock()
        self._window: list[EventRecord] = []
        self._tail: int | None = None
        """The last sequence read (None: not read yet)."""
        self._more = False
        self._pending = following.waiter()
        self._read_at = -float("inf")
        self.appended = anyio.Event()
        """Set when a read adds events (then replaced): streams waiting wake and take them."""

    @property
    def run_id(self) -> str:
        """The run whose events this feed reads."""
        return self._following.run_id

    @property
    def closed(self) -> bool:
        """Whether the service is stopping (no more wake-ups will come)."""
        return self._following.closed

    def due(self) -> bool:
        """Whether a read is due now (a signalled commit, a full batch, the recheck)."""
        return (
            self._pending.is_set()
            or self._more
            or anyio.current_time() - self._read_at >= self._recheck
        )

    def has_after(self, after: int) -> bool:
        """Whether the window holds events after ``after`` (or ``after`` is behind it)."""
        return self._tail is not None and after < self._tail

    def next_recheck(self) -> float:
        """When (loop time) the recheck makes the next read due."""
        return self._read_at + self._recheck

    @property
    def begun(self) -> bool:
        """Whether the feed knows where to read on from (see :meth:`begin`)."""
        return self._tail is not None

    def begin(self, start: int) -> None:
        """Read on from ``start`` (no later than the run's last event), unless already reading.

        The first stream's position, once checked: a position a client named past the run's
        last event would leave the feed waiting for events that do not come.
        """
        if self._tail is None:
            self._tail = start

    @property
    def pending(self) -> anyio.Event:
        """Set by a commit to the run since the last read began."""
        return self._pending

    async def events(self, after: int, *, read: bool = False) -> Sequence[EventRecord]:
        """Up to :data:`BATCH` events after ``after``: from the window, reading first if due.

        ``read``: ``after`` is the sequence of an event the stream was sent (not a position a
        client named), so past the feed's last one it shows the feed is behind: read now.
        """
        if self._tail is None:
            raise RuntimeError("a feed is read only after begin()")
        if self.due() or (read and after > self._tail):
            await self._read(after if read else self._tail)
        base = self._window[0].sequence - 1 if self._window else self._tail
        if after < base:
            # Behind the window: this stream catches up on its own.
            return await self._store.list_events(self.run_id, after, BATCH)
        start = after - base
        return self._window[start : start + BATCH]

    async def _read(self, after: int) -> None:
        async with self._lock:
            assert self._tail is not None
            if not (self.due() or after > self._tail):
                return  # another stream read meanwhile
            self._pending = self._following.waiter()  # before reading: a commit now is not missed
            self._read_at = anyio.current_time()
            try:
                found = await self._store.list_events(self.run_id, self._tail, BATCH)
            except BaseException:
                self._read_at = -float("inf")  # not read: the next stream to ask reads again
                raise
            self._more = len(found) == BATCH
            if found:
                self._window.extend(found)
                self._tail = found[-1].sequence
                del self._window[:-WINDOW]
                appended, self.appended = self.appended, anyio.Event()
                appended.set()


class Feeds:
    """The feeds of the runs followed in this process: one per run while it has streams."""

    def __init__(self, store: Store, changes: RunChanges, *, recheck: float) -> None:
        self._store = store
        self._changes = changes
        self._recheck = recheck
        self._feeds: dict[str, tuple[RunFeed, ExitStack, int]] = {}

    def __len__(self) -> int:
        return len(self._feeds)

    @contextmanager
    def join(self, run_id: str) -> Iterator[RunFeed]:
        """The run's feed for the duration of the block (made by its first stream)."""
        entry = self._feeds.get(run_id)
        if entry is None:
            stack = ExitStack()
            following = stack.enter_context(self._changes.follow(run_id))
            entry = (RunFeed(self._store, following, self._recheck), stack, 0)
        feed, stack, count = entry
        self._feeds[run_id] = (feed, stack, count + 1)
        try:
            yield feed
        finally:
            feed, stack, count = self._feeds[run_id]
            if count > 1:
                self._feeds[run_id] = (feed, stack, count - 1)
            else:
                del self._feeds[run_id]
                stack.close()
