"""Executing one definition in-process: the engine, the in-memory store, the mock executor.

Imported only by ``workload run-local`` (the engine is an optional dependency of the CLI). The
state it returns is made of the SDK's models, shaped exactly like the API's resources, so the
progress display and the ``--state`` file are the same as against a server.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from workload_domain.compiler import compile_definition
from workload_domain.errors import InvalidInput
from workload_domain.ids import uuid7
from workload_domain.model import (
    AttemptRecord,
    EventRecord,
    RunRecord,
    TaskError,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_engine.clock import SystemClock
from workload_engine.engine import Engine
from workload_engine.memory_store import InMemoryStore
from workload_engine.mock_executor import MockExecutor
from workload_engine.runs import build_run
from workload_sdk import Attempt, Event, Run, TaskRun, TaskStatus, Version

__all__ = ["DefinitionRejected", "LocalState", "run_local"]

Progress = Callable[[Run, Sequence[TaskRun]], None]


class DefinitionRejected(Exception):
    """The definition does not compile; ``problems`` are (JSON Pointer, message) pairs."""

    def __init__(self, message: str, problems: Sequence[tuple[str, str]]) -> None:
        super().__init__(message)
        self.problems = list(problems)


@dataclass(frozen=True, slots=True)
class LocalState:
    """The final state of a local run, as the API would show it."""

    version: Version
    run: Run
    tasks: list[TaskRun]
    attempts: dict[str, list[Attempt]]
    events: list[Event]

    def to_json(self) -> dict[str, Any]:
        """The ``--state`` document: each part parses into its SDK model."""
        return {
            "version": self.version.model_dump(mode="json"),
            "run": self.run.model_dump(mode="json"),
            "tasks": [t.model_dump(mode="json") for t in self.tasks],
            "attempts": {
                key: [a.model_dump(mode="json") for a in attempts]
                for key, attempts in self.attempts.items()
            },
            "events": [e.model_dump(mode="json") for e in self.events],
        }


def _error(error: TaskError | None) -> dict[str, Any] | None:
    return None if error is None else error.to_json()


def _run(record: RunRecord, counts: Mapping[str, int]) -> Run:
    return Run.model_validate(
        {
            "run_id": record.run_id,
            "workflow_id": record.workflow_id,
            "version": record.version,
            "status": record.status.value,
            "revision": record.revision,
            "input": record.input,
            "cancel_requested": record.cancel_requested,
            "created_at": record.created_at,
            "updated_at": record.updated_at,
            "started_at": record.started_at,
            "finished_at": record.finished_at,
            "task_counts": {s.value: int(counts.get(s.value, 0)) for s in TaskStatus},
        }
    )


def _task(record: TaskRecord) -> TaskRun:
    return TaskRun.model_validate(
        {
            "task_key": record.task_key,
            "status": record.status.value,
            "depends_on": list(record.depends_on),
            "attempt_count": record.attempt_count,
            "max_attempts": record.max_attempts,
            "next_attempt_at": record.next_attempt_at,
            "started_at": record.started_at,
            "finished_at": record.finished_at,
            "output": record.output,
            "error": _error(record.error),
        }
    )


def _attempt(record: AttemptRecord) -> Attempt:
    return Attempt.model_validate(
        {
            "attempt": record.attempt,
            "status": record.status.value,
            "started_at": record.started_at,
            "finished_at": record.finished_at,
            "output": record.output,
            "error": _error(record.error),
        }
    )


def _event(record: EventRecord) -> Event:
    return Event.model_validate(
        {
            "sequence": record.sequence,
            "type": record.type.value,
            "occurred_at": record.occurred_at,
            "task_key": record.task_key,
            "attempt": record.attempt,
            "data": record.data,
        }
    )


def _version(record: VersionRecord) -> Version:
    return Version.model_validate(
        {
            "workflow_id": record.workflow_id,
            "version": record.version,
            "definition_hash": record.definition_hash,
            "task_count": record.task_count,
            "created_at": record.created_at,
            "definition": record.definition,
        }
    )


async def _snapshot(store: InMemoryStore, run_id: str) -> tuple[Run, list[TaskRun]]:
    run = await store.get_run(run_id)
    counts = await store.task_counts([run_id])
    tasks = await store.list_tasks(run_id)
    return _run(run, counts.get(run_id, {})), [_task(t) for t in tasks]


async def _execute(
    definition: Mapping[str, Any], run_input: Mapping[str, Any], progress: Progress, every: float
) -> LocalState:
    try:
        workflow = compile_definition(definition)
    except InvalidInput as exc:
        raise DefinitionRejected(exc.message, [(p.path, p.message) for p in exc.problems]) from None
    clock = SystemClock()
    store = InMemoryStore(clock)
    now = clock.now()
    version = await store.create_workflow(
        WorkflowRecord(workflow.workflow_id, 1, workflow.definition.description, now, now),
        VersionRecord(
            workflow.workflow_id,
            1,
            workflow.definition_hash,
            len(workflow.tasks),
            now,
            workflow.document(),
        ),
    )
    run_id = uuid7(int(now.timestamp() * 1000), secrets.token_bytes(10))
    new_run = build_run(workflow, version=1, run_id=run_id, run_input=dict(run_input), clock=clock)
    await store.create_run(new_run)
    engine = Engine(store, MockExecutor(clock), clock)

    async def show_progress() -> None:
        while True:
            progress(*await _snapshot(store, run_id))
            await anyio.sleep(every)

    async with anyio.create_task_group() as group:
        group.start_soon(show_progress)
        await engine.execute(run_id)
        group.cancel_scope.cancel()
    run, tasks = await _snapshot(store, run_id)
    progress(run, tasks)
    attempts = {
        t.task_key: [_attempt(a) for a in await store.list_attempts(run_id, t.task_key)]
        for t in tasks
    }
    events = [_event(e) for e in await store.list_events(run_id)]
    return LocalState(_version(version), run, tasks, attempts, events)


def run_local(
    definition: Mapping[str, Any],
    run_input: Mapping[str, Any],
    progress: Progress,
    *,
    every: float = 0.1,
) -> LocalState:
    """Compile ``definition`` and execute one run of it to the end, in this process.

    Args:
        definition: The workflow definition (as for ``POST /workflows``).
        run_input: The run's input object.
        progress: Called with the run and its tasks every ``every`` seconds and at the end.
        every: Seconds between progress calls.

    Raises:
        DefinitionRejected: the definition does not compile (every problem listed).
    """
    return anyio.run(_execute, definition, run_input, progress, every)
