"""The connection pool, transactions, and the one place where driver errors are translated.

Every statement of the store runs inside :meth:`Database.tx` (a transaction: committed on
success, rolled back on any exception) or :meth:`Database.single` (one statement, which is its
own transaction: no ``BEGIN`` and ``COMMIT`` round trips), and psycopg's errors are translated
into domain errors exactly once (:func:`translate_errors`, as ``httpx._exceptions.map_exceptions``
does):

- connection failures, timeouts, server shutdowns → ``StoreUnavailable`` (a system fault);
  a closed pool (PostgreSQL known unreachable, or the store closing) → ``StoreDown``, which says
  when to try again;
- a missing table → ``SchemaBehind`` (the database was not migrated);
- a value PostgreSQL refuses, or a constraint without a domain meaning → ``StoreIntegrityError``
  (a bug: the domain should have refused it first);
- a constraint with a domain meaning → the error the write names for it
  (``workflows_pkey`` → ``WorkflowExists``, …);
- the idempotency record's primary key → :class:`IdempotencyRace`, which
  :meth:`Database.write` answers with the winner's outcome.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from typing import Any, NoReturn, TypeVar

import psycopg
from psycopg import pq
from psycopg.errors import IntegrityError, UndefinedTable
from psycopg.rows import dict_row
from psycopg.types.json import Json
from psycopg_pool import PoolClosed, PoolTimeout

from workload_domain.errors import Fenced, StoreIntegrityError, StoreUnavailable, WorkloadError
from workload_domain.fencing import current_fence
from workload_domain.idempotency import (
    IdempotencyClaim,
    IdempotencyRecord,
    Outcome,
    PendingRecord,
    Replayed,
    same_request,
)
from workload_domain.ports import Clock
from workload_domain.shards import shard_of
from workload_domain.telemetry import NO_TELEMETRY, Telemetry
from workload_store_postgres._json import use_on
from workload_store_postgres._pool import Conn, Row, StoreDown, StorePool, written_to
from workload_store_postgres._queries import query
from workload_store_postgres._tracing import traced_cursor
from workload_store_postgres.migrations import SchemaBehind

__all__ = [
    "RUNS_CHANNEL",
    "SHARD_CHANNEL_PREFIX",
    "STEPS_CHANNEL",
    "Conn",
    "Database",
    "IdempotencyRace",
    "Row",
    "require_epoch",
    "shard_channel",
    "translate_errors",
]

T = TypeVar("T")
Constraints = Mapping[str, Callable[[], WorkloadError]]
"""Constraint name → the domain error its violation means for this write."""

_IDEMPOTENCY_KEY = "idempotency_records_pkey"


class IdempotencyRace(Exception):
    """A concurrent request with the same idempotency key committed first."""


@contextmanager
def translate_errors(constraints: Constraints | None = None) -> Iterator[None]:
    """Translate psycopg errors raised inside the block into domain errors."""
    try:
        yield
    except UndefinedTable as exc:
        message = "the database has no Workload schema: run `workload migrate up`"
        raise SchemaBehind(message) from exc
    except PoolClosed as exc:
        raise StoreDown(f"PostgreSQL is unreachable, or the store closed: {exc}") from exc
    except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as exc:
        raise StoreUnavailable(f"PostgreSQL is unavailable: {exc}") from exc
    except psycopg.DataError as exc:  # a value the domain should have refused: a bug
        raise StoreIntegrityError(f"PostgreSQL refused a value: {exc}") from exc
    except IntegrityError as exc:
        name = exc.diag.constraint_name
        if name == _IDEMPOTENCY_KEY:
            raise IdempotencyRace from exc
        meaning = (constraints or {}).get(name or "")
        if meaning is not None:
            raise meaning() from exc
        raise StoreIntegrityError(str(exc)) from exc


class Sessions:
    """A pool's live connections by backend pid: a ``NOTIFY`` from one of them is our own.

    A pid names a backend only while it lives, and PostgreSQL gives a dead one's pid to a new
    backend (another replica's, perhaps) — so a pid counts as ours only while its connection
    looks alive: open, not broken, and with nothing to read on its socket (a backend that went
    away, terminated or with its server, has written its error and closed the socket). The map
    holds connections weakly: one the pool discarded drops out. A listener that had to
    reconnect (its server restarted, or another took over) calls :meth:`forget`, since every
    connection made before may be half-open to a server that is gone; connections made after
    are remembered as they are made. A connection not remembered only means hearing its echo,
    as a replica did before it knew its own.
    """

    def __init__(self) -> None:
        self._by_pid: weakref.WeakValueDictionary[int, Conn] = weakref.WeakValueDictionary()

    def add(self, conn: Conn) -> None:
        """Remember a new connection's backend."""
        self._by_pid[conn.info.backend_pid] = conn

    def alive(self, pid: int) -> bool:
        """Whether ``pid`` is the backend of one of these connections, alive as far as known."""
        conn = self._by_pid.get(pid)
        if conn is None or conn.closed or conn.broken:
            return False
        if conn.pgconn.transaction_status == pq.TransactionStatus.ACTIVE:
            # A command in progress (the commit that sent this notice, its reply not read yet):
            # what waits on the socket is its result, not the word of a backend gone away.
            return True
        # Written to: the backend went away (as for ``_still_alive``).
        return not written_to(conn)

    def forget(self) -> None:
        """Forget every connection remembered so far."""
        self._by_pid.clear()


class Database:
    """A psycopg async pool with UTC sessions, a statement timeout, and dict rows."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int,
        max_size: int,
        statement_timeout_ms: int,
        pool_timeout_seconds: float,
        clock: Clock,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self.url = url
        self.clock = clock
        self.telemetry = telemetry
        """Told of what a commit ended besides its own rows (the remote tool calls it closed)."""
        self.epoch: int | None = None
        """The coordinator epoch this process leads in: its execution writes are fenced by it
        (SPEC §14). None (a standby, a tool): writes are not fenced."""
        self.announce = False
        """Whether writes notify other replicas (``LISTEN/NOTIFY``, SPEC §14)."""
        self.shards_total: int | None = None
        """Set in a replica (SPEC §16): runs are announced on their shard's channel, heard by
        its owner only. None: on the channels of §14, heard by every process."""
        self.on_fenced: Callable[[Fenced], None] | None = None
        self.sessions = Sessions()
        """This pool's connections by backend pid: what they notify is this process's own."""
        # Statements are spans only while spans are recorded: psycopg's own cursor otherwise.
        traced = {"cursor_factory": traced_cursor(telemetry)} if telemetry.tracing else {}
        self.pool = StorePool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=pool_timeout_seconds,
            configure=self._configure,
            kwargs={
                # Outside tx() a statement is its own transaction: one round trip, not three.
                "autocommit": True,
                "row_factory": dict_row,
                "application_name": "workload-store",
                # A server that stops answering must not hold a pool worker (or a shutdown).
                "connect_timeout": max(1, math.ceil(pool_timeout_seconds)),
                "options": f"-c statement_timeout={int(statement_timeout_ms)} -c TimeZone=UTC"
                r" -c default_transaction_isolation=read\ committed",  # ADR 0048
                **traced,
            },
        )
        """Refuses at once while PostgreSQL is known unreachable (ADR 0021)."""

    def run_notice(self, run_id: str) -> dict[str, str]:
        """The ``channel`` and ``payload`` that announce a change of ``run_id``."""
        if self.shards_total is None:
            return {"channel": RUNS_CHANNEL, "payload": run_id}
        return {
            "channel": shard_channel(shard_of(run_id, self.shards_total)),
            "payload": f"r:{run_id}",
        }

    def step_notice(self, run_id: str, attempt: int, task_key: str) -> dict[str, str]:
        """The ``channel`` and ``payload`` that announce the end of a remote tool call."""
        payload = f"{run_id}/{attempt}/{task_key}"
        if self.shards_total is None:
            return {"channel": STEPS_CHANNEL, "payload": payload}
        return {
            "channel": shard_channel(shard_of(run_id, self.shards_total)),
            "payload": f"s:{payload}",
        }

    def fence_params(self) -> dict[str, int | None]:
        """The fences of an execution write made now.

        The coordinator's epoch (§14), and the shard epoch of the runner making it, if any
        (§16; see ``workload_domain.fencing``).
        """
        fence = current_fence()
        return {
            "epoch": self.epoch,
            "shard": None if fence is None else fence.shard,
            "shard_epoch": None if fence is None else fence.epoch,
        }

    def event_epoch(self) -> int | None:
        """The epoch an execution write's events record: its shard's, else the coordinator's."""
        fence = current_fence()
        return self.epoch if fence is None else fence.epoch

    async def _configure(self, conn: Conn) -> None:
        """A new pooled connection: remember its backend (see :class:`Sessions`).

        Its JSON parameters are encoded by orjson (:mod:`~workload_store_postgres._json`).
        """
        self.sessions.add(conn)
        use_on(conn)

    async def open(self) -> None:
        """Open the pool, waiting for its first connections (else ``StoreUnavailable``)."""
        await self.pool.open()

    async def close(self) -> None:
        """Close every connection of the pool (and stop probing PostgreSQL)."""
        await self.pool.close()

    @asynccontextmanager
    async def tx(self, constraints: Constraints | None = None) -> AsyncIterator[Conn]:
        """One transaction: committed on success, rolled back on any exception."""
        with translate_errors(constraints):
            async with self.pool.connection() as conn, conn.transaction():
                yield conn

    @asynccontextmanager
    async def single(self, constraints: Constraints | None = None) -> AsyncIterator[Conn]:
        """A connection whose every statement is a transaction of its own (autocommit).

        For one-statement writes, and for reads that need no snapshot across statements.
        """
        with translate_errors(constraints):
            async with self.pool.connection() as conn:
                yield conn

    async def write(
        self,
        work: Callable[[Conn], Awaitable[T]],
        record: IdempotencyRecord | PendingRecord[T] | None,
        constraints: Constraints | None = None,
    ) -> T | Replayed:
        """Run ``work`` in one transaction with the idempotency record, if any.

        A :class:`PendingRecord` is rendered from what ``work`` returned, in the transaction.
        The key is looked up first: the same request replays its outcome and writes nothing.
        When a concurrent duplicate commits first — it wins the race on the record's key, or on
        the resource's own key (two creations of one workflow) — this transaction rolls back
        entirely and returns the winner's outcome.
        """
        try:
            async with self.tx(constraints) as conn:
                if record is not None:
                    stored = await stored_outcome(conn, record.claim)
                    if stored is not None:
                        return Replayed(stored)
                result = await work(conn)
                if isinstance(record, PendingRecord):
                    await insert_outcome(conn, record.record(result), self.clock.now())
                elif record is not None:
                    await insert_outcome(conn, record, self.clock.now())
                return result
        except WorkloadError as error:
            return await self._lost_race(record, error)
        except IdempotencyRace as race:
            return await self._lost_race(record, race)

    async def write_one(
        self,
        name: str,
        params: Mapping[str, Any],
        record: IdempotencyRecord | None,
        constraints: Constraints | None = None,
    ) -> Replayed | None:
        """Run the one-statement write ``name``, which handles the idempotency record itself.

        The statement gets the record's parameters (:func:`outcome_params`, each named with
        an ``outcome_`` prefix; all null when there is no record); it looks the key up, writes
        nothing when it is there, and answers that record's row (``operation``,
        ``request_hash``, ``status_code``, ``response``), or no row when it wrote. Being one
        statement, it is one transaction and one round trip. Races end as in :meth:`write`.
        Returns the replay, or None: written.
        """
        try:
            async with self.single(constraints) as conn:
                outcome = outcome_params(record, self.clock.now())
                named = {f"outcome_{k}": v for k, v in outcome.items()}
                row = await one(conn, name, {**params, **named})
        except WorkloadError as error:
            return await self._lost_race(record, error)
        except IdempotencyRace as race:
            return await self._lost_race(record, race)
        if row is None:
            return None
        assert record is not None  # no record, no row
        return Replayed(_outcome_of(row, record.claim))

    async def _lost_race(
        self,
        record: IdempotencyRecord | PendingRecord[Any] | None,
        error: WorkloadError | IdempotencyRace,
    ) -> Replayed:
        """After a write failed: the winner's outcome if a concurrent duplicate won, else raise.

        A duplicate wins the race on the record's key (``IdempotencyRace``), or on the
        resource's own key (two creations of one workflow: an integrity error).
        """
        if isinstance(error, IdempotencyRace):
            assert record is not None  # only the record's key can race
            stored = await self._winner(record)
            if stored is None:
                raise StoreIntegrityError("the idempotency record vanished during a race") from None
            return Replayed(stored)
        if record is None or not isinstance(error.__cause__, IntegrityError):
            raise error
        stored = await self._winner(record)
        if stored is None:
            raise error
        return Replayed(stored)

    async def _winner(self, record: IdempotencyRecord | PendingRecord[Any]) -> Outcome | None:
        async with self.single() as conn:
            return await stored_outcome(conn, record.claim)


async def one(conn: Conn, name: str, params: Mapping[str, Any]) -> Row | None:
    """The first row of a named query."""
    cur = await conn.execute(query(name), params)
    return await cur.fetchone()


async def rows(conn: Conn, name: str, params: Mapping[str, Any]) -> list[Row]:
    """Every row of a named query.

    A None ``limit`` binds ``LIMIT NULL``, which PostgreSQL reads as no limit: full reads share
    the paged statements.
    """
    cur = await conn.execute(query(name), params)
    return await cur.fetchall()


async def stored_outcome(conn: Conn, claim: IdempotencyClaim) -> Outcome | None:
    """The outcome saved under the claim's key; ``IdempotencyKeyReused`` for another request."""
    row = await one(conn, "find_outcome", {"principal": claim.principal, "key": claim.key})
    return None if row is None else _outcome_of(row, claim)


def _outcome_of(row: Row, claim: IdempotencyClaim) -> Outcome:
    """The outcome of a stored record's row; ``IdempotencyKeyReused`` for another request."""
    stored = IdempotencyClaim(claim.principal, claim.key, row["operation"], row["request_hash"])
    same_request(stored, claim)
    return Outcome(row["status_code"], row["response"])


def outcome_params(record: IdempotencyRecord | None, created_at: datetime) -> dict[str, Any]:
    """The parameters of an idempotency record's row (all null without a record)."""
    if record is None:
        return dict.fromkeys(_OUTCOME_COLUMNS)
    claim = record.claim
    return {
        "principal": claim.principal,
        "key": claim.key,
        "operation": claim.operation,
        "request_hash": claim.request_hash,
        "status_code": record.outcome.status_code,
        "response": Json(record.outcome.body),  # the text as sent: replayed byte for byte
        "created_at": created_at,
    }


_OUTCOME_COLUMNS = (
    "principal",
    "key",
    "operation",
    "request_hash",
    "status_code",
    "response",
    "created_at",
)


async def insert_outcome(conn: Conn, record: IdempotencyRecord, created_at: datetime) -> None:
    """Save an idempotency record in the caller's transaction."""
    await conn.execute(query("insert_outcome"), outcome_params(record, created_at))


async def require_epoch(db: Database, conn: Conn) -> None:
    """After a fenced write wrote nothing: raise ``Fenced`` if an epoch is no longer current.

    Raises:
        Fenced: another coordinator leads now, or another replica took the writer's shard;
            ``db.on_fenced`` was told (fail-stop).
    """
    fence = current_fence()
    if fence is not None:
        row = await one(conn, "shard_fence", {"shard": fence.shard, "epoch": fence.epoch})
        if row is None or not row["current"]:
            _refused(db, Fenced(fence.epoch, fence.shard))
    if db.epoch is None:
        return
    row = await one(conn, "fence", {"epoch": db.epoch})
    if row is not None and row["current"]:
        return
    _refused(db, Fenced(db.epoch))


def _refused(db: Database, error: Fenced) -> NoReturn:
    """Tell the process its write was fenced (it fail-stops), and raise ``error``."""
    if db.on_fenced is not None:
        db.on_fenced(error)
    raise error


RUNS_CHANNEL = "workload_runs"
"""Runs created or changed through an API (§14): payload the run id."""
STEPS_CHANNEL = "workload_steps"
"""Remote tool calls ended (§14): payload ``run_id/attempt/task_key``."""
SHARD_CHANNEL_PREFIX = "workload_shard_"
"""A replica's runs (§16): one channel per shard, payload ``r:<run_id>`` or ``s:<step>``."""


def shard_channel(shard: int) -> str:
    """The channel of a shard's announcements (heard by its owner only)."""
    return f"{SHARD_CHANNEL_PREFIX}{shard}"
