"""``LISTEN/NOTIFY`` between replicas (SPEC §14): what one process writes, the others hear.

With several ``workload serve`` processes on one database, the store of each replica announces
(:meth:`~workload_store_postgres.store.PostgresStore.announce`) new runs and runs changed through
its API (``workload_runs``, payload the run id), queued remote work (``workload_work``, payload
its queues and actions: ``_work_notice``) and tool
calls ended by a worker or the reaper (``workload_steps``, payload ``run/attempt/task``).
A ``--standby`` process announces from the start, and its listener also says it is there
(``workload_replicas``) when it connects and every :data:`PRESENCE_SECONDS`. Every process
listens, a leader started without ``--standby`` too: it announces nothing while it is alone (a
notification costs at commit) and from the moment it hears another process (``on_replica``).
:class:`PostgresNotifications` listens on a dedicated connection (``LISTEN`` needs a session of
its own, never a pooled one) and hands each notification to its handler, except those its own
process sent (``senders``: the store, which knows its connections' backend pids), which it has
already told itself. Notifications are
wake-ups, not the source of truth: a listener that loses its connection reconnects and, once it
listens again, tells its handlers (``listening``) that whatever it missed meanwhile must be
looked at again — the runners read their runs anew; the periodic sweep adopts any new run a
lost notification did not announce.

A replica (``--replica``, SPEC §16; ``sharded``) hears only what concerns the shards it holds:
runs and ended tool calls are announced on their shard's channel (``workload_shard_<n>``, payload
``r:<run_id>`` or ``s:<run_id>/<attempt>/<task_key>``), and its listener listens to the channels
of exactly the shards it holds (:meth:`PostgresNotifications.hear_shards`), besides queued work
(every replica's claims wait for it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from typing import Protocol

import anyio
import psycopg

from workload_domain.ports import NotifyHandlers as Handlers
from workload_store_postgres._db import (
    RUNS_CHANNEL,
    SHARD_CHANNEL_PREFIX,
    STEPS_CHANNEL,
    shard_channel,
)
from workload_store_postgres._work_notice import decode_work

__all__ = ["CHANNELS", "PRESENCE_SECONDS", "PostgresNotifications"]

_log = logging.getLogger("workload.notifications")

RUNS, WORK, STEPS = RUNS_CHANNEL, "workload_work", STEPS_CHANNEL
REPLICAS = "workload_replicas"
CHANNELS = (RUNS, WORK, STEPS, REPLICAS)
PRESENCE_SECONDS = 2.0
"""How often a ``--standby`` replica's listener says it is there (to a leader that would
otherwise announce nothing)."""
APPLICATION_NAME = "workload-listener"
RETRY_SECONDS = (0.2, 0.5, 1.0, 2.0)
"""The back-off between reconnection tries, the last repeated while the outage lasts."""
LOG_EVERY_SECONDS = 60.0
"""While reconnecting fails: a warning at the first failure, then at most this often."""
RESYNC_SECONDS = 0.1
"""A replica's listener looks this often whether the shards it must hear changed (a
``LISTEN`` cannot be sent while the connection waits for notifications)."""


class Senders(Protocol):
    """Which backends are this process's own: the store's pool (``PostgresStore``)."""

    def sent_here(self, backend_pid: int) -> bool:
        """Whether a notification from this backend pid is this process's own."""
        ...

    def forget_senders(self) -> None:
        """Count no connection made so far as this process's own."""
        ...


