"""The ``Store`` port over PostgreSQL (psycopg 3, async pool).

Every write is one transaction. A run transition is conditioned on the run's revision
(``UPDATE … WHERE run_id = … AND revision = …``; zero rows → ``RevisionConflict``), and writes
the run, task, attempt and event changes together. Idempotency records are written in the same
transaction as the resource; concurrent duplicates race on the record's primary key, the loser
rolls back entirely and replays the winner's outcome.

Driver errors are translated here: connection failures, timeouts and server shutdowns become
``StoreUnavailable`` (a system fault); constraint violations become domain errors.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.errors import ForeignKeyViolation, IntegrityError, UndefinedTable, UniqueViolation
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from workload_domain.cursors import (
    CursorCodec,
    Page,
    Position,
    Scope,
    from_micros,
    page_of,
    to_micros,
)
from workload_domain.errors import (
    IdempotencyKeyReused,
    InvalidCursor,
    RevisionConflict,
    RunNotFound,
    StoreIntegrityError,
    StoreUnavailable,
    TaskNotFound,
    VersionNotFound,
    WorkflowExists,
    WorkflowNotFound,
)
from workload_domain.events import EventType
from workload_domain.idempotency import IdempotencyClaim, IdempotentWrite, Outcome, Replay
from workload_domain.model import (
    AttemptRecord,
    EventRecord,
    NewRun,
    RunCommit,
    RunRecord,
    RunSnapshot,
    TaskError,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.ports import Clock
from workload_domain.statuses import AttemptStatus, RunStatus, TaskStatus
from workload_store_postgres._queries import query
from workload_store_postgres.migrations import SchemaBehind

__all__ = ["DEFAULT_STATEMENT_TIMEOUT_MS", "PostgresStore"]

DEFAULT_STATEMENT_TIMEOUT_MS = 5000
_CURSOR_KEY_ROW = "cursor_hmac"
_NIL_UUID = uuid.UUID(int=0)
_MIN_TIME = from_micros(-62135596800 * 1_000_000)  # 0001-01-01T00:00:00Z
_T = TypeVar("_T")
Row = dict[str, Any]
Conn = psycopg.AsyncConnection[Row]


class _UtcClock:
    """The wall clock, when no Clock is injected (records' created_at, for the purge)."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, deadline: datetime) -> None:  # pragma: no cover - unused
        raise NotImplementedError


class PostgresStore:
    """The whole ``Store`` port backed by a PostgreSQL database."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS,
        pool_timeout_seconds: float = 5.0,
        clock: Clock | None = None,
    ) -> None:
        self._pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            timeout=pool_timeout_seconds,
            name="workload-store",
            connection_class=psycopg.AsyncConnection[Row],
            kwargs={
                "row_factory": dict_row,
                "application_name": "workload-store",
                "options": f"-c statement_timeout={int(statement_timeout_ms)} -c TimeZone=UTC",
            },
        )
        self._open_timeout = pool_timeout_seconds
        self._clock: Clock = clock or _UtcClock()
        self._codec: CursorCodec | None = None

    async def open(self) -> None:
        """Open the pool and load (or create) the cursor key kept in the database."""
        try:
            await self._pool.open(wait=True, timeout=self._open_timeout)
        except (PoolTimeout, psycopg.Error) as exc:
            raise StoreUnavailable(f"cannot connect to PostgreSQL: {exc}") from exc
        async with self._tx() as conn:
            params = {"name": _CURSOR_KEY_ROW, "secret": secrets.token_bytes(32)}
            await conn.execute(query("ensure_secret"), params)
            row = await _one(conn, "get_secret", {"name": _CURSOR_KEY_ROW})
            assert row is not None  # inserted or kept above, in this transaction
            self._codec = CursorCodec(bytes(row["secret"]))

    async def close(self) -> None:
        """Close every connection of the pool."""
        await self._pool.close()

    async def __aenter__(self) -> PostgresStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[Conn]:
        """One transaction: committed on success, rolled back on any exception."""
        try:
            async with self._pool.connection() as conn:
                yield conn
        except UndefinedTable as exc:
            raise SchemaBehind(
                "the database has no Workload schema: run `workload migrate up`"
            ) from exc
        except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as exc:
            raise StoreUnavailable(f"PostgreSQL is unavailable: {exc}") from exc
        except psycopg.DataError as exc:  # a value the domain should have refused: a bug
            raise StoreIntegrityError(f"PostgreSQL refused a value: {exc}") from exc

    # -- workflows ---------------------------------------------------------------------------

    async def create_workflow(
        self,
        workflow: WorkflowRecord,
        version: VersionRecord,
        idempotency: IdempotentWrite[VersionRecord] | None = None,
    ) -> VersionRecord:
        """Create a workflow and its version 1."""
        try:
            async with self._tx() as conn:
                await _check_claim(conn, idempotency)
                await conn.execute(query("insert_workflow"), _workflow_params(workflow))
                await conn.execute(query("insert_version"), _version_params(version))
                await _save_claim(conn, idempotency, version, self._clock.now())
        except UniqueViolation as exc:
            await self._replay_after_race(idempotency)
            if exc.diag.constraint_name == "workflows_pkey":
                raise WorkflowExists(workflow.workflow_id) from None
            raise StoreIntegrityError(str(exc)) from exc
        except IntegrityError as exc:
            raise StoreIntegrityError(str(exc)) from exc
        return version

    async def create_version(
        self,
        *,
        workflow_id: str,
        definition_hash: str,
        definition: dict[str, Any],
        task_count: int,
        created_at: datetime,
        idempotency: IdempotentWrite[VersionRecord] | None = None,
    ) -> VersionRecord:
        """Create version ``latest + 1``; the workflow row lock serializes concurrent ones."""
        try:
            async with self._tx() as conn:
                await _check_claim(conn, idempotency)
                row = await _one(
                    conn,
                    "bump_workflow",
                    {
                        "workflow_id": workflow_id,
                        "created_at": created_at,
                        "description": str(definition.get("description", "")),
                    },
                )
                if row is None:
                    raise WorkflowNotFound(workflow_id)
                record = VersionRecord(
                    workflow_id,
                    row["latest_version"],
                    definition_hash,
                    task_count,
                    created_at,
                    definition,
                )
                await conn.execute(query("insert_version"), _version_params(record))
                await _save_claim(conn, idempotency, record, self._clock.now())
        except UniqueViolation as exc:
            await self._replay_after_race(idempotency)
            raise StoreIntegrityError(str(exc)) from exc
        except IntegrityError as exc:
            raise StoreIntegrityError(str(exc)) from exc
        return record

    async def get_workflow(self, workflow_id: str) -> WorkflowRecord:
        """Return a workflow."""
        async with self._tx() as conn:
            row = await _one(conn, "get_workflow", {"workflow_id": workflow_id})
        if row is None:
            raise WorkflowNotFound(workflow_id)
        return WorkflowRecord(**row)

    async def get_version(self, workflow_id: str, version: int) -> VersionRecord:
        """Return one version with its definition."""
        async with self._tx() as conn:
            row = await _one(conn, "get_version", {"workflow_id": workflow_id, "version": version})
            if row is None:
                if await _one(conn, "get_workflow", {"workflow_id": workflow_id}) is None:
                    raise WorkflowNotFound(workflow_id)
                raise VersionNotFound(workflow_id, version)
        return VersionRecord(**row)

    async def page_workflows(self, cursor: str | None, limit: int) -> Page[WorkflowRecord]:
        """Workflows in (created_at, workflow_id) order."""
        after = self._position(cursor, "workflows", {}) or (to_micros(_MIN_TIME), "")
        async with self._tx() as conn:
            rows = await _all(
                conn,
                "page_workflows",
                {
                    "after_at": from_micros(int(after[0])),
                    "after_id": str(after[1]),
                    "limit": limit + 1,
                },
            )
        records = [WorkflowRecord(**r) for r in rows]
        return self._page(records, limit, "workflows", {}, _workflow_position)

    async def page_versions(
        self, workflow_id: str, cursor: str | None, limit: int
    ) -> Page[VersionRecord]:
        """A workflow's versions by number."""
        scope = {"workflow_id": workflow_id}
        after = self._position(cursor, "versions", scope)
        async with self._tx() as conn:
            rows = await _all(
                conn,
                "page_versions",
                {
                    "workflow_id": workflow_id,
                    "after": int(after[0]) if after else 0,
                    "limit": limit + 1,
                },
            )
            if not rows and await _one(conn, "get_workflow", {"workflow_id": workflow_id}) is None:
                raise WorkflowNotFound(workflow_id)
        records = [VersionRecord(**r) for r in rows]
        return self._page(records, limit, "versions", scope, lambda v: (v.version,))

    # -- runs --------------------------------------------------------------------------------

    async def create_run(
        self, new_run: NewRun, idempotency: IdempotentWrite[RunRecord] | None = None
    ) -> RunRecord:
        """Write the run, its tasks, its first events and the idempotency record atomically."""
        run = new_run.run
        run_uuid = _maybe_uuid(run.run_id)
        if run_uuid is None:
            raise StoreIntegrityError(f"run ids are canonical UUIDs, not {run.run_id!r}")
        if run.revision != 1:
            raise StoreIntegrityError("a new run starts at revision 1")
        _check_sequences(new_run.events, 0)
        try:
            async with self._tx() as conn:
                await _check_claim(conn, idempotency)
                params = _run_params(run)
                params["last_sequence"] = len(new_run.events)
                await conn.execute(query("insert_run"), params)
                async with conn.cursor() as cur:
                    await cur.executemany(
                        query("insert_task"), [_task_params(run_uuid, t) for t in new_run.tasks]
                    )
                    await cur.executemany(
                        query("insert_event"), [_event_params(run_uuid, e) for e in new_run.events]
                    )
                await _save_claim(conn, idempotency, run, self._clock.now())
        except ForeignKeyViolation:
            raise VersionNotFound(run.workflow_id, run.version) from None
        except UniqueViolation as exc:
            await self._replay_after_race(idempotency)
            raise StoreIntegrityError(str(exc)) from exc
        except IntegrityError as exc:
            raise StoreIntegrityError(str(exc)) from exc
        return run

    async def load_run(self, run_id: str) -> RunSnapshot:
        """Read the run, its tasks and its running attempts in one consistent snapshot."""
        run_uuid = _run_uuid(run_id)
        async with self._tx() as conn:
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            row = await _one(conn, "get_run", {"run_id": run_uuid})
            if row is None:
                raise RunNotFound(run_id)
            tasks = await _all(conn, "list_tasks", {"run_id": run_uuid, "after": -1, "limit": None})
            running = await _all(conn, "running_attempts", {"run_id": run_uuid})
        last_sequence = row.pop("last_sequence")
        return RunSnapshot(
            run=_run(row),
            tasks=tuple(_task(t) for t in tasks),
            running_attempts=tuple(_attempt(a) for a in running),
            last_sequence=last_sequence,
        )

    async def commit(
        self, commit: RunCommit, idempotency: IdempotentWrite[RunRecord] | None = None
    ) -> None:
        """Apply a run transition if, and only if, the run is still at the expected revision."""
        run = commit.run
        run_uuid = _run_uuid(run.run_id)
        if run.revision != commit.expected_revision + 1:
            raise StoreIntegrityError("a commit raises the revision by exactly one")
        try:
            async with self._tx() as conn:
                await _check_claim(conn, idempotency)
                params = _run_params(run)
                params["expected_revision"] = commit.expected_revision
                params["events"] = len(commit.events)
                row = await _one(conn, "update_run", params)
                if row is None:
                    if await _one(conn, "run_exists", {"run_id": run_uuid}) is None:
                        raise RunNotFound(run.run_id)
                    raise RevisionConflict(run.run_id, commit.expected_revision)
                _check_sequences(commit.events, row["last_sequence"] - len(commit.events))
                async with conn.cursor() as cur:
                    if commit.tasks:
                        await cur.executemany(
                            query("update_task"), [_task_params(run_uuid, t) for t in commit.tasks]
                        )
                        if cur.rowcount != len(commit.tasks):
                            raise StoreIntegrityError("the commit updates a task the run lacks")
                    if commit.attempts:
                        await cur.executemany(
                            query("upsert_attempt"),
                            [_attempt_params(run_uuid, a) for a in commit.attempts],
                        )
                    if commit.events:
                        await cur.executemany(
                            query("insert_event"),
                            [_event_params(run_uuid, e) for e in commit.events],
                        )
                await _save_claim(conn, idempotency, run, self._clock.now())
        except UniqueViolation as exc:
            await self._replay_after_race(idempotency)
            raise StoreIntegrityError(str(exc)) from exc
        except IntegrityError as exc:
            raise StoreIntegrityError(str(exc)) from exc

    async def list_unfinished_runs(self, after: str | None, limit: int) -> Sequence[str]:
        """Ids of non-terminal runs in id order (the recovery scan)."""
        after_uuid = _NIL_UUID if after is None else _run_uuid(after)
        async with self._tx() as conn:
            rows = await _all(conn, "unfinished_runs", {"after": after_uuid, "limit": limit})
        return [str(r["run_id"]) for r in rows]

    async def runs_with_running_attempts(self) -> Sequence[str]:
        """Ids of runs with an attempt still running, in id order."""
        async with self._tx() as conn:
            rows = await _all(conn, "runs_with_running_attempts", {})
        return [str(r["run_id"]) for r in rows]

    async def get_run(self, run_id: str) -> RunRecord:
        """Return the run row."""
        async with self._tx() as conn:
            row = await _one(conn, "get_run", {"run_id": _run_uuid(run_id)})
        if row is None:
            raise RunNotFound(run_id)
        row.pop("last_sequence")
        return _run(row)

    async def get_run_with_counts(self, run_id: str) -> tuple[RunRecord, Mapping[str, int]]:
        """The run row and its task counts by status, in one statement."""
        async with self._tx() as conn:
            row = await _one(conn, "get_run_with_counts", {"run_id": _run_uuid(run_id)})
        if row is None:
            raise RunNotFound(run_id)
        counts = {str(k): int(v) for k, v in row.pop("task_counts").items()}
        return _run(row), counts

    async def get_task(self, run_id: str, task_key: str) -> TaskRecord:
        """Return one task of a run."""
        run_uuid = _run_uuid(run_id)
        async with self._tx() as conn:
            row = await _one(conn, "get_task", {"run_id": run_uuid, "task_key": task_key})
            if row is None:
                if await _one(conn, "run_exists", {"run_id": run_uuid}) is None:
                    raise RunNotFound(run_id)
                raise TaskNotFound(run_id, task_key)
        return _task(row)

    async def task_counts(self, run_ids: Sequence[str]) -> Mapping[str, Mapping[str, int]]:
        """Per run, the number of tasks in each status."""
        uuids = [u for u in (_maybe_uuid(r) for r in run_ids) if u is not None]
        if not uuids:
            return {}
        async with self._tx() as conn:
            rows = await _all(conn, "task_counts", {"run_ids": uuids})
        counts: dict[str, dict[str, int]] = {}
        for row in rows:
            counts.setdefault(str(row["run_id"]), {})[row["status"]] = row["count"]
        return counts

    async def list_tasks(self, run_id: str) -> Sequence[TaskRecord]:
        """Return the run's tasks in definition order."""
        return (await self._tasks(run_id, None, None)).items

    async def list_attempts(self, run_id: str, task_key: str) -> Sequence[AttemptRecord]:
        """Return a task's attempts by number."""
        await self.get_task(run_id, task_key)
        async with self._tx() as conn:
            rows = await _all(
                conn,
                "list_attempts",
                {"run_id": _run_uuid(run_id), "task_key": task_key, "after": 0, "limit": None},
            )
        return [_attempt(r) for r in rows]

    async def list_events(
        self, run_id: str, after_sequence: int = 0, limit: int | None = None
    ) -> Sequence[EventRecord]:
        """Return the run's events after a sequence number, in order."""
        run_uuid = _run_uuid(run_id)
        async with self._tx() as conn:
            rows = await _all(
                conn, "list_events", {"run_id": run_uuid, "after": after_sequence, "limit": limit}
            )
            if not rows and await _one(conn, "run_exists", {"run_id": run_uuid}) is None:
                raise RunNotFound(run_id)
        return [_event(r) for r in rows]

    async def page_runs(
        self,
        workflow_id: str | None,
        status: RunStatus | None,
        cursor: str | None,
        limit: int,
    ) -> Page[RunRecord]:
        """Runs in (created_at, run_id) order, optionally filtered by workflow and status."""
        scope = {"workflow_id": workflow_id, "status": status.value if status else None}
        after = self._position(cursor, "runs", scope)
        params: dict[str, Any] = {
            "after_at": from_micros(int(after[0])) if after else _MIN_TIME,
            "after_id": _run_uuid(str(after[1])) if after else _NIL_UUID,
            "workflow_id": workflow_id,
            "status": status.value if status else None,
            "limit": limit + 1,
        }
        # Only the filters in use appear in the statement, so each variant gets its own index
        # (runs_keyset, runs_by_workflow, runs_by_status); every value is a bound parameter.
        conditions = [sql.SQL("(created_at, run_id) > (%(after_at)s, %(after_id)s)")]
        if workflow_id is not None:
            conditions.append(sql.SQL("workflow_id = %(workflow_id)s"))
        if status is not None:
            conditions.append(sql.SQL("status = %(status)s"))
        statement = sql.SQL(
            "SELECT run_id, workflow_id, version, status, revision, input, cancel_requested,"
            " created_at, updated_at, started_at, finished_at FROM workflow_runs WHERE {}"
            " ORDER BY created_at, run_id LIMIT %(limit)s"
        ).format(sql.SQL(" AND ").join(conditions))
        async with self._tx() as conn, conn.cursor() as cur:
            await cur.execute(statement, params)
            rows = await cur.fetchall()
        return self._page([_run(r) for r in rows], limit, "runs", scope, _run_position)

    async def page_tasks(self, run_id: str, cursor: str | None, limit: int) -> Page[TaskRecord]:
        """A run's tasks in definition order."""
        return await self._tasks(run_id, cursor, limit)

    async def _tasks(self, run_id: str, cursor: str | None, limit: int | None) -> Page[TaskRecord]:
        scope = {"run_id": run_id}
        after = self._position(cursor, "tasks", scope)
        run_uuid = _run_uuid(run_id)
        async with self._tx() as conn:
            rows = await _all(
                conn,
                "list_tasks",
                {
                    "run_id": run_uuid,
                    "after": int(after[0]) if after else -1,
                    "limit": None if limit is None else limit + 1,
                },
            )
            if not rows and await _one(conn, "run_exists", {"run_id": run_uuid}) is None:
                raise RunNotFound(run_id)
        tasks = [_task(r) for r in rows]
        if limit is None:
            return Page(tuple(tasks), None)
        return self._page(tasks, limit, "tasks", scope, lambda t: (t.position,))

    async def page_attempts(
        self, run_id: str, task_key: str, cursor: str | None, limit: int
    ) -> Page[AttemptRecord]:
        """A task's attempts by number."""
        scope = {"run_id": run_id, "task_key": task_key}
        after = self._position(cursor, "attempts", scope)
        await self.get_task(run_id, task_key)
        async with self._tx() as conn:
            rows = await _all(
                conn,
                "list_attempts",
                {
                    "run_id": _run_uuid(run_id),
                    "task_key": task_key,
                    "after": int(after[0]) if after else 0,
                    "limit": limit + 1,
                },
            )
        attempts = [_attempt(r) for r in rows]
        return self._page(attempts, limit, "attempts", scope, lambda a: (a.attempt,))

    async def page_events(self, run_id: str, cursor: str | None, limit: int) -> Page[EventRecord]:
        """A run's events by sequence."""
        scope = {"run_id": run_id}
        after = self._position(cursor, "events", scope)
        run_uuid = _run_uuid(run_id)
        async with self._tx() as conn:
            rows = await _all(
                conn,
                "list_events",
                {"run_id": run_uuid, "after": int(after[0]) if after else 0, "limit": limit + 1},
            )
            if not rows and await _one(conn, "run_exists", {"run_id": run_uuid}) is None:
                raise RunNotFound(run_id)
        events = [_event(r) for r in rows]
        return self._page(events, limit, "events", scope, lambda e: (e.sequence,))

    # -- idempotency -------------------------------------------------------------------------

    async def find_outcome(self, claim: IdempotencyClaim) -> Outcome | None:
        """The outcome stored for this claim's key, if any."""
        async with self._tx() as conn:
            return await _stored_outcome(conn, claim)

    async def save_outcome(self, claim: IdempotencyClaim, outcome: Outcome) -> None:
        """Record the outcome of a request that wrote nothing else."""
        write: IdempotentWrite[None] = IdempotentWrite(claim, lambda _: outcome)
        try:
            async with self._tx() as conn:
                await _check_claim(conn, write)
                await _save_claim(conn, write, None, self._clock.now())
        except UniqueViolation as exc:
            await self._replay_after_race(write)
            raise StoreIntegrityError("the idempotency record vanished during a race") from exc

    async def purge_outcomes(self, older_than: datetime) -> int:
        """Delete records created before ``older_than``."""
        async with self._tx() as conn:
            cur = await conn.execute(query("purge_outcomes"), {"older_than": older_than})
            return cur.rowcount

    async def _replay_after_race(self, write: IdempotentWrite[_T] | None) -> None:
        """After a unique violation: if a duplicate request won the race, replay its outcome."""
        if write is None:
            return
        outcome = await self.find_outcome(write.claim)
        if outcome is not None:
            raise Replay(outcome)

    # -- pagination --------------------------------------------------------------------------

    def _position(self, cursor: str | None, kind: str, scope: Scope) -> Position | None:
        if cursor is None:
            return None
        position = self._cursor_codec.decode(cursor, kind, scope)
        if not position:
            raise InvalidCursor("the cursor is malformed")
        return position

    def _page(
        self,
        rows: Sequence[_T],
        limit: int,
        kind: str,
        scope: Scope,
        position: Any,
    ) -> Page[_T]:
        return page_of(
            rows, limit, codec=self._cursor_codec, kind=kind, scope=scope, position=position
        )

    @property
    def _cursor_codec(self) -> CursorCodec:
        if self._codec is None:
            raise RuntimeError("the store is not open")
        return self._codec


# -- helpers ---------------------------------------------------------------------------------


async def _one(conn: Conn, name: str, params: Mapping[str, Any]) -> Row | None:
    cur = await conn.execute(query(name), params)
    return await cur.fetchone()


async def _all(conn: Conn, name: str, params: Mapping[str, Any]) -> list[Row]:
    # A None "limit" binds LIMIT NULL, which PostgreSQL reads as no limit: full reads share
    # the paged statements.
    cur = await conn.execute(query(name), params)
    return await cur.fetchall()


async def _stored_outcome(conn: Conn, claim: IdempotencyClaim) -> Outcome | None:
    row = await _one(conn, "find_outcome", {"principal": claim.principal, "key": claim.key})
    if row is None:
        return None
    if (row["operation"], row["request_hash"]) != (claim.operation, claim.request_hash):
        raise IdempotencyKeyReused
    return Outcome(row["status_code"], row["response"])


async def _check_claim(conn: Conn, write: IdempotentWrite[_T] | None) -> None:
    if write is not None:
        outcome = await _stored_outcome(conn, write.claim)
        if outcome is not None:
            raise Replay(outcome)


async def _save_claim(
    conn: Conn, write: IdempotentWrite[_T] | None, resource: _T, created_at: datetime
) -> None:
    if write is None:
        return
    claim = write.claim
    outcome = write.render(resource)
    await conn.execute(
        query("insert_outcome"),
        {
            "principal": claim.principal,
            "key": claim.key,
            "operation": claim.operation,
            "request_hash": claim.request_hash,
            "status_code": outcome.status_code,
            "response": Jsonb(outcome.body),
            "created_at": created_at,
        },
    )


def _maybe_uuid(run_id: str) -> uuid.UUID | None:
    """The UUID a run id spells, only in its canonical form (one id, one spelling)."""
    try:
        parsed = uuid.UUID(run_id)
    except (ValueError, TypeError, AttributeError):
        return None
    return parsed if str(parsed) == run_id else None


def _check_sequences(events: Sequence[EventRecord], last: int) -> None:
    if [e.sequence for e in events] != list(range(last + 1, last + 1 + len(events))):
        raise StoreIntegrityError("event sequences must continue the run's history contiguously")


def _run_uuid(run_id: str) -> uuid.UUID:
    # Any string a client sends as a run id is either a UUID or names no run.
    parsed = _maybe_uuid(run_id)
    if parsed is None:
        raise RunNotFound(run_id)
    return parsed


def _json(value: Mapping[str, Any] | None) -> Jsonb | None:
    return None if value is None else Jsonb(value)


def _workflow_params(w: WorkflowRecord) -> dict[str, Any]:
    return {
        "workflow_id": w.workflow_id,
        "latest_version": w.latest_version,
        "description": w.description,
        "created_at": w.created_at,
        "updated_at": w.updated_at,
    }


def _version_params(v: VersionRecord) -> dict[str, Any]:
    return {
        "workflow_id": v.workflow_id,
        "version": v.version,
        "definition_hash": v.definition_hash,
        "task_count": v.task_count,
        "definition": Jsonb(v.definition),
        "created_at": v.created_at,
    }


def _run_params(r: RunRecord) -> dict[str, Any]:
    return {
        "run_id": _run_uuid(r.run_id),
        "workflow_id": r.workflow_id,
        "version": r.version,
        "status": r.status.value,
        "revision": r.revision,
        "input": Jsonb(r.input),
        "cancel_requested": r.cancel_requested,
        "created_at": r.created_at,
        "updated_at": r.updated_at,
        "started_at": r.started_at,
        "finished_at": r.finished_at,
    }


def _task_params(run_uuid: uuid.UUID, t: TaskRecord) -> dict[str, Any]:
    return {
        "run_id": run_uuid,
        "task_key": t.task_key,
        "position": t.position,
        "status": t.status.value,
        "depends_on": list(t.depends_on),
        "attempt_count": t.attempt_count,
        "max_attempts": t.max_attempts,
        "next_attempt_at": t.next_attempt_at,
        "started_at": t.started_at,
        "finished_at": t.finished_at,
        "output": _json(t.output),
        "error": _json(t.error.to_json() if t.error else None),
    }


def _attempt_params(run_uuid: uuid.UUID, a: AttemptRecord) -> dict[str, Any]:
    return {
        "run_id": run_uuid,
        "task_key": a.task_key,
        "attempt": a.attempt,
        "status": a.status.value,
        "started_at": a.started_at,
        "finished_at": a.finished_at,
        "output": _json(a.output),
        "error": _json(a.error.to_json() if a.error else None),
    }


def _event_params(run_uuid: uuid.UUID, e: EventRecord) -> dict[str, Any]:
    return {
        "run_id": run_uuid,
        "sequence": e.sequence,
        "type": e.type.value,
        "occurred_at": e.occurred_at,
        "task_key": e.task_key,
        "attempt": e.attempt,
        "data": Jsonb(e.data),
    }


def _error(value: Any) -> TaskError | None:
    return None if value is None else TaskError.from_json(value)


def _run(row: Row) -> RunRecord:
    return RunRecord(
        run_id=str(row["run_id"]),
        workflow_id=row["workflow_id"],
        version=row["version"],
        status=RunStatus(row["status"]),
        revision=row["revision"],
        input=row["input"],
        cancel_requested=row["cancel_requested"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
    )


def _task(row: Row) -> TaskRecord:
    return TaskRecord(
        task_key=row["task_key"],
        position=row["position"],
        status=TaskStatus(row["status"]),
        depends_on=tuple(row["depends_on"]),
        attempt_count=row["attempt_count"],
        max_attempts=row["max_attempts"],
        next_attempt_at=row["next_attempt_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        output=row["output"],
        error=_error(row["error"]),
    )


def _attempt(row: Row) -> AttemptRecord:
    return AttemptRecord(
        task_key=row["task_key"],
        attempt=row["attempt"],
        status=AttemptStatus(row["status"]),
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        output=row["output"],
        error=_error(row["error"]),
    )


def _event(row: Row) -> EventRecord:
    return EventRecord(
        sequence=row["sequence"],
        type=EventType(row["type"]),
        occurred_at=row["occurred_at"],
        task_key=row["task_key"],
        attempt=row["attempt"],
        data=row["data"],
    )


def _workflow_position(w: WorkflowRecord) -> tuple[str | int, ...]:
    return (to_micros(w.created_at), w.workflow_id)


def _run_position(r: RunRecord) -> tuple[str | int, ...]:
    return (to_micros(r.created_at), r.run_id)
