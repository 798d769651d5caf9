"""Operations on runs that are not the runner's: build a new run, record a cancel request.

They hold no idempotency or presentation logic of their own: a caller that must save an
idempotent outcome with the cancel passes a function from the run's new state to that outcome,
evaluated before the write (the store is given data, never a callback).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Protocol, overload

from workload_domain.compiler import CompiledWorkflow
from workload_domain.errors import PreconditionFailed, RevisionConflict, RunFinished
from workload_domain.events import EventType
from workload_domain.idempotency import IdempotencyRecord, Replayed
from workload_domain.jsonvalues import JsonObject
from workload_domain.ports import Clock, ExecutionStore, IdempotencyStore
from workload_domain.records import (
    EventRecord,
    NewRun,
    RunCommit,
    RunRecord,
    RunSnapshot,
    TaskRecord,
)
from workload_domain.statuses import RunStatus, TaskStatus
from workload_engine.cancellation import cancel_commit

__all__ = ["CancelResult", "build_run", "request_cancel"]

_MAX_CANCEL_TRIES = 50


def build_run(
    workflow: CompiledWorkflow,
    *,
    version: int,
    run_id: str,
    run_input: JsonObject,
    clock: Clock,
    traceparent: str | None = None,
) -> NewRun:
    """Everything written when a run of ``workflow`` at ``version`` is created.

    ``traceparent`` is the trace context of the creating request (SPEC §12), kept with the run.
    """
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
        traceparent=traceparent,
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
    """The run after a cancel request, and whether it had been canceled already.

    ``commit`` is the commit that recorded the request (None when nothing was written).
    """

    __slots__ = ("already_canceled", "commit", "snapshot")

    def __init__(
        self,
        snapshot: RunSnapshot,
        *,
        already_canceled: bool,
        commit: RunCommit | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.already_canceled = already_canceled
        self.commit = commit

    @property
    def run(self) -> RunRecord:
        """The run row after the request."""
        return self.snapshot.run


class _CancelStore(ExecutionStore, IdempotencyStore, Protocol):
    """What canceling needs from the store."""


SaveWith = Callable[[CancelResult], IdempotencyRecord]
"""The idempotency record to save with a cancel, made from its result before the write."""


@overload
async def request_cancel(
    store: _CancelStore,
    clock: Clock,
    run_id: str,
    *,
    if_revision: int | Collection[int] | None = None,
    local_actions: Collection[str] = ...,
) -> CancelResult: ...


@overload
async def request_cancel(
    store: _CancelStore,
    clock: Clock,
    run_id: str,
    *,
    if_revision: int | Collection[int] | None = None,
    save_with: SaveWith,
    local_actions: Collection[str] = ...,
) -> CancelResult | Replayed: ...


async def request_cancel(
    store: _CancelStore,
    clock: Clock,
    run_id: str,
    *,
    if_revision: int | Collection[int] | None = None,
    save_with: SaveWith | None = None,
    local_actions: Collection[str] = frozenset({"mock"}),
) -> CancelResult | Replayed:
    """Record a cancel request (SPEC §4): a pending run is canceled at once.

    The caller notifies the engine afterwards so that a started run converges to ``canceled``.
    With ``save_with``, the record it makes of the result is saved with the cancel commit, or
    alone when there is nothing to write; if its key was already used for the same request,
    nothing is written and the stored outcome is returned (``Replayed``).

    Raises:
        RunNotFound: no such run.
        RunFinished: the run succeeded or failed.
        PreconditionFailed: the run's current revision is not ``if_revision`` (or not one of
            them, given several: an ``If-Match`` list).
        IdempotencyKeyReused: the key of ``save_with``'s record was used for another request.
    """
    for _ in range(_MAX_CANCEL_TRIES):
        snapshot = await store.load_run(run_id)
        run = snapshot.run
        if if_revision is not None and not _at(run.revision, if_revision):
            raise PreconditionFailed(
                f"run {run_id!r} is at revision {run.revision}, not {_spelled(if_revision)}"
            )
        if run.status is RunStatus.CANCELED or run.cancel_requested:
            # Nothing to write but the outcome, which a retry with the same key must replay.
            result = CancelResult(snapshot, already_canceled=run.status is RunStatus.CANCELED)
            if save_with is not None:
                replayed = await store.save_outcome(save_with(result))
                if replayed is not None:
                    return replayed
            return result
        if run.status.is_terminal:
            raise RunFinished(run_id, run.status.value)
        commit, after = cancel_commit(snapshot, now=clock.now(), local_actions=local_actions)
        result = CancelResult(after, already_canceled=False, commit=commit)
        try:
            replayed = await store.commit(commit, None if save_with is None else save_with(result))
        except RevisionConflict:
            if if_revision is not None:
                raise PreconditionFailed(f"run {run_id!r} changed concurrently") from None
            continue
        return result if replayed is None else replayed
    raise RevisionConflict(run_id, -1)


def _at(revision: int, expected: int | Collection[int]) -> bool:
    return revision == expected if isinstance(expected, int) else revision in expected


def _spelled(expected: int | Collection[int]) -> str:
    if isinstance(expected, int):
        return str(expected)
    return " or ".join(str(r) for r in sorted(expected)) or "a revision the request names"
