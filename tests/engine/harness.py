"""A deterministic harness for engine tests: in-memory store, fake clock, mock executor."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from workload_domain.compiler import CompiledWorkflow, compile_definition
from workload_domain.idempotency import IdempotencyRecord, Replayed
from workload_domain.ids import uuid7
from workload_domain.ports import Executor, Store
from workload_domain.records import (
    AttemptRecord,
    EventRecord,
    ExecutorRequest,
    ExecutorResult,
    RunCommit,
    RunSnapshot,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.statuses import AttemptStatus
from workload_engine.clock import FakeClock
from workload_engine.engine import Engine
from workload_engine.memory import InMemoryStore
from workload_engine.mock_executor import MockExecutor
from workload_engine.runs import build_run

_run_ids = itertools.count(1)


class CrashAfter(Exception):
    """Raised by CrashingStore right after its N-th commit was applied (a process crash)."""


class CrashingStore(InMemoryStore):
    """Applies commits normally, then fails right after the N-th one: a crash at that point."""

    def __init__(self) -> None:
        super().__init__()
        self.crash_after: int | None = None

    async def commit(
        self, commit: RunCommit, idempotency: IdempotencyRecord | None = None
    ) -> Replayed | None:
        replayed = await super().commit(commit, idempotency)
        if self.crash_after is not None and self.commits >= self.crash_after:
            self.crash_after = None
            raise CrashAfter(f"crash after commit {self.commits}")
        return replayed


class RecordingStore(InMemoryStore):
    """Records the revision step of every successful commit."""

    def __init__(self) -> None:
        super().__init__()
        self.revision_steps: list[tuple[int, int]] = []
        self.event_counts: list[int] = []

    async def commit(
        self, commit: RunCommit, idempotency: IdempotencyRecord | None = None
    ) -> Replayed | None:
        replayed = await super().commit(commit, idempotency)
        self.revision_steps.append((commit.expected_revision, commit.run.revision))
        self.event_counts.append(len(commit.events))
        return replayed


class CountingExecutor:
    """Wraps an executor and records the peak number of attempts executing at once."""

    actions = frozenset({"mock"})

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.current = 0
        self.peak = 0
        self.calls: list[tuple[str, int]] = []

    async def execute(self, request: ExecutorRequest) -> ExecutorResult:
        self.current += 1
        self.peak = max(self.peak, self.current)
        self.calls.append((request.task_key, request.attempt))
        try:
            return await self.inner.execute(request)
        finally:
            self.current -= 1


@dataclass
class RunView:
    """The whole persisted state of a run, for assertions."""

    snapshot: RunSnapshot
    tasks: dict[str, TaskRecord]
    attempts: dict[str, list[AttemptRecord]]
    events: list[EventRecord]

    @property
    def status(self) -> str:
        return self.snapshot.run.status.value

    def task_statuses(self) -> dict[str, str]:
        return {k: t.status.value for k, t in self.tasks.items()}

    def attempt_statuses(self, key: str) -> list[str]:
        return [a.status.value for a in self.attempts[key]]

    def event_types(self) -> list[str]:
        return [e.type.value for e in self.events]

    def all_statuses(self) -> Counter[str]:
        counted: Counter[str] = Counter([self.status])
        counted.update(t.status.value for t in self.tasks.values())
        counted.update(a.status.value for attempts in self.attempts.values() for a in attempts)
        return counted


class Harness:
    """One store, one fake clock, one engine; runs execute with the clock on autojump."""

    def __init__(
        self,
        *,
        store: Store | None = None,
        clock: FakeClock | None = None,
        executor: Executor | None = None,
        max_concurrent_attempts: int = 64,
        resumable: frozenset[str] = frozenset(),
    ) -> None:
        self.clock = clock or FakeClock()
        self.store: Store = store or InMemoryStore(self.clock)
        self.executor = executor or MockExecutor(self.clock)
        self.engine = Engine(
            self.store,
            self.executor,
            self.clock,
            max_concurrent_attempts=max_concurrent_attempts,
            resumable_actions=resumable,
        )

    def restarted(
        self, executor: Executor | None = None, resumable: frozenset[str] = frozenset()
    ) -> Harness:
        """A new engine (a new process) over the same store and clock."""
        return Harness(store=self.store, clock=self.clock, executor=executor, resumable=resumable)

    async def create(
        self,
        definition: dict[str, Any],
        run_input: dict[str, Any] | None = None,
        traceparent: str | None = None,
    ) -> str:
        workflow = compile_definition(definition)
        now = self.clock.now()
        try:
            await self.store.get_workflow(workflow.workflow_id)
        except Exception:
            await self.store.create_workflow(
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
        # Time-ordered UUIDs, like the service's; deterministic from the fake clock.
        unix_ms = int(self.clock.now().timestamp() * 1000)
        run_id = uuid7(unix_ms, next(_run_ids).to_bytes(10, "big"))
        await self.store.create_run(
            build_run(
                workflow,
                version=1,
                run_id=run_id,
                run_input=run_input or {},
                clock=self.clock,
                traceparent=traceparent,
            )
        )
        return run_id

    async def execute(self, run_id: str, *, limit_seconds: float = 10) -> RunView:
        """Execute the run to its end with the fake clock jumping whenever all tasks block."""
        try:
            with anyio.fail_after(limit_seconds):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self.clock.autojump)
                    await self.engine.execute(run_id)
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The autojump task never fails: a group here holds the engine's one error.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        return await self.view(run_id)

    async def run(
        self, definition: dict[str, Any], run_input: dict[str, Any] | None = None
    ) -> RunView:
        return await self.execute(await self.create(definition, run_input))

    async def view(self, run_id: str) -> RunView:
        tasks = await self.store.list_tasks(run_id)
        return RunView(
            snapshot=await self.store.load_run(run_id),
            tasks={t.task_key: t for t in tasks},
            attempts={
                t.task_key: list(await self.store.list_attempts(run_id, t.task_key)) for t in tasks
            },
            events=list(await self.store.list_events(run_id)),
        )


def compiled(definition: dict[str, Any]) -> CompiledWorkflow:
    return compile_definition(definition)


def mock(key: str, depends_on: Sequence[str] = (), **fields: Any) -> dict[str, Any]:
    """A mock task; ``retry=`` and ``timeout_seconds=`` go to the task, the rest to its input."""
    task: dict[str, Any] = {"key": key, "action": "mock", "depends_on": list(depends_on)}
    for name in ("retry", "timeout_seconds"):
        if name in fields:
            task[name] = fields.pop(name)
    task["input"] = fields
    return task


def workflow(*tasks: dict[str, Any], workflow_id: str = "wf") -> dict[str, Any]:
    return {"id": workflow_id, "tasks": list(tasks)}


def no_running_left(view: RunView) -> bool:
    return all(a.status is not AttemptStatus.RUNNING for xs in view.attempts.values() for a in xs)
