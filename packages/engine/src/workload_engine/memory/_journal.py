"""Agent steps in the in-memory store: the journal, and the leases of remote tool calls.

The same contract as the PostgreSQL store's (``tests/contract``): a step is written only while
its attempt is running, ends exactly once, and adds its usage to its task and its run in the
same (await-free) write.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TypeVar, cast

import anyio

from workload_domain import listings
from workload_domain.agent.journal import StepRecord, StepStatus
from workload_domain.cursors import Page, Position
from workload_domain.errors import StoreIntegrityError, TaskNotFound
from workload_domain.jsonvalues import JsonObject
from workload_domain.leases import LeasedToolCall
from workload_domain.statuses import AttemptStatus
from workload_domain.workers import Claim, ClaimedAttempt, still_claimable
from workload_engine.memory._part import MemoryState, copied, renew_lease

__all__ = ["MemoryJournal"]

_J = TypeVar("_J")


def _as_stored(step: StepRecord) -> StepRecord:
    """The step as a JSON store returns it (JSON values go through an encoding)."""

    def again(value: _J) -> _J:
        return value if value is None else cast(_J, json.loads(json.dumps(value)))

    return replace(
        step,
        request=again(step.request),
        response=again(step.response),
        usage=again(step.usage),
    )


class MemoryJournal(MemoryState):
    """The ``JournalStore`` part of the in-memory store, and tool calls' claims and leases."""

    async def list_steps(self, run_id: str, task_key: str, attempt: int) -> Sequence[StepRecord]:
        """One attempt's journal by sequence."""
        await anyio.lowlevel.checkpoint()
        journal = self._journals.get((run_id, task_key, attempt), {})
        return copied([journal[s] for s in sorted(journal)])

    async def begin_step(self, step: StepRecord) -> StepRecord | None:
        """Insert a running step while its attempt is running."""
        await anyio.lowlevel.checkpoint()
        if step.status is not StepStatus.RUNNING or step.finished_at is not None:
            raise StoreIntegrityError("a step begins running")
        if step.remote and (step.action is None or step.deadline is None):
            raise StoreIntegrityError("a remote tool call has an action and a deadline")
        data = self._runs.get(step.run_id)
        attempt = None if data is None else data.attempts.get((step.task_key, step.attempt))
        if attempt is None or attempt.status is not AttemptStatus.RUNNING:
            return None
        key = (step.run_id, step.task_key, step.attempt)
        journal = self._journals.setdefault(key, {})
        if step.sequence in journal:
            return None
        stored = _as_stored(replace(step, worker_id=None, claimed_at=None, lease_expires_at=None))
        journal[step.sequence] = stored
        self._step_ids[step.step_id] = (key, step.sequence)
        if step.queue is not None:
            self._queues.add(step.queue)
        return copied(stored)

    async def finish_step(
        self,
        step: StepRecord,
        *,
        token_digest: str | None = None,
        deadline_passed: bool = False,
    ) -> StepRecord | None:
        """End a running step (fenced by a lease token, or by a passed deadline)."""
        await anyio.lowlevel.checkpoint()
        if step.status is StepStatus.RUNNING or step.finished_at is None:
            raise StoreIntegrityError("a step ends succeeded or failed, with finished_at")
        journal = self._journals.get((step.run_id, step.task_key, step.attempt), {})
        current = journal.get(step.sequence)
        if current is None or current.status is not StepStatus.RUNNING:
            return None
        now = step.finished_at
        if token_digest is not None and not (
            self._step_tokens.get(current.step_id) == token_digest
            and current.lease_expires_at is not None
            and current.lease_expires_at > now
            and (current.timeout_at is None or current.timeout_at > now)
            and not self._runs[step.run_id].run.cancel_requested
        ):
            return None
        if deadline_passed and not _deadline_passed(current, now):
            return None
        ended = _as_stored(
            replace(
                current,
                status=step.status,
                response=step.response,
                usage=step.usage,
                finished_at=now,
                report_hash=step.report_hash,
                lease_end=step.lease_end,
            )
        )
        journal[step.sequence] = ended
        self._add_usage(self._runs[step.run_id], step.task_key, ended.usage_added())
        return copied(ended)

    async def page_steps(
        self, run_id: str, task_key: str, cursor: str | None, limit: int
    ) -> Page[StepRecord]:
        """A task's steps by (attempt, sequence)."""

        async def fetch(after: Position | None, n: int) -> Sequence[StepRecord]:
            await anyio.lowlevel.checkpoint()
            if task_key not in self._run(run_id).tasks:
                raise TaskNotFound(run_id, task_key)
            steps = sorted(
                (
                    step
                    for (r, k, _), journal in self._journals.items()
                    if r == run_id and k == task_key
                    for step in journal.values()
                ),
                key=listings.STEPS.position,
            )
            return copied(listings.rows_after(steps, listings.STEPS, after, n))

        scope = {"run_id": run_id, "task_key": task_key}
        return await listings.paginate(
            self._codec, listings.STEPS, scope=scope, cursor=cursor, limit=limit, fetch=fetch
        )

    async def find_tool_call(self, step_id: str) -> LeasedToolCall | None:
        """A remote tool call by its step id."""
        await anyio.lowlevel.checkpoint()
        found = self._step_ids.get(step_id)
        if found is None:
            return None
        key, sequence = found
        step = self._journals[key][sequence]
        if not step.remote:
            return None
        canceling = self._runs[step.run_id].run.cancel_requested
        return LeasedToolCall(copied(step), self._step_tokens.get(step_id), canceling)

    async def due_tool_calls(self, now: datetime, limit: int) -> Sequence[StepRecord]:
        """Running remote tool calls whose deadline passed, oldest deadline first."""
        await anyio.lowlevel.checkpoint()
        due = [
            (min(_passed(step, now)), step.step_id, step)
            for journal in self._journals.values()
            for step in journal.values()
            if step.remote and step.status is StepStatus.RUNNING and _passed(step, now)
        ]
        return copied([step for _, _, step in sorted(due, key=lambda d: d[:2])[:limit]])

    def _queued_tool_calls(self, claim: Claim, now: datetime) -> list[tuple[datetime, str]]:
        """(ready time, step id) of the claimable tool calls matching ``claim``, oldest first.

        A run whose cancel was requested hands out none: its agent is about to stop.
        """
        queues, actions = set(claim.queues), set(claim.actions)
        return sorted(
            (step.started_at, step.step_id)
            for (run_id, _, _), journal in self._journals.items()
            if not self._runs[run_id].run.cancel_requested
            for step in journal.values()
            if step.queued
            and step.queue in queues
            and step.action in actions
            and still_claimable(now, step.schedule_deadline, step.deadline)
        )[: len(claim.token_digests)]

    def _lease_tool_call(
        self, step_id: str, claim: Claim, index: int, now: datetime
    ) -> ClaimedAttempt:
        """Lease one queued tool call under the claim's ``index``-th token (no await)."""
        key, sequence = self._step_ids[step_id]
        step = self._journals[key][sequence]
        assert step.heartbeat_timeout_seconds is not None  # remote steps have all three
        assert step.deadline is not None
        assert step.action is not None
        leased = replace(
            step,
            worker_id=claim.worker_id,
            claimed_at=now,
            lease_expires_at=now + timedelta(seconds=step.heartbeat_timeout_seconds),
            timeout_at=step.deadline,
        )
        self._journals[key][sequence] = leased
        self._step_tokens[step_id] = claim.token_digests[index]
        run = self._runs[step.run_id].run
        arguments = copied(step.request.get("arguments") or {})
        return ClaimedAttempt(
            attempt_id=step_id,
            run_id=step.run_id,
            workflow_id=run.workflow_id,
            version=run.version,
            task_key=step.task_key,
            attempt=step.attempt,
            queue=step.queue or "default",
            action=step.action,
            input=arguments,
            run_input=copied(run.input),
            upstream={},
            lease_expires_at=now + timedelta(seconds=step.heartbeat_timeout_seconds),
            timeout_at=step.deadline,
            heartbeat_timeout_seconds=step.heartbeat_timeout_seconds,
            token_index=index,
            queued_at=step.started_at,
            traceparent=run.traceparent,
            kind="tool_call",
            tool_call_id=step.tool_call_id,
            tool=str(step.request.get("tool", "")),
            arguments=copied(arguments),
        )

    def _renew_tool_call(
        self, step_id: str, token_digest: str, now: datetime, progress: JsonObject | None
    ) -> tuple[StepRecord, datetime] | None:
        """Renew a tool call's held lease (None: not held; nothing written)."""
        found = self._step_ids.get(step_id)
        if found is None:
            return None
        key, sequence = found
        step = self._journals[key][sequence]
        if self._step_tokens.get(step_id) != token_digest or step.status is not StepStatus.RUNNING:
            return None
        if self._runs[step.run_id].run.cancel_requested:
            return None
        renewal = renew_lease(step, now, progress)
        if renewal is not None:
            self._journals[key][sequence] = renewal[0]
        return renewal


def _passed(step: StepRecord, now: datetime) -> list[datetime]:
    if step.worker_id is None:
        deadlines = [step.schedule_deadline]
    else:
        deadlines = [step.lease_expires_at, step.timeout_at]
    return [d for d in deadlines if d is not None and d <= now]


def _deadline_passed(step: StepRecord, now: datetime) -> bool:
    return bool(_passed(step, now))
