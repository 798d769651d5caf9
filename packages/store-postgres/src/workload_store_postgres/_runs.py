"""Creating runs, loading them for execution, and committing their transitions.

A run transition is conditioned on the run's revision (``UPDATE … WHERE run_id = … AND
revision = …``; zero rows → ``RevisionConflict``) and writes the run, task, attempt and event
changes together.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence

from workload_domain.agent.journal import StepRecord
from workload_domain.agent.spec import AGENT_ACTION
from workload_domain.errors import (
    RevisionConflict,
    RunNotFound,
    StoreIntegrityError,
    VersionNotFound,
)
from workload_domain.idempotency import IdempotencyRecord, Replayed
from workload_domain.model import (
    AttemptRecord,
    NewRun,
    RunCommit,
    RunRecord,
    RunSnapshot,
    check_sequences,
)
from workload_domain.statuses import AttemptStatus
from workload_store_postgres import _rows
from workload_store_postgres._db import Conn, one, require_epoch, rows
from workload_store_postgres._journal import close_steps
from workload_store_postgres._part import StorePart, require_run
from workload_store_postgres._queries import query

__all__ = ["Runs"]

_NIL_UUID = uuid.UUID(int=0)
_VERSION_FK = "workflow_runs_workflow_id_version_fkey"


class Runs(StorePart):
    """The ``ExecutionStore`` part of the store."""

    async def create_run(
        self, new_run: NewRun, idempotency: IdempotencyRecord | None = None
    ) -> RunRecord | Replayed:
        """Write the run, its tasks, its first events and the idempotency record atomically."""
        run = new_run.run
        run_id = _rows.maybe_uuid(run.run_id)
        if run_id is None:
            raise StoreIntegrityError(f"run ids are canonical UUIDs, not {run.run_id!r}")
        if run.revision != 1:
            raise StoreIntegrityError("a new run starts at revision 1")
        check_sequences(new_run.events, 0)

        async def work(conn: Conn) -> RunRecord:
            params = {
                **_rows.run_params(run),
                "last_sequence": len(new_run.events),
                "announce": self._db.announce,  # the leader hears of it (§14)
            }
            await conn.execute(query("insert_run"), params)
            async with conn.cursor() as cur:
                tasks = [_rows.task_params(run_id, t) for t in new_run.tasks]
                await cur.executemany(query("insert_task"), tasks)
                # Created by any replica, not fenced: its events carry no epoch.
                events = [_rows.event_params(run_id, e, None) for e in new_run.events]
                await cur.executemany(query("insert_event"), events)
            return run

        return await self._db.write(
            work, idempotency, {_VERSION_FK: lambda: VersionNotFound(run.workflow_id, run.version)}
        )

    async def load_run(self, run_id: str) -> RunSnapshot:
        """Read the run, its tasks and its running attempts in one consistent snapshot."""
        uid = _rows.run_uuid(run_id)
        async with self._db.tx() as conn:
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            row = await one(conn, "get_run", {"run_id": uid})
            if row is None:
                raise RunNotFound(run_id)
            tasks = await rows(conn, "list_tasks", {"run_id": uid, "after": -1, "limit": None})
            live = await rows(conn, "live_attempts", {"run_id": uid})
            waiting = []
            if any(a["action"] == AGENT_ACTION for a in live):
                waiting = await rows(conn, "live_approvals", {"run_id": uid})
        last_sequence = row.pop("last_sequence")
        return RunSnapshot(
            run=_rows.run(row),
            tasks=tuple(_rows.task(t) for t in tasks),
            live_attempts=tuple(_rows.attempt(a) for a in live),
            last_sequence=last_sequence,
            approvals=tuple(_rows.approval(a) for a in waiting),
        )

    async def commit(
        self, commit: RunCommit, idempotency: IdempotencyRecord | None = None
    ) -> Replayed | None:
        """Apply a run transition if, and only if, the run is still at the expected revision."""
        run = commit.run
        uid = _rows.run_uuid(run.run_id)
        if run.revision != commit.expected_revision + 1:
            raise StoreIntegrityError("a commit raises the revision by exactly one")

        closed: list[tuple[StepRecord, AttemptRecord]] = []

        async def work(conn: Conn) -> None:
            closed.clear()  # what this transaction closed, if it commits
            params = {
                **_rows.run_params(run),
                "expected_revision": commit.expected_revision,
                "events": len(commit.events),
                "epoch": self._db.epoch,
                "announce": self._db.announce and commit.announce,
            }
            row = await one(conn, "update_run", params)
            if row is None:
                await require_run(conn, uid, run.run_id)
                await require_epoch(self._db, conn)
                raise RevisionConflict(run.run_id, commit.expected_revision)
            check_sequences(commit.events, row["last_sequence"] - len(commit.events))
            async with conn.cursor() as cur:
                if commit.tasks:
                    tasks = [_rows.task_params(uid, t) for t in commit.tasks]
                    await cur.executemany(query("update_task"), tasks)
                    if cur.rowcount != len(commit.tasks):
                        raise StoreIntegrityError("the commit updates a task the run lacks")
                if commit.attempts:
                    attempts = [_rows.attempt_params(uid, a) for a in commit.attempts]
                    await cur.executemany(query("upsert_attempt"), attempts)
                    for attempt in commit.attempts:
                        if attempt.action == AGENT_ACTION and not attempt.status.is_live:
                            ended = await close_steps(conn, uid, attempt)
                            closed.extend((step, attempt) for step in ended)
                    queues = [a.queue for a in commit.attempts if a.status is AttemptStatus.QUEUED]
                    if queues:
                        now = commit.run.updated_at
                        announced = {"queues": queues, "now": now, "announce": self._db.announce}
                        await cur.execute(query("ensure_queues"), announced)
                if commit.approvals:
                    approvals = [_rows.approval_params(uid, a) for a in commit.approvals]
                    await cur.executemany(query("upsert_approval"), approvals)
                if commit.events:
                    events = [_rows.event_params(uid, e, self._db.epoch) for e in commit.events]
                    await cur.executemany(query("insert_event"), events)

        result = await self._db.write(work, idempotency)
        if isinstance(result, Replayed):
            return result
        for step, attempt in closed:  # ended by this commit, once (SPEC §12)
            self._db.telemetry.tool_call_ended(step, closed_by=attempt)
        return None

    async def list_unfinished_runs(self, after: str | None, limit: int) -> Sequence[str]:
        """Ids of non-terminal runs in id order (the recovery scan)."""
        params = {"after": _NIL_UUID if after is None else _rows.run_uuid(after), "limit": limit}
        return await self._read("unfinished_runs", params, lambda r: str(r["run_id"]))

    async def runs_with_running_attempts(self, actions: Collection[str]) -> Sequence[str]:
        """Ids of runs with an attempt of one of ``actions`` still running, in id order."""
        params = {"actions": list(actions)}
        return await self._read("runs_with_running_attempts", params, lambda r: str(r["run_id"]))
