"""Runs: start (one transaction, then execution), cancel, and every read of a run's state.

A committed run is handed to execution by whichever path acknowledged it: a new run right
after its COMMIT, and a replayed start too (its first attempt may have committed without the
engine hearing of it — a lost answer, a fail-stop). The engine ignores runs it already owns.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from collections import Counter
from collections.abc import Callable, Collection
from datetime import datetime

from workload_api import resources, schemas
from workload_api.usecases._bodies import parse
from workload_api.usecases._result import Result
from workload_domain.definition import TASK_KEY_PATTERN
from workload_domain.errors import ExecutionStopped, InvalidArgument, TaskNotFound
from workload_domain.idempotency import IdempotencyClaim, IdempotencyRecord, Outcome, Replayed
from workload_domain.ids import uuid7
from workload_domain.jsonvalues import JsonObject, json_problems, jsonb_value
from workload_domain.ports import Clock, Store
from workload_domain.run_listing import RunFilter, RunOrder
from workload_domain.statuses import RunStatus
from workload_domain.telemetry import NO_TELEMETRY, Telemetry
from workload_engine.definitions import DefinitionCache
from workload_engine.engine import Engine
from workload_engine.runs import CancelResult, build_run, request_cancel

__all__ = ["RunUseCases"]

_TASK_KEY = re.compile(TASK_KEY_PATTERN)


class RunUseCases:
    """Start and cancel runs; read runs, tasks, attempts and events."""

    def __init__(
        self,
        store: Store,
        engine: Engine,
        definitions: DefinitionCache,
        clock: Clock,
        new_run_id: Callable[[], str] | None = None,
        *,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self._store = store
        self._engine = engine
        self._definitions = definitions
        self._clock = clock
        self._telemetry = telemetry
        self._new_run_id = new_run_id or self._uuid7

    def _uuid7(self) -> str:
        return uuid7(int(self._clock.now().timestamp() * 1000), secrets.token_bytes(10))

    async def start(
        self,
        workflow_id: str,
        version: int,
        body: JsonObject | None,
        claim: IdempotencyClaim,
    ) -> Result:
        """Create a run in one transaction, then hand it to execution.

        The run keeps the request's trace context (SPEC §12): its span continues the trace,
        and its remote attempts hand it to workers.
        """
        run_input = _run_input(body)
        compiled = await self._definitions.get(workflow_id, version)
        new_run = build_run(
            compiled,
            version=version,
            run_id=self._new_run_id(),
            run_input=run_input,
            clock=self._clock,
            traceparent=self._telemetry.current_traceparent(),
        )
        counts = Counter(t.status.value for t in new_run.tasks)
        outcome = Outcome(202, resources.run(new_run.run, counts))
        written = await self._store.create_run(new_run, IdempotencyRecord(claim, outcome))
        if isinstance(written, Replayed):
            self._resubmit(written)
            return Result.replay(written)
        # Only now, after COMMIT, does execution start; a crash before this line is repaired
        # by the recovery scan at the next start-up (or the ownership sweep).
        self._engine.submit(written.run_id, new_run.snapshot)
        return Result.of(outcome)

    def _resubmit(self, replayed: Replayed) -> None:
        run_id = replayed.outcome.body.get("run_id")
        if isinstance(run_id, str) and self._engine.running:
            # Stopping: the next coordinator's recovery scan takes the run.
            with contextlib.suppress(ExecutionStopped):
                self._engine.submit(run_id)

    async def cancel(
        self, run_id: str, if_revisions: Collection[int] | None, claim: IdempotencyClaim
    ) -> Result:
        """Record a cancel request: 200 if the run was already canceled, else 202."""
        # A retry replays even when its preconditions no longer hold (a cancel retried with an
        # ETag its own first attempt made stale): look the key up before anything else.
        stored = await self._store.find_outcome(claim)
        if stored is not None:
            return Result.of(stored, replayed=True)

        def save_with(result: CancelResult) -> IdempotencyRecord:
            counts = Counter(t.status.value for t in result.snapshot.tasks)
            status = 200 if result.already_canceled else 202
            return IdempotencyRecord(claim, Outcome(status, resources.run(result.run, counts)))

        result = await request_cancel(
            self._store,
            self._clock,
            run_id,
            if_revision=if_revisions,
            save_with=save_with,
            local_actions=self._engine.local_actions,
        )
        if isinstance(result, Replayed):
            return Result.replay(result)
        if result.commit is not None:
            self._engine.committed(result.commit)
        self._engine.notify(run_id)
        return Result.of(save_with(result).outcome)

    async def list(
        self,
        workflow_id: str | None,
        status: RunStatus | None,
        cursor: str | None,
        limit: int,
        *,
        order: RunOrder = RunOrder.DESC,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> JsonObject:
        """A page of runs, optionally filtered; newest first unless ``order`` says otherwise."""
        wanted = RunFilter(workflow_id, status, order, created_after, created_before)
        found = await self._store.page_runs(wanted, cursor, limit)
        return resources.page(found, lambda item: resources.run(*item))

    async def active_counts(self, workflow_id: str | None) -> dict[str, int]:
        """How many unfinished runs are in each unfinished status (zeros included)."""
        found = await self._store.count_active_runs(workflow_id)
        return {s.value: int(found.get(s.value, 0)) for s in RunStatus if not s.is_terminal}

    async def get(self, run_id: str) -> tuple[JsonObject, int]:
        """One run, and its revision (for the ETag)."""
        run, counts = await self._store.get_run_with_counts(run_id)
        return resources.run(run, counts), run.revision

    async def list_tasks(self, run_id: str, cursor: str | None, limit: int) -> JsonObject:
        """A page of a run's tasks."""
        return resources.page(await self._store.page_tasks(run_id, cursor, limit), resources.task)

    async def get_task(self, run_id: str, task_key: str) -> JsonObject:
        """One task of a run."""
        await self._check_task_key(run_id, task_key)
        return resources.task(await self._store.get_task(run_id, task_key))

    async def list_attempts(
        self, run_id: str, task_key: str, cursor: str | None, limit: int
    ) -> JsonObject:
        """A page of a task's attempts."""
        await self._check_task_key(run_id, task_key)
        found = await self._store.page_attempts(run_id, task_key, cursor, limit)
        return resources.page(found, resources.attempt)

    async def list_steps(
        self, run_id: str, task_key: str, cursor: str | None, limit: int
    ) -> JsonObject:
        """A page of an agent task's steps, by attempt and sequence."""
        await self._check_task_key(run_id, task_key)
        found = await self._store.page_steps(run_id, task_key, cursor, limit)
        return resources.page(found, resources.step)

    async def get_attempt(self, run_id: str, task_key: str, attempt: int) -> JsonObject | None:
        """One attempt of a task, by number (None: the task has no such attempt)."""
        await self.get_task(run_id, task_key)  # a missing run or task: not found
        for record in await self._store.list_attempts(run_id, task_key):
            if record.attempt == attempt:
                return resources.attempt(record)
        return None

    async def get_step(
        self, run_id: str, task_key: str, attempt: int, sequence: int
    ) -> JsonObject | None:
        """One step of an agent attempt (None: no such step)."""
        await self.get_task(run_id, task_key)
        for record in await self._store.list_steps(run_id, task_key, attempt):
            if record.sequence == sequence:
                return resources.step(record)
        return None

    async def list_events(self, run_id: str, cursor: str | None, limit: int) -> JsonObject:
        """A page of a run's events."""
        return resources.page(await self._store.page_events(run_id, cursor, limit), resources.event)

    async def detail(self, run_id: str, *, attempts: int, events: int) -> JsonObject:
        """A run as the console shows it: the run, its tasks, its attempts, its latest events.

        ``last_sequence`` is the snapshot's last event; ``events`` the latest up to it (at most
        ``events``); ``attempts`` every attempt of the run (at most ``attempts``, by task).
        Each task carries its ``action`` (the console shows an agent's steps); ``approvals``
        are those of the run's live attempts (a pending one is what a waiting task waits for).
        """
        snapshot = await self._store.load_run(run_id)
        compiled = await self._definitions.get(snapshot.run.workflow_id, snapshot.run.version)
        actions = {t.key: t.action for t in compiled.definition.tasks}
        counts = Counter(t.status.value for t in snapshot.tasks)
        found = await self._store.list_run_attempts(run_id, attempts + 1)
        position = {t.task_key: t.position for t in snapshot.tasks}
        shown = sorted(found[:attempts], key=lambda a: (position.get(a.task_key, 0), a.attempt))
        # Everything shown is as of the snapshot: events committed after it are left to the
        # live stream (which starts after ``last_sequence``) and trigger a refresh.
        last = snapshot.last_sequence
        after = max(last - events, 0)
        latest = [
            e for e in await self._store.list_events(run_id, after, events) if e.sequence <= last
        ]
        return {
            "run": resources.run(snapshot.run, counts),
            "tasks": [resources.task(t) | {"action": actions[t.task_key]} for t in snapshot.tasks],
            "approvals": [resources.approval(a) for a in snapshot.approvals],
            "attempts": [resources.attempt(a) | {"task_key": a.task_key} for a in shown],
            "more_attempts": len(found) > attempts,
            "events": [resources.event(e) for e in latest],
            "last_sequence": last,
        }

    async def _check_task_key(self, run_id: str, task_key: str) -> None:
        """A key that cannot exist is not found — after its run is (a missing run first)."""
        if not _TASK_KEY.fullmatch(task_key):
            await self._store.get_run(run_id)
            raise TaskNotFound(run_id, task_key)


def _run_input(body: JsonObject | None) -> JsonObject:
    request = parse(schemas.StartRunRequest, body)
    problems = tuple(json_problems(request.input, ("input",)))
    if problems:
        raise InvalidArgument("the run input cannot be stored", problems)
    # In the form JSONB gives back: the 202 body and every later read show the same input.
    result: JsonObject = jsonb_value(request.input)
    return result
