"""Group commit: the run transitions of every runner ready at once, in one transaction.

A process drives many runs, each by its own runner, and each runner's commit is one
``commit_run`` statement. Committed one by one they cost a pool checkout, a round trip and a
WAL flush each. Here the first runner to commit while no group is being written writes its
transition at once, as one statement in its own transaction (no waiting for company: a lone
commit costs what it did before); the runners that commit while it is in flight queue up, and
the first of them, when it ends, writes the whole queue as the next group: one transaction, its
statements sent together in a pipeline (one round trip), one WAL flush. Under load, groups form
by themselves.

Each row keeps its own conditions — its run's revision, its events' sequence, its writer's
coordinator and shard epochs (SPEC §14, §16) are in its own statement's parameters — so a
refused row writes nothing and is reported to its runner alone, as ``None``: the runner finds
out why (a conflict stays one run's problem). A statement that fails outright rolls the whole
group back while its connection stays usable: then nothing of the group was written and each
runner commits alone (the failure reaches the runner whose row caused it, only). When the
connection itself is lost, a group's outcome is unknown and every runner in it gets the error,
as a lone commit's runner would.

The transitions of a group are written in run id order, so that two groups never wait on each
other's rows in opposite orders. A group is written under a cancel shield: its leader being
cancelled (its run drained or stopped) must not abandon the others' commits half sent; the
statement timeout bounds the wait.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import psycopg

from workload_store_postgres._db import Conn, Database, Row, one
from workload_store_postgres._queries import query, statement_name

__all__ = ["ALONE", "GroupCommit"]


class _Alone:
    """The group this transition was in rolled back: commit it in a transaction of its own."""

    def __repr__(self) -> str:
        return "ALONE"


ALONE: Final = _Alone()

MAX_GROUP = 64
"""Transitions written in one transaction at most; the rest wait for the next group."""


@dataclass(eq=False)
class _Queued:
    run_id: uuid.UUID
    params: Mapping[str, Any]
    done: anyio.Event = field(default_factory=anyio.Event)
    lead: bool = False
    """Set with ``done`` when this runner is to write the next group (its own among them)."""
    context: contextvars.Context | None = None
    """The runner's context, while statements are traced: its statement is its run's span."""
    outcome: Row | _Alone | None = None
    error: BaseException | None = None


class GroupCommit:
    """Writes ``commit_run`` statements in groups; one per store (per process)."""

    def __init__(self, db: Database, *, max_group: int = MAX_GROUP) -> None:
        self._db = db
        self._max_group = max_group
        self._queue: list[_Queued] = []
        self._writing = False
        self.groups = 0
        """Transactions written (for tests and benchmarks: groups ≤ transitions)."""
        self.transitions = 0
        """Transitions sent in those transactions."""

    async def commit(self, run_id: uuid.UUID, params: Mapping[str, Any]) -> Row | _Alone | None:
        """Write one ``commit_run``: its row (written), ``None`` (refused) or :data:`ALONE`.

        Raises:
            Exception: the connection was lost while the group was written (outcome unknown),
                or the store is unavailable.
        """
        context = contextvars.copy_context() if self._db.telemetry.tracing else None
        queued = _Queued(run_id, params, context=context)
        self._queue.append(queued)
        if self._writing:
            try:
                await queued.done.wait()
            except BaseException:
                # Stopped while waiting: not written, and not leaving the queue without a leader.
                if queued in self._queue:
                    self._queue.remove(queued)
                if queued.lead:
                    self._hand_on()
                raise
            if not queued.lead:
                return self._outcome(queued)
        await self._lead()
        return self._outcome(queued)

    async def _lead(self) -> None:
        """Write the queue's head as one group, then hand the queue on to its next runner."""
        self._writing = True
        group = self._queue[: self._max_group]
        del self._queue[: self._max_group]
        try:
            with anyio.CancelScope(shield=True):
                await self._write(group)
        finally:
            for queued in group:
                queued.lead = False
                queued.done.set()
            self._hand_on()

    def _hand_on(self) -> None:
        if self._queue:
            head = self._queue[0]
            head.lead = True
            head.done.set()
        else:
            self._writing = False

    async def _write(self, group: list[_Queued]) -> None:
        if len(group) == 1:  # alone: one statement, its own transaction (one round trip)
            (queued,) = group
            try:
                async with self._db.single() as conn:
                    queued.outcome = await one(conn, "commit_run", queued.params)
            except Exception as error:
                queued.error = error
                return
            self.groups += 1
            self.transitions += 1
            return
        group.sort(key=lambda q: q.run_id)  # one lock order for every group
        used: list[Conn] = []
        try:
            async with self._db.tx() as conn:
                used.append(conn)
                async with conn.pipeline():
                    sent = [await self._send(conn, queued) for queued in group]
                for queued, cursor in zip(group, sent, strict=True):
                    queued.outcome = await cursor.fetchone()
        except Exception as error:
            rolled_back = bool(used) and not used[0].broken and not used[0].closed
            for queued in group:
                if rolled_back:
                    queued.outcome = ALONE  # nothing was written: each alone finds its own fault
                else:
                    queued.error = error
            return
        self.groups += 1
        self.transitions += len(group)

    async def _send(self, conn: Conn, queued: _Queued) -> psycopg.AsyncCursor[Row]:
        """Queue ``queued``'s statement in the pipeline; traced, its span is its runner's.

        The span is made in the runner's context (a child of its run's span, or nothing when
        the run is not sampled) and the statement is sent through the connection's plain
        cursor, in this task: a task per statement, in its runner's context, cost the whole
        group a turn of the event loop a statement, and a busy loop made every group slow.
        """
        sql = query("commit_run")
        if queued.context is None:
            return await conn.execute(sql, queued.params)
        span = queued.context.run(self._db.telemetry.statement, statement_name(sql), sql)
        with span:
            return await psycopg.AsyncCursor(conn).execute(sql, queued.params)

    @staticmethod
    def _outcome(queued: _Queued) -> Row | _Alone | None:
        if queued.error is not None:
            raise queued.error
        return queued.outcome