class PostgresNotifications:
    """Listens for other replicas' notifications until cancelled (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 5,
        senders: Senders | None = None,
        present: bool = False,
        on_replica: Callable[[], None] | None = None,
        presence_seconds: float = PRESENCE_SECONDS,
        retry_seconds: Sequence[float] = RETRY_SECONDS,
        log_every_seconds: float = LOG_EVERY_SECONDS,
        sharded: bool = False,
    ) -> None:
        self._url = url
        self._sharded = sharded
        """A replica's listener (SPEC §16): it hears the channels of the shards it holds."""
        self._wanted: frozenset[int] = frozenset()
        self._heard: frozenset[int] | None = None
        """The shards listened to on the current connection (None: not connected)."""
        self._synced = anyio.Event()
        self._connect_timeout = connect_timeout
        self._senders = senders
        self._present = present
        """Say this replica is there: when listening starts, and every ``presence_seconds``."""
        self._on_replica = on_replica
        """Told whenever another process is heard (any notification but this process's own)."""
        self._presence_seconds = presence_seconds
        self._retry_seconds = tuple(retry_seconds)
        self._log_every_seconds = log_every_seconds
        self._failures = 0
        """Failed tries since the listener last listened."""
        self._outage_since = 0.0
        self._logged_at = 0.0
        self.listening = anyio.Event()
        """Set once the first ``LISTEN`` is in place (tests wait for it)."""

    @property
    def failed_tries(self) -> int:
        """Failed tries to connect and listen since the listener last listened."""
        return self._failures

    async def hear_shards(self, shards: Collection[int]) -> None:
        """Listen to exactly these shards' channels; return once in place (or not connected)."""
        self._wanted = frozenset(shards)
        while self._heard is not None and self._heard != self._wanted:
            if self._synced.is_set():
                self._synced = anyio.Event()
            with anyio.move_on_after(self._connect_timeout):
                await self._synced.wait()
            if not self._synced.is_set():
                return  # the listener is stuck or reconnecting: it listens once it is back

    async def run(self, handlers: Handlers) -> None:
        """Listen, dispatch, and reconnect after a failure; never returns (cancel to stop)."""
        while True:
            try:
                await self._listen(handlers)
            except (psycopg.Error, OSError) as exc:
                delay = self._failed(exc)
                if self._senders is not None:
                    # The server may have restarted or changed: a pid of a connection made
                    # before may now be another backend's (see ``Sessions``).
                    self._senders.forget_senders()
                await anyio.sleep(delay)

    async def _listen(self, handlers: Handlers) -> None:
        conn = await psycopg.AsyncConnection.connect(
            self._url,
            autocommit=True,
            application_name=APPLICATION_NAME,
            connect_timeout=str(max(1, round(self._connect_timeout))),
        )
        async with conn:
            try:
                for channel in (WORK,) if self._sharded else CHANNELS:
                    await conn.execute(f"LISTEN {channel}")  # a constant: never input
                if self._sharded:
                    self._heard = frozenset()
                    await self._resync(conn)
                # What was announced before this point was not heard: let it be looked at again.
                handlers.listening()
                own = conn.info.backend_pid
                senders = self._senders
                while True:
                    if self._present:
                        await conn.execute(f"NOTIFY {REPLICAS}")  # a constant: never input
                    self._listens()
                    # Notifications that arrive between two passes wait in psycopg's backlog.
                    wait = self._presence_seconds if self._present else None
                    if self._sharded:
                        await self._resync(conn)
                        wait = RESYNC_SECONDS
                    async for notice in conn.notifies(timeout=wait):
                        if notice.pid == own or (
                            senders is not None and senders.sent_here(notice.pid)
                        ):
                            continue
                        if self._on_replica is not None:
                            self._on_replica()
                        _dispatch(handlers, notice.channel, notice.payload)
            finally:
                self._heard = None

    async def _resync(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        """Listen to the shards wanted now, and no others (a replica's listener)."""
        heard, wanted = self._heard or frozenset(), self._wanted
        for shard in sorted(wanted - heard):
            await conn.execute(f"LISTEN {shard_channel(shard)}")  # an integer: never input
        for shard in sorted(heard - wanted):
            await conn.execute(f"UNLISTEN {shard_channel(shard)}")
        self._heard = wanted
        self._synced.set()

    def _failed(self, error: BaseException) -> float:
        """Count a failed try, log it when due (not at every retry); return the back-off."""
        now = anyio.current_time()
        delay = self._retry_seconds[min(self._failures, len(self._retry_seconds) - 1)]
        self._failures += 1
        if self._failures == 1:
            self._outage_since = now
        if self._failures == 1 or now - self._logged_at >= self._log_every_seconds:
            self._logged_at = now
            _log.warning(
                "the notification listener reconnects in %ss: %s",
                delay,
                error,
                extra={"fields": {"failed_tries": self._failures}},
            )
        return delay

    def _listens(self) -> None:
        """``LISTEN`` is in place: an outage, if there was one, is over (logged once)."""
        if self._failures:
            _log.info(
                "the notification listener listens again",
                extra={
                    "fields": {
                        "failed_tries": self._failures,
                        "seconds": round(anyio.current_time() - self._outage_since, 3),
                    }
                },
            )
            self._failures = 0
        self.listening.set()


def _dispatch(handlers: Handlers, channel: str, payload: str) -> None:
    if channel.startswith(SHARD_CHANNEL_PREFIX):
        kind, _, payload = payload.partition(":")
        channel = RUNS if kind == "r" else STEPS if kind == "s" else ""
    if channel == RUNS:
        handlers.run(payload)
    elif channel == WORK:
        handlers.work(decode_work(payload))
    elif channel == STEPS:
        run_id, _, rest = payload.partition("/")
        attempt, _, task_key = rest.partition("/")
        if attempt.isdigit():
            handlers.step(run_id, task_key, int(attempt))
