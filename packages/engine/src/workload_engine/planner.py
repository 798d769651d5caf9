"""The functional core of execution: from a run's state and new facts, the next commit.

:func:`plan` is pure. Given a :class:`~workload_domain.records.RunSnapshot`, the compiled
workflow, the current time and what was observed since the last commit (finished attempts,
granted concurrency slots), it returns the one commit that moves the run forward and the
effects to perform *after* that commit succeeds (attempts to launch, slots to request or
release, when to wake up). Replaying the same facts onto a re-read snapshot after a revision
conflict is therefore safe.

Actions are *local* (executed in this process by the runner, under a concurrency slot: the
mock executor) or *remote* (SPEC §10): a ready remote task gets a ``queued`` attempt at once,
with no slot, and a worker claims it. The runner plans with what it executes; anyone else (a
worker's report, the lease reaper, a cancel) plans without, and then leaves local attempts
alone and starts none.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from workload_domain.compiler import CompiledWorkflow
from workload_domain.definition import TaskSpec
from workload_domain.events import EventType
from workload_domain.leases import LEASE_EXPIRED, SCHEDULE_TO_START_TIMED_OUT
from workload_domain.records import (
    ExecutorRequest,
    RunCommit,
    RunSnapshot,
    TaskError,
    TaskRecord,
)
from workload_domain.retry import next_attempt_at, should_retry
from workload_domain.statuses import AttemptStatus, RunStatus, TaskStatus
from workload_engine._working_run import AttemptKey, WorkingRun, settle_run
from workload_engine.approval_planning import ApprovalWait, await_approvals
from workload_engine.cancellation import cancel_everything

__all__ = [
    "INTERRUPTED_ERROR",
    "LEASE_EXPIRED_ERROR",
    "SCHEDULE_TO_START_ERROR",
    "TIMED_OUT_ERROR",
    "ApprovalWait",
    "AttemptOutcome",
    "Launch",
    "Observation",
    "Plan",
    "plan",
]

INTERRUPTED_ERROR = TaskError(
    "interrupted", "the attempt was interrupted: its coordinator stopped executing", True
)
TIMED_OUT_ERROR = TaskError("attempt_timed_out", "the attempt exceeded timeout_seconds", True)
LEASE_EXPIRED_ERROR = TaskError(
    LEASE_EXPIRED, "the worker did not heartbeat within heartbeat_timeout_seconds", True
)
SCHEDULE_TO_START_ERROR = TaskError(
    SCHEDULE_TO_START_TIMED_OUT,
    "no worker claimed the attempt within schedule_to_start_timeout_seconds",
    False,
)


@dataclass(frozen=True, slots=True)
class AttemptOutcome:
    """How an attempt ended (observed, not yet committed): executed here, or reported."""

    task_key: str
    attempt: int
    status: AttemptStatus
    finished_at: datetime
    output: dict[str, Any] | None = None
    error: TaskError | None = None
    report_hash: str | None = None
    """For a worker's report: the hash that makes an identical retry answer 200."""

    @property
    def key(self) -> AttemptKey:
        """The attempt's identity within the run."""
        return (self.task_key, self.attempt)


Observation = AttemptOutcome | ApprovalWait
"""What a runner observed since its last commit."""


@dataclass(frozen=True, slots=True)
class Launch:
    """An attempt to execute once its commit succeeded."""

    request: ExecutorRequest
    deadline: datetime


@dataclass(frozen=True, slots=True)
class Plan:
    """The next commit of a run and what to do after it succeeds."""

    commit: RunCommit | None
    after: RunSnapshot
    launches: tuple[Launch, ...]
    wanted_slots: tuple[str, ...]
    unused_slots: frozenset[str]
    wake_at: datetime | None

    @property
    def finished(self) -> bool:
        """Whether the run is terminal after this plan."""
        return self.after.run.status.is_terminal


