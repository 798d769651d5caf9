"""The step journal of agent attempts (SPEC §11) and the leases of remote tool calls.

A step is inserted only while its attempt is running (``insert_step`` takes a share lock on the
attempt, so it never slips in behind the commit that ends it and closes its steps), and ends
exactly once (``finish_step`` is conditioned on ``status = 'running'``, and on the lease for a
worker's report). A step's end adds its usage to the task and the run in the same transaction,
after locking the run row as a commit does, so the two never deadlock. Claims and heartbeats of
tool calls are part of ``claim_attempts`` and ``heartbeat`` (:mod:`._workers`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from workload_domain import listings
from workload_domain.agent.journal import StepRecord, StepStatus
from workload_domain.cursors import Page, Position
from workload_domain.errors import StoreIntegrityError
from workload_domain.leases import LeasedToolCall
from workload_domain.records import AttemptRecord
from workload_store_postgres import _rows
from workload_store_postgres._db import Conn, one, require_epoch
from workload_store_postgres._part import StorePart, require_task
from workload_store_postgres._queries import query
from workload_store_postgres._work_notice import encode_work

__all__ = ["Journal", "close_steps"]


async def close_steps(conn: Conn, run_id: uuid.UUID, attempt: AttemptRecord) -> list[StepRecord]:
    """In a commit that ended an agent attempt: end its running steps ``failed``.

    The remote tool calls among them, as ended (told to the telemetry once the commit is).
    """
    params = {
        "run_id": run_id,
        "task_key": attempt.task_key,
        "attempt": attempt.attempt,
        "finished_at": attempt.finished_at,
        "attempt_status": attempt.status.value,
    }
    async with conn.cursor() as cur:
        await cur.execute(query("close_steps"), params)
        return [_rows.step(row) for row in await cur.fetchall()]


class Journal(StorePart):
    """The ``JournalStore`` part of the store."""

    async def list_steps(self, run_id: str, task_key: str, attempt: int) -> Sequence[StepRecord]:
        """One attempt's journal by sequence."""
        uid = _rows.maybe_uuid(run_id)
        if uid is None:
            return []
        params = {"run_id": uid, "task_key": task_key, "attempt": attempt}
        return await self._read("list_steps", params, _rows.step)

    async def begin_step(self, step: StepRecord) -> StepRecord | None:
        """Insert a running step while its attempt is running."""
        if step.status is not StepStatus.RUNNING or step.finished_at is not None:
            raise StoreIntegrityError("a step begins running")
        params = {**_rows.step_params(step), **self._db.fence_params()}
        async with self._db.tx() as conn:
            row = await one(conn, "insert_step", params)
            if row is None:
                await require_epoch(self._db, conn)
            elif step.queue is not None:
                queued = {
                    "queues": [step.queue],
                    "now": step.started_at,
                    # Without an action (never, for a remote call) the notice names nothing.
                    "work": encode_work([(step.queue, step.action)]) if step.action else "",
                }
                await conn.execute(
                    query("ensure_queues"), {**queued, "announce": self._db.announce}
                )
        return None if row is None else _rows.step(row)

    async def finish_step(
        self,
        step: StepRecord,
        *,
        token_digest: str | None = None,
        deadline_passed: bool = False,
    ) -> StepRecord | None:
        """End a running step and add its usage to its task and run (see ``JournalStore``)."""
        if step.status is StepStatus.RUNNING or step.finished_at is None:
            raise StoreIntegrityError("a step ends succeeded or failed, with finished_at")
        uid = _rows.run_uuid(step.run_id)
        params = {
            **_rows.step_params(step),
            "digest": token_digest,
            "deadline_passed": deadline_passed,
            **self._db.fence_params(),
            # A worker's report or the reaper ended it: wake its agent's loop on the leader
            # (§14), or on its run's shard's owner (§16).
            "announce": self._db.announce and (token_digest is not None or deadline_passed),
            **self._db.step_notice(step.run_id, step.attempt, step.task_key),
        }
        async with self._db.tx() as conn:
            await conn.execute(query("lock_run_for_usage"), {"run_id": uid})
            row = await one(conn, "finish_step", params)
            if row is None:
                await require_epoch(self._db, conn)
                return None
            ended = _rows.step(row)
            usage = ended.usage_added()
            if usage.model_calls or usage.tool_calls:
                added = {**usage.to_json(), "run_id": uid, "task_key": step.task_key}
                await conn.execute(query("add_task_usage"), added)
                await conn.execute(query("add_run_usage"), added)
        return ended

    async def page_steps(
        self, run_id: str, task_key: str, cursor: str | None, limit: int
    ) -> Page[StepRecord]:
        """A task's steps by (attempt, sequence)."""
        uid = _rows.run_uuid(run_id)

        async def fetch(after: Position | None, n: int) -> Sequence[StepRecord]:
            params = {
                "run_id": uid,
                "task_key": task_key,
                "after_attempt": after[0] if after else 0,
                "after_sequence": after[1] if after else 0,
                "limit": n,
            }
            found = await self._read("page_steps", params, _rows.step)
            if not found:
                async with self._db.single() as conn:
                    await require_task(conn, uid, run_id, task_key)
            return found

        scope = {"run_id": run_id, "task_key": task_key}
        return await self._paginate(listings.STEPS, scope, cursor, limit, fetch)

    async def find_tool_call(self, step_id: str) -> LeasedToolCall | None:
        """A remote tool call by its step id, with its lease token's digest."""
        uid = _rows.maybe_uuid(step_id)
        if uid is None:
            return None
        async with self._db.tx() as conn:
            row = await one(conn, "find_tool_call", {"step_id": uid})
        if row is None:
            return None
        canceling = bool(row.pop("cancel_requested"))
        return LeasedToolCall(_rows.step(row), row["lease_token_digest"], canceling)

    async def due_tool_calls(self, now: datetime, limit: int) -> Sequence[StepRecord]:
        """Running remote tool calls whose deadline passed, oldest first."""
        return await self._read("due_tool_calls", {"now": now, "limit": limit}, _rows.step)
