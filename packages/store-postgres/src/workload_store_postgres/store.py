"""The ``Store`` port over PostgreSQL (psycopg 3, async pool).

The store is split by concern into parts that share one :class:`~._db.Database`:
:class:`~._workflows.Workflows` (workflows and versions), :class:`~._runs.Runs` (create, load
and commit runs; the recovery scans), :class:`~._reads.Reads` (the API's reads and pages),
:class:`~._workers.Workers` (claims, leases, workers, queues), :class:`~._journal.Journal`
(agent steps), :class:`~._approvals.Approvals`, :class:`~._drafts.Drafts`,
:class:`~._idempotency.Idempotency` and :class:`~._sessions.Sessions` (console sessions).
Every write is one transaction; idempotency records are written in the same transaction as the
resource (:meth:`~._db.Database.write`), and driver errors are translated in one place
(:func:`~._db.translate_errors`). SQL lives in ``queries.sql``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime

import anyio

from workload_domain.cursors import CursorCodec
from workload_domain.errors import Fenced
from workload_domain.ports import Clock, Expiry
from workload_domain.telemetry import NO_TELEMETRY, Telemetry
from workload_store_postgres._approvals import Approvals
from workload_store_postgres._cluster import Cluster
from workload_store_postgres._db import Database, one
from workload_store_postgres._drafts import Drafts
from workload_store_postgres._group_commit import GroupCommit
from workload_store_postgres._idempotency import Idempotency
from workload_store_postgres._journal import Journal
from workload_store_postgres._queries import query
from workload_store_postgres._reads import Reads
from workload_store_postgres._retention import Retention
from workload_store_postgres._runs import Runs
from workload_store_postgres._sessions import Sessions
from workload_store_postgres._workers import Workers
from workload_store_postgres._workflows import Workflows
from workload_store_postgres.migrations import ShardsFixed, check_schema, stored_shards

__all__ = ["DEFAULT_STATEMENT_TIMEOUT_MS", "PostgresStore"]

DEFAULT_STATEMENT_TIMEOUT_MS = 5000
_CURSOR_KEY_ROW = "cursor_hmac"


class _UtcClock:
    """The wall clock, when no Clock is injected (records' created_at, for the purge)."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, deadline: datetime) -> None:  # pragma: no cover - unused
        raise NotImplementedError

    def cancel_at(self, deadline: datetime) -> AbstractContextManager[Expiry]:  # pragma: no cover
        raise NotImplementedError  # unused: the store never waits


class PostgresStore(
    Workflows,
    Runs,
    Reads,
    Workers,
    Journal,
    Approvals,
    Drafts,
    Idempotency,
    Cluster,
    Sessions,
    Retention,
):
    """The whole ``Store`` port backed by a PostgreSQL database.

    Args:
        url: any libpq URL (TCP or Unix socket).
        min_size: connections the pool keeps open.
        max_size: connections the pool may open.
        statement_timeout_ms: the server-side bound of every statement.
        pool_timeout_seconds: how long to wait for a connection (and for the pool to open).
        clock: the time written into idempotency records (default: the wall clock).
        verify_schema: on :meth:`open`, refuse a database whose migrations are not exactly
            this code's (``MigrationError``), as the service must (SPEC §5, §7).
        expected_shards: on :meth:`open`, refuse a database with another number of shards
            (``ShardsFixed``: ``WORKLOAD_SHARDS`` cannot change it, SPEC §16).
        telemetry: where statements are reported as spans (SPEC §12), while it traces.
    """

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS,
        pool_timeout_seconds: float = 5.0,
        clock: Clock | None = None,
        verify_schema: bool = False,
        telemetry: Telemetry = NO_TELEMETRY,
        expected_shards: int | None = None,
    ) -> None:
        self._db = Database(
            url,
            min_size=min_size,
            max_size=max_size,
            statement_timeout_ms=statement_timeout_ms,
            pool_timeout_seconds=pool_timeout_seconds,
            clock=clock or _UtcClock(),
            telemetry=telemetry,
        )
        self._commits = GroupCommit(self._db)
        self._codec = None
        self._verify_schema = verify_schema
        self._expected_shards = expected_shards

    async def open(self) -> None:
        """Check the schema (if asked), open the pool and load (or create) the cursor key.

        Opens all or nothing: when it fails or is cancelled (a stop during start-up), the pool
        is closed again, or its workers would go on connecting and keep the process alive.
        """
        if self._verify_schema:
            await check_schema(self._db.url)
        if self._expected_shards is not None:
            stored = await stored_shards(self._db.url)
            if stored is not None and stored != self._expected_shards:
                raise ShardsFixed(stored, self._expected_shards)
        try:
            await self._db.open()
            async with self._db.tx() as conn:
                params = {"name": _CURSOR_KEY_ROW, "secret": secrets.token_bytes(32)}
                await conn.execute(query("ensure_secret"), params)
                row = await one(conn, "get_secret", {"name": _CURSOR_KEY_ROW})
                assert row is not None  # inserted or kept above, in this transaction
                self._codec = CursorCodec(bytes(row["secret"]))
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._db.close()
            raise

    def fence(self, epoch: int | None, on_fenced: Callable[[Fenced], None] | None = None) -> None:
        """Fence this process's execution writes with ``epoch`` (SPEC §14).

        From now on a run commit or a journal write of this store passes only while ``epoch``
        is the current coordinator epoch; once a newer coordinator leads, it is refused
        (``Fenced``) and ``on_fenced`` is told, with that error (fail-stop). None: writes are
        not fenced.
        """
        self._db.epoch = epoch
        self._db.on_fenced = on_fenced

    def announce(self, enabled: bool) -> None:
        """Notify other replicas of what they must hear (``LISTEN/NOTIFY``, SPEC §14).

        New runs, runs changed by their API (cancels, reports, decisions), queued work and
        ended tool calls. Off for a single coordinator: a notification costs at commit.
        """
        self._db.announce = enabled

    def shard_notices(self, shards_total: int) -> None:
        """Announce each run on its shard's channel, heard by its owner only (a replica, §16).

        Off (the default), runs and tool calls are announced as in §14, to every process.
        """
        self._db.shards_total = shards_total

    @property
    def announcing(self) -> bool:
        """Whether this store notifies other replicas of what they must hear (see ``announce``)."""
        return self._db.announce

    def sent_here(self, backend_pid: int) -> bool:
        """Whether a notification from ``backend_pid`` was sent by this store's own pool.

        A replica announces what it writes so that the others hear it; it has already told
        itself (the engine, its streams and waiting claims), so hearing its own echo again
        would only make a runner read its run once more and put a parked run at the back of
        the queue. See :class:`~workload_store_postgres._db.Sessions` for when a pid counts.
        """
        return self._db.sessions.alive(backend_pid)

    def forget_senders(self) -> None:
        """Count no connection made so far as this store's (a listener had to reconnect)."""
        self._db.sessions.forget()

    def unreachable(self, reason: str) -> None:
        """PostgreSQL is known unreachable (a standby's lock try failed for want of it).

        From now on every operation is refused at once (``StoreDown``: 503 ``unavailable``
        with ``Retry-After``) instead of waiting for a connection, until the store's own probe
        reaches PostgreSQL again (ADR 0021).
        """
        self._db.pool.unreachable(reason)

    @property
    def down(self) -> str | None:
        """Why the store refuses operations at once (PostgreSQL unreachable), or None."""
        return self._db.pool.down

    async def close(self) -> None:
        """Close every connection of the pool."""
        await self._db.close()

    async def secret(self, name: str) -> bytes:
        """The secret kept under ``name`` in ``service_secrets``, made on first use."""
        async with self._db.tx() as conn:
            params = {"name": name, "secret": secrets.token_bytes(32)}
            await conn.execute(query("ensure_secret"), params)
            row = await one(conn, "get_secret", {"name": name})
        assert row is not None  # inserted or kept above, in this transaction
        return bytes(row["secret"])

    async def __aenter__(self) -> PostgresStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
