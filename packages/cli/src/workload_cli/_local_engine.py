"""Executing one definition in-process: the service's own wiring on the in-memory store.

Imported only by ``workload run-local`` (the server packages are an optional dependency of the
CLI). It takes everything from the API's composition root with the in-memory store and no lock
(:func:`~workload_api.container.use_memory_store`) and goes through the same use cases as the
HTTP API, so the state it returns is exactly the API's resources, parsed into the SDK's models:
the progress display and the ``--state`` file are the same as against a server.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from workload_api.container import Container, use_memory_store
from workload_api.settings import Settings
from workload_api.usecases import UseCases
from workload_domain.errors import InvalidInput
from workload_domain.idempotency import IdempotencyClaim
from workload_sdk import Attempt, Event, Run, TaskRun, Version

__all__ = ["DefinitionRejected", "LocalState", "run_local"]

Progress = Callable[[Run, Sequence[TaskRun]], None]
_PAGE = 200


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


def _refuse_remote(definition: Mapping[str, Any], local: frozenset[str]) -> None:
    """A local run has no workers: a task of a remote action would wait in its queue forever."""
    tasks = definition.get("tasks")
    if not isinstance(tasks, list):
        return  # the compiler says what is wrong
    remote: list[tuple[str, str]] = []
    for i, task in enumerate(tasks):
        if not isinstance(task, Mapping) or not isinstance(task.get("action"), str):
            continue
        if task["action"] not in local:
            remote.append((f"/tasks/{i}/action", f"{task['action']!r} is executed by workers"))
        tools = task.get("input", {}).get("tools") if isinstance(task.get("input"), Mapping) else []
        for j, tool in enumerate(tools if isinstance(tools, list) else []):
            action = tool.get("action") if isinstance(tool, Mapping) else None
            if isinstance(action, str) and action not in local:
                where = f"/tasks/{i}/input/tools/{j}/action"
                remote.append((where, f"the tool's action {action!r} is executed by workers"))
    if remote:
        actions = ", ".join(sorted(local))
        raise DefinitionRejected(
            f"run-local executes in-process actions only ({actions}); start a server and a "
            "worker for the others",
            remote,
        )


def _claim(operation: str) -> IdempotencyClaim:
    # One process, one request each: a fresh key per write.
    return IdempotencyClaim("local", secrets.token_hex(16), operation, operation)


async def _every_item(
    page: Callable[[str | None], Awaitable[dict[str, Any]]],
) -> AsyncIterator[dict[str, Any]]:
    cursor: str | None = None
    while True:
        found = await page(cursor)
        for item in found["items"]:
            yield item
        cursor = found["next_cursor"]
        if cursor is None:
            return


async def _snapshot(usecases: UseCases, run_id: str) -> tuple[Run, list[TaskRun]]:
    run, _ = await usecases.runs.get(run_id)
    tasks = [
        TaskRun.model_validate(t)
        async for t in _every_item(lambda c: usecases.runs.list_tasks(run_id, c, _PAGE))
    ]
    return Run.model_validate(run), tasks


async def _execute(
    definition: Mapping[str, Any], run_input: Mapping[str, Any], progress: Progress, every: float
) -> LocalState:
    container = use_memory_store(Container(settings=Settings.model_construct()))
    usecases: UseCases = container.usecases()
    _refuse_remote(definition, container.engine().local_actions)
    async with container.service().running():
        try:
            created = await usecases.workflows.create(dict(definition), _claim("create_workflow"))
        except InvalidInput as exc:
            problems = [(p.path, p.message) for p in exc.problems]
            raise DefinitionRejected(exc.message, problems) from None
        version = Version.model_validate(created.body)
        started = await usecases.runs.start(
            version.workflow_id, version.version, {"input": dict(run_input)}, _claim("start_run")
        )
        run_id: str = started.body["run_id"]

        async def show_progress() -> None:
            while True:
                progress(*await _snapshot(usecases, run_id))
                await anyio.sleep(every)

        async with anyio.create_task_group() as group:
            group.start_soon(show_progress)
            await container.engine().wait_finished(run_id)
            group.cancel_scope.cancel()
        run, tasks = await _snapshot(usecases, run_id)
        progress(run, tasks)
        attempts: dict[str, list[Attempt]] = {}
        for task in tasks:

            def page(cursor: str | None, key: str = task.task_key) -> Awaitable[dict[str, Any]]:
                return usecases.runs.list_attempts(run_id, key, cursor, _PAGE)

            attempts[task.task_key] = [Attempt.model_validate(a) async for a in _every_item(page)]
        events = [
            Event.model_validate(e)
            async for e in _every_item(lambda c: usecases.runs.list_events(run_id, c, _PAGE))
        ]
    return LocalState(version, run, tasks, attempts, events)


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
