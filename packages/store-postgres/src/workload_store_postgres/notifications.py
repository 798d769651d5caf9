"""``LISTEN/NOTIFY`` between replicas (SPEC §14): what one process writes, the others hear.

With several ``workload serve --standby`` processes on one database, the store of each announces
(:meth:`~workload_store_postgres.store.PostgresStore.announce`) new runs and runs changed through
its API (``workload_runs``, payload the run id), queued remote work (``workload_work``) and tool
calls ended by a worker or the reaper (``workload_steps``, payload ``run/attempt/task``).
:class:`PostgresNotifications` listens on a dedicated connection (``LISTEN`` needs a session of
its own, never a pooled one) and hands each notification to its handler, except those its own
process sent (``senders``: the store, which knows its connections' backend pids), which it has
already told itself. Notifications are
wake-ups, not the source of truth: a listener that loses its connection reconnects, and the
leader's periodic sweep adopts any run a lost notification did not announce.
"""

from __future__ import annotations

import logging
from typing import Protocol

import anyio
import psycopg

from workload_domain.ports import NotifyHandlers as Handlers

__all__ = ["CHANNELS", "PostgresNotifications"]

_log = logging.getLogger("workload.notifications")

RUNS, WORK, STEPS = "workload_runs", "workload_work", "workload_steps"
CHANNELS = (RUNS, WORK, STEPS)
APPLICATION_NAME = "workload-listener"
_RETRY_SECONDS = (0.2, 0.5, 1.0, 2.0)


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
    ) -> None:
        self._url = url
        self._connect_timeout = connect_timeout
        self._senders = senders
        self.listening = anyio.Event()
        """Set once the first ``LISTEN`` is in place (tests wait for it)."""

    async def run(self, handlers: Handlers) -> None:
        """Listen, dispatch, and reconnect after a failure; never returns (cancel to stop)."""
        failures = 0
        while True:
            try:
                await self._listen(handlers)
            except (psycopg.Error, OSError) as exc:
                delay = _RETRY_SECONDS[min(failures, len(_RETRY_SECONDS) - 1)]
                failures += 1
                _log.warning("the notification listener reconnects in %ss: %s", delay, exc)
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
            for channel in CHANNELS:
                await conn.execute(f"LISTEN {channel}")  # a constant: never input
            self.listening.set()
            senders = self._senders
            async for notice in conn.notifies():
                if senders is None or not senders.sent_here(notice.pid):
                    _dispatch(handlers, notice.channel, notice.payload)


def _dispatch(handlers: Handlers, channel: str, payload: str) -> None:
    if channel == RUNS:
        handlers.run(payload)
    elif channel == WORK:
        handlers.work()
    elif channel == STEPS:
        run_id, _, rest = payload.partition("/")
        attempt, _, task_key = rest.partition("/")
        if attempt.isdigit():
            handlers.step(run_id, task_key, int(attempt))