def plan(
    snapshot: RunSnapshot,
    workflow: CompiledWorkflow,
    *,
    now: datetime,
    outcomes: Sequence[Observation] = (),
    slots: Collection[str] = (),
    executing: Collection[AttemptKey] | None = None,
    recovering: bool = False,
    local_actions: Collection[str] = frozenset({"mock"}),
    resumable_actions: Collection[str] = frozenset(),
    executor_id: str | None = None,
) -> Plan:
    """Decide the next commit of a run.

    Args:
        snapshot: the run as last read or committed.
        workflow: the compiled definition of the run's version.
        now: the current time; every timestamp written by this commit uses it.
        outcomes: attempts that ended since the last commit (executed here, or reported).
        slots: keys of tasks for which this process holds a concurrency slot.
        executing: for the runner, the local attempts it is executing right now: a live
            local attempt that is neither executing nor in ``outcomes`` was left by a stopped
            coordinator, and is written ``interrupted`` (it follows the retry rule). None for
            every other planner, which leaves local attempts alone.
        recovering: this process took the run over from a stopped coordinator; record it.
        local_actions: the actions executed in this process; every other one is remote.
        resumable_actions: local actions whose attempts a new coordinator *resumes* rather
            than interrupts (``agent``, SPEC §11: its loop replays its journal). The runner
            launches such an attempt again, with the same number, once it has a slot.
        executor_id: the ``replica_id`` of the process that executes what this plan launches
            (recorded as the attempts' ``executed_by``, SPEC §6).
    """
    working = WorkingRun(snapshot, now)
    if working.run.status.is_terminal:
        return _plan(working, workflow, slots, launches=(), wanted=())

    launches: list[Launch] = []
    wanted: list[str] = []  # in topological order, so slots are requested deterministically
    if executing is not None and not working.run.cancel_requested:
        known = {o.key for o in outcomes} | set(executing)
        left = [k for k, a in working.live.items() if k not in known and a.action in local_actions]
        resumed = [k for k in left if working.live[k].action in resumable_actions]
        orphans = [k for k in left if k not in resumed]
        if recovering and working.run.status is not RunStatus.PENDING:
            data = {"interrupted_attempts": len(orphans)}
            if resumed:  # agent attempts (SPEC §11): resumed from their journals
                data["resumed_attempts"] = len(resumed)
            working.emit(EventType.RUN_RECOVERED, data=data)
        for key in sorted(orphans, key=lambda k: working.positions[k[0]]):
            working.end_attempt(key, AttemptStatus.INTERRUPTED, now, error=INTERRUPTED_ERROR)
            working.emit(
                EventType.ATTEMPT_INTERRUPTED,
                key[0],
                key[1],
                {"error": INTERRUPTED_ERROR.to_json()},
            )
            _after_failure(working, workflow, key[0], INTERRUPTED_ERROR, now)

    if working.run.cancel_requested:
        # The cancel was committed while these attempts were live: it cancels them (SPEC §4),
        # and an outcome that reached the runner after it is not recorded — as a remote
        # attempt's late report is refused (409 ``lease_lost``, reason ``canceled``).
        cancel_everything(working)
        return _plan(working, workflow, slots, launches=(), wanted=())

    for outcome in outcomes:
        if outcome.key not in working.live:
            continue
        if isinstance(outcome, ApprovalWait):
            await_approvals(working, outcome)
        else:
            _apply_outcome(working, workflow, outcome)

    if working.run.status is RunStatus.PENDING:
        working.set_run(RunStatus.RUNNING, started_at=now)
        working.emit(EventType.RUN_STARTED)

    if executing is not None:
        # Resumable attempts not executing here — left by a stopped coordinator, or paused on
        # approvals that are now decided — are launched again with the same number.
        for key, attempt in sorted(
            working.live.items(), key=lambda kv: working.positions[kv[0][0]]
        ):
            if (
                attempt.action not in resumable_actions
                or key in executing
                or working.task(key[0]).status is not TaskStatus.RUNNING
                or working.pending_approvals(key)
            ):
                continue
            if key[0] not in slots:
                wanted.append(key[0])
                continue
            spec = workflow.task(key[0])
            if attempt.executed_by != executor_id:  # resumed by another process
                working.set_attempt(key, executed_by=executor_id)
            paused = timedelta(seconds=attempt.paused_seconds)
            deadline = attempt.started_at + timedelta(seconds=spec.timeout_seconds) + paused
            launches.append(
                _launch(
                    working,
                    workflow,
                    spec,
                    attempt=key[1],
                    started_at=attempt.started_at,
                    deadline=deadline,
                    paused_seconds=attempt.paused_seconds,
                )
            )

    for i in workflow.topological_order:
        task = working.tasks[i]
        if not _is_ready(working, workflow, i, task):
            continue
        spec = workflow.tasks[i]
        if spec.action not in local_actions:
            _queue(working, spec)
            continue
        if task.task_key not in slots:
            wanted.append(task.task_key)
            continue
        attempt = working.start_attempt(
            task.task_key,
            AttemptStatus.RUNNING,
            action=spec.action,
            queue=spec.queue,
            executed_by=executor_id,
        )
        working.emit(EventType.ATTEMPT_STARTED, task.task_key, attempt.attempt)
        deadline = now + timedelta(seconds=spec.timeout_seconds)
        launches.append(
            _launch(
                working, workflow, spec, attempt=attempt.attempt, started_at=now, deadline=deadline
            )
        )

    settle_run(working, has_ready=bool(wanted))
    return _plan(working, workflow, slots, launches=tuple(launches), wanted=tuple(wanted))


def _launch(
    working: WorkingRun,
    workflow: CompiledWorkflow,
    spec: TaskSpec,
    *,
    attempt: int,
    started_at: datetime,
    deadline: datetime,
    paused_seconds: float = 0.0,
) -> Launch:
    """Execute attempt ``attempt`` of ``spec`` here (a new one, or one being resumed)."""
    return Launch(
        ExecutorRequest(
            run_id=working.run.run_id,
            task_key=spec.key,
            attempt=attempt,
            action=spec.action,
            input=spec.input,
            run_input=working.run.input,
            upstream=upstream(working.tasks, workflow, workflow.index[spec.key]),
            started_at=started_at,
            deadline=deadline,
            queue=spec.queue,
            heartbeat_timeout_seconds=spec.heartbeat_timeout_seconds,
            schedule_to_start_timeout_seconds=spec.schedule_to_start_timeout_seconds,
            paused_seconds=paused_seconds,
        ),
        deadline=deadline,
    )


