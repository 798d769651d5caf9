"""Creating runs, loading them for execution, and committing their transitions.

A run transition is conditioned on the run's revision (``UPDATE … WHERE run_id = … AND
revision = …``; zero rows → ``RevisionConflict``) and writes the run, task, attempt and event
changes together.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import NoReturn

import psycopg

from workload_domain.agent.journal import StepRecord
from workload_domain.agent.spec import AGENT_ACTION
from workload_domain.errors import (
    RevisionConflict,
    RunNotFound,
    StoreIntegrityError,
    VersionNotFound,
)
from workload_domain.idempotency import IdempotencyRecord, Replayed
from workload_domain.records import (
    AttemptRecord,
    NewRun,
    RunCommit,
    RunRecord,
    RunSnapshot,
    check_sequences,
)
from workload_domain.statuses import AttemptStatus
from workload_store_postgres import _rows
from workload_store_postgres._db import Conn, Database, one, require_epoch
from workload_store_postgres._group_commit import ALONE, GroupCommit
from workload_store_postgres._journal import close_steps
from workload_store_postgres._part import StorePart, require_run
from workload_store_postgres._queries import query
from workload_store_postgres._work_notice import encode_work

__all__ = ["Runs"]

_NIL_UUID = uuid.UUID(int=0)
_VERSION_FK = "workflow_runs_workflow_id_version_fkey"


class Runs(StorePart):
    """The ``ExecutionStore`` part of the store."""

    _commits: GroupCommit

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

        params = {
            **_rows.run_params(run),
            "last_sequence": len(new_run.events),
            "announce": self._db.announce,  # the leader (§14), or its shard's owner (§16)
            **self._db.run_notice(run.run_id),
            "tasks": _rows.task_rows(run_id, new_run.tasks),
            # Created by any replica, not fenced: its events carry no epoch.
            "event_rows": _rows.event_rows(run_id, new_run.events, None),
        }
        constraints = {_VERSION_FK: lambda: VersionNotFound(run.workflow_id, run.version)}
        replayed = await self._db.write_one("create_run", params, idempotency, constraints)
        return run if replayed is None else replayed

    async def load_run(self, run_id: str) -> RunSnapshot:
        """Read the run, its tasks and its running attempts in one consistent snapshot."""
        uid = _rows.run_uuid(run_id)
        params = {"run_id": uid, "after": -1, "limit": None}
        # One round trip: the reads of one snapshot, sent together in a pipeline.
        async with self._db.single() as conn:
            async with conn.pipeline():
                await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                found = [
                    await conn.execute(query(name), params)
                    for name in ("get_run", "list_tasks", "live_attempts", "live_approvals")
                ]
                await conn.execute("COMMIT")
            row = await found[0].fetchone()
            if row is None:
                raise RunNotFound(run_id)
            tasks, live, waiting = [await cur.fetchall() for cur in found[1:]]
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

        events = commit.events
        if events:
            check_sequences(events, events[0].sequence - 1)  # contiguous; the store checks after
        params = {
            **_rows.run_params(run),
            "expected_revision": commit.expected_revision,
            "events": len(events),
            "after_sequence": events[0].sequence - 1 if events else None,
            "task_keys": [t.task_key for t in commit.tasks],
            **self._db.fence_params(),
            "announce": self._db.announce and commit.announce,
            **self._db.run_notice(run.run_id),
            "tasks": _rows.task_rows(uid, commit.tasks),
            "attempts": _rows.attempt_rows(uid, commit.attempts),
            "event_rows": _rows.event_rows(uid, events, self._db.event_epoch()),
        }
        queued = [(a.queue, a.action) for a in commit.attempts if a.status is AttemptStatus.QUEUED]
        queues = [queue for queue, _ in queued]
        closing = [a for a in commit.attempts if a.action == AGENT_ACTION and not a.status.is_live]
        # Rarer writes that go with the transition: then one transaction of several statements.
        extra = bool(queues or closing or commit.approvals)

        closed: list[tuple[StepRecord, AttemptRecord]] = []

        async def work(conn: Conn) -> None:
            closed.clear()  # what this transaction closed, if it commits
            if await one(conn, "commit_run", params) is None:
                await _refused(self._db, conn, commit, params["after_sequence"])
            for attempt in closing:
                ended = await close_steps(conn, uid, attempt)
                closed.extend((step, attempt) for step in ended)
            if queues:
                now = commit.run.updated_at
                announced = {
                    "queues": queues,
                    "now": now,
                    "announce": self._db.announce,
                    "work": encode_work(queued),
                }
                await conn.execute(query("ensure_queues"), announced)
            if commit.approvals:
                approvals = [_rows.approval_params(uid, a) for a in commit.approvals]
                async with conn.cursor() as cur:
                    await cur.executemany(query("upsert_approval"), approvals)

        with _renewed_lease_refused(commit):
            if idempotency is not None or extra:
                result = await self._db.write(work, idempotency)
                if isinstance(result, Replayed):
                    return result
                for step, attempt in closed:  # ended by this commit, once (SPEC §12)
                    self._db.telemetry.tool_call_ended(step, closed_by=attempt)
                return None
            # The common transition, one statement: written with those of other runners ready now.
            written = await self._commits.commit(uid, params)
            if written is ALONE:
                async with self._db.single() as conn:
                    await work(conn)
            elif written is None:
                async with self._db.single() as conn:
                    await _refused(self._db, conn, commit, params["after_sequence"])
            return None

    async def list_unfinished_runs(
        self, after: str | None, limit: int, shards: Collection[int] | None = None
    ) -> Sequence[str]:
        """Ids of non-terminal runs in id order (the recovery scan), of ``shards`` if given."""
        params = {
            "after": _NIL_UUID if after is None else _rows.run_uuid(after),
            "limit": limit,
            "shards": None if shards is None else sorted(shards),
        }
        name = "unfinished_runs" if shards is None else "unfinished_runs_in_shards"
        return await self._read(name, params, lambda r: str(r["run_id"]))

    async def runs_with_running_attempts(
        self, actions: Collection[str], shards: Collection[int] | None = None
    ) -> Sequence[str]:
        """Ids of runs with an attempt of one of ``actions`` still running, in id order."""
        params = {"actions": list(actions), "shards": None if shards is None else sorted(shards)}
        name = (
            "runs_with_running_attempts"
            if shards is None
            else ("runs_with_running_attempts_in_shards")
        )
        return await self._read(name, params, lambda r: str(r["run_id"]))


LEASE_RENEWED = "WL409"
"""SQLSTATE of ``workload_lease_renewed()`` (migration 0013): a lease was renewed since the read."""


@contextmanager
def _renewed_lease_refused(commit: RunCommit) -> Iterator[None]:
    """A commit refused because a heartbeat renewed a lease it ends (0013): a revision conflict.

    Nothing was written: the statement failed (in a group, the group rolled back and each of
    its transitions was written again alone). Like a newer revision, it asks for the run to be
    read again (SPEC §10).
    """
    try:
        yield
    except psycopg.Error as exc:
        if exc.sqlstate != LEASE_RENEWED:
            raise
        raise RevisionConflict(commit.run.run_id, commit.expected_revision) from exc


async def _refused(db: Database, conn: Conn, commit: RunCommit, after: int | None) -> NoReturn:
    """Why a commit wrote nothing: no such run, a newer epoch, a stale revision, or a bug."""
    run_id = commit.run.run_id
    uid = _rows.run_uuid(run_id)
    await require_run(conn, uid, run_id)
    await require_epoch(db, conn)
    row = await one(conn, "get_run", {"run_id": uid})
    if row is None or row["revision"] != commit.expected_revision:
        raise RevisionConflict(run_id, commit.expected_revision)
    if after is not None and row["last_sequence"] != after:
        raise StoreIntegrityError("event sequences must continue the run's history contiguously")
    raise StoreIntegrityError("the commit updates a task the run lacks")
