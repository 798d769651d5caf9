"""Application services of runs: build a new run, request its cancellation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from workload_domain.compiler import CompiledWorkflow
from workload_domain.errors import PreconditionFailed, RevisionConflict, RunFinished
from workload_domain.events import EventType
from workload_domain.idempotency import IdempotencyClaim, IdempotentWrite, Outcome
from workload_domain.jsonvalues import JsonObject
from workload_domain.model import EventRecord, NewRun, RunRecord, RunSnapshot, TaskRecord
from workload_domain.ports import Clock, ExecutionStore, IdempotencyStore
from workload_domain.statuses import RunStatus, TaskStatus
from workload_engine.planner import cancel_commit

__all__ = ["CancelResult", "build_run", "request_cancel"]

_MAX_CANCEL_TRIES = 50


def build_run(
    workflow: CompiledWorkflow,
    *,
    version: int,
    run_id: str,
    run_input: JsonObject,
    clock: Clock,
) -> NewRun:
    """Everything written when a run of ``workflow`` at ``version`` is created."""
    now = clock.now()
    run = RunRecord(
        run_id=run_id,
        workflow_id=workflow.workflow_id,
        version=version,
        status=RunStatus.PENDING,
        revision=1,
        input=run_input,
        cancel_requested=False,
        created_at=now,
        updated_at=now,
    )
    tasks = tuple(
        TaskRecord(
            task_key=spec.key,
            position=i,
            status=TaskStatus.PENDING,
            depends_on=tuple(spec.depends_on),
            attempt_count=0,
            max_attempts=spec.retry.max_attempts,
        )
        for i, spec in enumerate(workflow.tasks)
    )
    created = EventRecord(
        1,
        EventType.RUN_CREATED,
        now,
        data={"workflow_id": workflow.workflow_id, "version": version},
    )
    return NewRun(run=run, tasks=tasks, events=(created,))


class CancelResult:
    """The run after a cancel request, and whether it had been canceled already."""

    __slots__ = ("already_canceled", "snapshot")

    def __init__(self, snapshot: RunSnapshot, *, already_canceled: bool) -> None:
        self.snapshot = snapshot
        self.already_canceled = already_canceled

    @property
    def run(self) -> RunRecord:
        """The run row after the request."""
        return self.snapshot.run


class _CancelStore(ExecutionStore, IdempotencyStore, Protocol):
    """What canceling needs from the store."""


async def request_cancel(
    store: _CancelStore,
    clock: Clock,
    run_id: str,
    *,
    if_revision: int | None = None,
    claim: IdempotencyClaim | None = None,
    render: Callable[[RunSnapshot, bool], Outcome] | None = None,
) -> CancelResult:
    """Record a cancel request (SPEC §4): a pending run is canceled at once.

    The caller notifies the engine afterwards so that a started run converges to ``canceled``.
    With ``claim``, the outcome ``render`` makes of the run's new state (and whether it was
    canceled already) is saved with the write, or alone when there is nothing to write, for
    idempotent replays.

    Raises:
        RunNotFound: no such run.
        RunFinished: the run succeeded or failed.
        PreconditionFailed: ``if_revision`` is not the run's current revision.
        Replay: the idempotency key was already used for this request (its outcome inside).
    """
    for _ in range(_MAX_CANCEL_TRIES):
        snapshot = await store.load_run(run_id)
        run = snapshot.run
        if if_revision is not None and run.revision != if_revision:
            raise PreconditionFailed(
                f"run {run_id!r} is at revision {run.revision}, not {if_revision}"
            )
        if run.status is RunStatus.CANCELED or run.cancel_requested:
            # Nothing to write but the outcome, which a retry with the same key must replay.
            already = run.status is RunStatus.CANCELED
            if claim is not None and render is not None:
                await store.save_outcome(claim, render(snapshot, already))
            return CancelResult(snapshot, already_canceled=already)
        if run.status.is_terminal:
            raise RunFinished(run_id, run.status.value)
        commit, after = cancel_commit(snapshot, now=clock.now())
        write: IdempotentWrite[RunRecord] | None = None
        if claim is not None and render is not None:
            write = IdempotentWrite(claim, _constant(render(after, False)))
        try:
            await store.commit(commit, write)
        except RevisionConflict:
            if if_revision is not None:
                raise PreconditionFailed(f"run {run_id!r} changed concurrently") from None
            continue
        return CancelResult(after, already_canceled=False)
    raise RevisionConflict(run_id, -1)


def _constant(outcome: Outcome) -> Callable[[RunRecord], Outcome]:
    """A render that ignores the written row: the outcome was rendered from the full state."""
    return lambda _: outcome