def _queue(working: WorkingRun, spec: TaskSpec) -> None:
    """A remote task's new attempt waits in its queue for a worker (no slot: workers are)."""
    deadline = spec.schedule_to_start_timeout_seconds
    attempt = working.start_attempt(
        spec.key,
        AttemptStatus.QUEUED,
        action=spec.action,
        queue=spec.queue,
        heartbeat_timeout_seconds=spec.heartbeat_timeout_seconds,
        timeout_seconds=spec.timeout_seconds,
        schedule_deadline=None if deadline is None else working.now + timedelta(seconds=deadline),
    )
    working.emit(EventType.ATTEMPT_QUEUED, spec.key, attempt.attempt, {"queue": spec.queue})


def upstream(tasks: Sequence[TaskRecord], workflow: CompiledWorkflow, index: int) -> dict[str, Any]:
    """``{dependency key: its output}`` for the task at ``index`` (SPEC §10)."""
    return {
        tasks[d].task_key: tasks[d].output if tasks[d].output is not None else {}
        for d in workflow.dependencies[index]
    }


def _plan(
    working: WorkingRun,
    workflow: CompiledWorkflow,
    slots: Iterable[str],
    *,
    launches: tuple[Launch, ...],
    wanted: tuple[str, ...],
) -> Plan:
    commit, after = working.result()
    started = {launch.request.task_key for launch in launches}
    waiting = [
        t.next_attempt_at
        for t in after.tasks
        if t.status is TaskStatus.WAITING_RETRY
        and t.next_attempt_at is not None
        and t.task_key not in wanted
    ]
    return Plan(
        commit=commit,
        after=after,
        launches=launches,
        wanted_slots=wanted,
        unused_slots=frozenset(s for s in slots if s not in started),
        wake_at=min(waiting) if waiting and not after.run.status.is_terminal else None,
    )


def _is_ready(working: WorkingRun, workflow: CompiledWorkflow, i: int, task: TaskRecord) -> bool:
    if task.status is TaskStatus.WAITING_RETRY:
        return task.next_attempt_at is None or task.next_attempt_at <= working.now
    if task.status is not TaskStatus.PENDING:
        return False
    return all(working.tasks[d].status is TaskStatus.SUCCEEDED for d in workflow.dependencies[i])


def _apply_outcome(
    working: WorkingRun, workflow: CompiledWorkflow, outcome: AttemptOutcome
) -> None:
    key, number = outcome.task_key, outcome.attempt
    working.end_attempt(
        outcome.key,
        outcome.status,
        outcome.finished_at,
        output=outcome.output,
        error=outcome.error,
        report_hash=outcome.report_hash,
    )
    if outcome.status is AttemptStatus.SUCCEEDED:
        working.emit(EventType.ATTEMPT_SUCCEEDED, key, number)
        working.set_task(
            key,
            TaskStatus.SUCCEEDED,
            finished_at=outcome.finished_at,
            output=outcome.output,
            error=None,
        )
        working.emit(EventType.TASK_SUCCEEDED, key, number)
        return
    error = outcome.error or TIMED_OUT_ERROR
    working.emit(_ENDED_EVENT[outcome.status], key, number, {"error": error.to_json()})
    _after_failure(working, workflow, key, error, outcome.finished_at)


_ENDED_EVENT = {
    AttemptStatus.FAILED: EventType.ATTEMPT_FAILED,
    AttemptStatus.TIMED_OUT: EventType.ATTEMPT_TIMED_OUT,
    AttemptStatus.INTERRUPTED: EventType.ATTEMPT_INTERRUPTED,
}


def _after_failure(
    working: WorkingRun,
    workflow: CompiledWorkflow,
    key: str,
    error: TaskError,
    finished_at: datetime,
) -> None:
    """The retry rule of SPEC §4, then skipping everything downstream of a failed task."""
    task = working.task(key)
    policy = workflow.task(key).retry
    if should_retry(policy, task.attempt_count, retryable=error.retryable):
        due = next_attempt_at(policy, task.attempt_count, finished_at)
        working.set_task(key, TaskStatus.WAITING_RETRY, next_attempt_at=due, error=error)
        working.emit(
            EventType.TASK_WAITING_RETRY,
            key,
            task.attempt_count,
            {"next_attempt_at": due.isoformat()},
        )
        return
    working.set_task(key, TaskStatus.FAILED, finished_at=finished_at, error=error)
    working.emit(EventType.TASK_FAILED, key, task.attempt_count, {"error": error.to_json()})
    for i in sorted(workflow.descendants(workflow.index[key])):
        downstream = working.tasks[i]
        if downstream.status is TaskStatus.PENDING:
            working.set_task(downstream.task_key, TaskStatus.SKIPPED, finished_at=working.now)
            working.emit(EventType.TASK_SKIPPED, downstream.task_key, data={"because": key})
