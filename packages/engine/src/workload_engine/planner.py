"""The functional core of execution: from a run's state and new facts, the next commit.

:func:`plan` is pure. Given a :class:`~workload_domain.model.RunSnapshot`, the compiled
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
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from workload_domain.approvals import ApprovalRecord, ApprovalStatus
from workload_domain.compiler import CompiledWorkflow
from workload_domain.definition import TaskSpec
from workload_domain.events import EventType
from workload_domain.jsonvalues import JsonObject
from workload_domain.leases import LEASE_EXPIRED, SCHEDULE_TO_START_TIMED_OUT
from workload_domain.model import (
    ExecutorRequest,
    RunCommit,
    RunSnapshot,
    TaskError,
    TaskRecord,
)
from workload_domain.retry import next_attempt_at, should_retry
from workload_domain.statuses import AttemptStatus, RunStatus, TaskStatus
from workload_engine._draft import AttemptKey, Draft

__all__ = [
    "DECISION_EVENTS",
    "INTERRUPTED_ERROR",
    "LEASE_EXPIRED_ERROR",
    "SCHEDULE_TO_START_ERROR",
    "TIMED_OUT_ERROR",
    "ApprovalWait",
    "AttemptOutcome",
    "Launch",
    "Observation",
    "Plan",
    "cancel_commit",
    "decision_commit",
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


@dataclass(frozen=True, slots=True)
class ApprovalWait:
    """An agent attempt paused on tool approvals (observed, not yet committed, SPEC §11)."""

    task_key: str
    attempt: int
    approvals: tuple[ApprovalRecord, ...]

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
    draft = Draft(snapshot, now)
    if draft.run.status.is_terminal:
        return _plan(draft, workflow, slots, launches=(), wanted=())

    launches: list[Launch] = []
    wanted: list[str] = []  # in topological order, so slots are requested deterministically
    if executing is not None and not draft.run.cancel_requested:
        known = {o.key for o in outcomes} | set(executing)
        left = [k for k, a in draft.live.items() if k not in known and a.action in local_actions]
        resumed = [k for k in left if draft.live[k].action in resumable_actions]
        orphans = [k for k in left if k not in resumed]
        if recovering and draft.run.status is not RunStatus.PENDING:
            data = {"interrupted_attempts": len(orphans)}
            if resumed:  # agent attempts (SPEC §11): resumed from their journals
                data["resumed_attempts"] = len(resumed)
            draft.emit(EventType.RUN_RECOVERED, data=data)
        for key in sorted(orphans, key=lambda k: draft.positions[k[0]]):
            draft.end_attempt(key, AttemptStatus.INTERRUPTED, now, error=INTERRUPTED_ERROR)
            draft.emit(
                EventType.ATTEMPT_INTERRUPTED,
                key[0],
                key[1],
                {"error": INTERRUPTED_ERROR.to_json()},
            )
            _after_failure(draft, workflow, key[0], INTERRUPTED_ERROR, now)

    if draft.run.cancel_requested:
        # The cancel was committed while these attempts were live: it cancels them (SPEC §4),
        # and an outcome that reached the runner after it is not recorded — as a remote
        # attempt's late report is refused (409 ``lease_lost``, reason ``canceled``).
        _cancel_everything(draft)
        return _plan(draft, workflow, slots, launches=(), wanted=())

    for outcome in outcomes:
        if outcome.key not in draft.live:
            continue
        if isinstance(outcome, ApprovalWait):
            _await_approvals(draft, outcome)
        else:
            _apply_outcome(draft, workflow, outcome)

    if draft.run.status is RunStatus.PENDING:
        draft.set_run(RunStatus.RUNNING, started_at=now)
        draft.emit(EventType.RUN_STARTED)

    if executing is not None:
        # Resumable attempts not executing here — left by a stopped coordinator, or paused on
        # approvals that are now decided — are launched again with the same number.
        for key, attempt in sorted(draft.live.items(), key=lambda kv: draft.positions[kv[0][0]]):
            if (
                attempt.action not in resumable_actions
                or key in executing
                or draft.task(key[0]).status is not TaskStatus.RUNNING
                or draft.pending_approvals(key)
            ):
                continue
            if key[0] not in slots:
                wanted.append(key[0])
                continue
            spec = workflow.task(key[0])
            if attempt.executed_by != executor_id:  # resumed by another process
                draft.set_attempt(key, executed_by=executor_id)
            paused = timedelta(seconds=attempt.paused_seconds)
            deadline = attempt.started_at + timedelta(seconds=spec.timeout_seconds) + paused
            launches.append(
                _launch(
                    draft,
                    workflow,
                    spec,
                    attempt=key[1],
                    started_at=attempt.started_at,
                    deadline=deadline,
                    paused_seconds=attempt.paused_seconds,
                )
            )

    for i in workflow.topological_order:
        task = draft.tasks[i]
        if not _is_ready(draft, workflow, i, task):
            continue
        spec = workflow.tasks[i]
        if spec.action not in local_actions:
            _queue(draft, spec)
            continue
        if task.task_key not in slots:
            wanted.append(task.task_key)
            continue
        attempt = draft.start_attempt(
            task.task_key,
            AttemptStatus.RUNNING,
            action=spec.action,
            queue=spec.queue,
            executed_by=executor_id,
        )
        draft.emit(EventType.ATTEMPT_STARTED, task.task_key, attempt.attempt)
        deadline = now + timedelta(seconds=spec.timeout_seconds)
        launches.append(
            _launch(
                draft, workflow, spec, attempt=attempt.attempt, started_at=now, deadline=deadline
            )
        )

    _settle_run(draft, has_ready=bool(wanted))
    return _plan(draft, workflow, slots, launches=tuple(launches), wanted=tuple(wanted))


def _launch(
    draft: Draft,
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
            run_id=draft.run.run_id,
            task_key=spec.key,
            attempt=attempt,
            action=spec.action,
            input=spec.input,
            run_input=draft.run.input,
            upstream=upstream(draft.tasks, workflow, workflow.index[spec.key]),
            started_at=started_at,
            deadline=deadline,
            queue=spec.queue,
            heartbeat_timeout_seconds=spec.heartbeat_timeout_seconds,
            schedule_to_start_timeout_seconds=spec.schedule_to_start_timeout_seconds,
            paused_seconds=paused_seconds,
        ),
        deadline=deadline,
    )


def _queue(draft: Draft, spec: TaskSpec) -> None:
    """A remote task's new attempt waits in its queue for a worker (no slot: workers are)."""
    deadline = spec.schedule_to_start_timeout_seconds
    attempt = draft.start_attempt(
        spec.key,
        AttemptStatus.QUEUED,
        action=spec.action,
        queue=spec.queue,
        heartbeat_timeout_seconds=spec.heartbeat_timeout_seconds,
        timeout_seconds=spec.timeout_seconds,
        schedule_deadline=None if deadline is None else draft.now + timedelta(seconds=deadline),
    )
    draft.emit(EventType.ATTEMPT_QUEUED, spec.key, attempt.attempt, {"queue": spec.queue})


def upstream(tasks: Sequence[TaskRecord], workflow: CompiledWorkflow, index: int) -> dict[str, Any]:
    """``{dependency key: its output}`` for the task at ``index`` (SPEC §10)."""
    return {
        tasks[d].task_key: tasks[d].output if tasks[d].output is not None else {}
        for d in workflow.dependencies[index]
    }


def cancel_commit(
    snapshot: RunSnapshot,
    *,
    now: datetime,
    local_actions: Collection[str] = frozenset({"mock"}),
) -> tuple[RunCommit, RunSnapshot]:
    """The commit that records a cancel request on a run that is not terminal.

    Remote attempts are canceled in the same commit, with their tasks, even while local ones
    still run (SPEC §10: the run converges without waiting for their workers, which learn it
    at their next report or heartbeat: 409, reason ``canceled``). A run with no local
    attempt executing — a ``pending`` run, or one whose live attempts are all remote — is
    canceled at once; otherwise the request is recorded and the runner, once it has stopped
    its local attempts, converges the run to ``canceled``. Returns the commit and the run's
    state after it.
    """
    draft = Draft(snapshot, now)
    draft.set_run(cancel_requested=True)
    draft.emit(EventType.RUN_CANCEL_REQUESTED)
    if not any(a.action in local_actions for a in draft.live.values()):
        _cancel_everything(draft)
    else:
        # Local attempts are the runner's to stop; remote ones end now all the same, so that
        # their workers' reports and heartbeats are refused (409, reason canceled) at once.
        remote = [k for k, a in draft.live.items() if a.action not in local_actions]
        for key in sorted(remote, key=lambda k: draft.positions[k[0]]):
            draft.end_attempt(key, AttemptStatus.CANCELED, now)
            draft.emit(EventType.ATTEMPT_CANCELED, key[0], key[1])
            draft.set_task(key[0], TaskStatus.CANCELED, finished_at=now, next_attempt_at=None)
            draft.emit(EventType.TASK_CANCELED, key[0])
    commit, after = draft.result()
    assert commit is not None  # the request itself is always a change
    return replace(commit, announce=True), after


def _plan(
    draft: Draft,
    workflow: CompiledWorkflow,
    slots: Iterable[str],
    *,
    launches: tuple[Launch, ...],
    wanted: tuple[str, ...],
) -> Plan:
    commit, after = draft.result()
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


def _is_ready(draft: Draft, workflow: CompiledWorkflow, i: int, task: TaskRecord) -> bool:
    if task.status is TaskStatus.WAITING_RETRY:
        return task.next_attempt_at is None or task.next_attempt_at <= draft.now
    if task.status is not TaskStatus.PENDING:
        return False
    return all(draft.tasks[d].status is TaskStatus.SUCCEEDED for d in workflow.dependencies[i])


def _apply_outcome(draft: Draft, workflow: CompiledWorkflow, outcome: AttemptOutcome) -> None:
    key, number = outcome.task_key, outcome.attempt
    draft.end_attempt(
        outcome.key,
        outcome.status,
        outcome.finished_at,
        output=outcome.output,
        error=outcome.error,
        report_hash=outcome.report_hash,
    )
    if outcome.status is AttemptStatus.SUCCEEDED:
        draft.emit(EventType.ATTEMPT_SUCCEEDED, key, number)
        draft.set_task(
            key,
            TaskStatus.SUCCEEDED,
            finished_at=outcome.finished_at,
            output=outcome.output,
            error=None,
        )
        draft.emit(EventType.TASK_SUCCEEDED, key, number)
        return
    error = outcome.error or TIMED_OUT_ERROR
    draft.emit(_ENDED_EVENT[outcome.status], key, number, {"error": error.to_json()})
    _after_failure(draft, workflow, key, error, outcome.finished_at)


_ENDED_EVENT = {
    AttemptStatus.FAILED: EventType.ATTEMPT_FAILED,
    AttemptStatus.TIMED_OUT: EventType.ATTEMPT_TIMED_OUT,
    AttemptStatus.INTERRUPTED: EventType.ATTEMPT_INTERRUPTED,
}


def _after_failure(
    draft: Draft, workflow: CompiledWorkflow, key: str, error: TaskError, finished_at: datetime
) -> None:
    """The retry rule of SPEC §4, then skipping everything downstream of a failed task."""
    task = draft.task(key)
    policy = workflow.task(key).retry
    if should_retry(policy, task.attempt_count, retryable=error.retryable):
        due = next_attempt_at(policy, task.attempt_count, finished_at)
        draft.set_task(key, TaskStatus.WAITING_RETRY, next_attempt_at=due, error=error)
        draft.emit(
            EventType.TASK_WAITING_RETRY,
            key,
            task.attempt_count,
            {"next_attempt_at": due.isoformat()},
        )
        return
    draft.set_task(key, TaskStatus.FAILED, finished_at=finished_at, error=error)
    draft.emit(EventType.TASK_FAILED, key, task.attempt_count, {"error": error.to_json()})
    for i in sorted(workflow.descendants(workflow.index[key])):
        downstream = draft.tasks[i]
        if downstream.status is TaskStatus.PENDING:
            draft.set_task(downstream.task_key, TaskStatus.SKIPPED, finished_at=draft.now)
            draft.emit(EventType.TASK_SKIPPED, downstream.task_key, data={"because": key})


def _cancel_everything(draft: Draft) -> None:
    pending = [a for a in draft.approvals.values() if a.status is ApprovalStatus.PENDING]
    for approval in sorted(pending, key=lambda a: (draft.positions[a.task_key], a.requested_at)):
        draft.set_approval(replace(approval, status=ApprovalStatus.CANCELED, decided_at=draft.now))
        draft.emit(
            EventType.APPROVAL_CANCELED,
            approval.task_key,
            approval.attempt,
            {"approval_id": approval.approval_id},
        )
    for key in sorted(draft.live, key=lambda k: draft.positions[k[0]]):
        draft.end_attempt(key, AttemptStatus.CANCELED, draft.now)
        draft.emit(EventType.ATTEMPT_CANCELED, key[0], key[1])
    for task in list(draft.tasks):
        if not task.status.is_terminal:
            draft.set_task(
                task.task_key, TaskStatus.CANCELED, finished_at=draft.now, next_attempt_at=None
            )
            draft.emit(EventType.TASK_CANCELED, task.task_key)
    draft.set_run(RunStatus.CANCELED, finished_at=draft.now)
    draft.emit(EventType.RUN_CANCELED)


def _settle_run(draft: Draft, *, has_ready: bool) -> None:
    """Derive the run's status from its tasks (SPEC §4)."""
    statuses = [t.status for t in draft.tasks]
    if all(s.is_terminal for s in statuses):
        if all(s is TaskStatus.SUCCEEDED for s in statuses):
            draft.set_run(
                RunStatus.SUCCEEDED, finished_at=draft.now, output=run_output(draft.tasks)
            )
            draft.emit(EventType.RUN_SUCCEEDED)
        else:
            failed = [t.task_key for t in draft.tasks if t.status is TaskStatus.FAILED]
            draft.set_run(RunStatus.FAILED, finished_at=draft.now)
            draft.emit(EventType.RUN_FAILED, data={"failed_tasks": failed})
        return
    if has_ready or TaskStatus.RUNNING in statuses:
        target = RunStatus.RUNNING
    elif TaskStatus.WAITING_APPROVAL in statuses:  # a person is awaited: it comes first
        target = RunStatus.WAITING_APPROVAL
    elif TaskStatus.WAITING_RETRY in statuses:
        target = RunStatus.WAITING_RETRY
    else:
        return
    # Every commit appends events (SPEC §4), and running <-> waiting_retry has none of its own:
    # the flip waits for a commit that has (a retry due but still waiting for a concurrency
    # slot stays waiting_retry until its attempt.started).
    if target is not draft.run.status and (draft.events or draft.run.status is RunStatus.PENDING):
        draft.set_run(target)


def run_output(tasks: Sequence[TaskRecord]) -> JsonObject:
    """A succeeded run's result: ``{task_key: output}`` of its sinks (SPEC §6).

    The sinks are the tasks no other task depends on; a sink without an output counts ``{}``.
    """
    needed = {key for t in tasks for key in t.depends_on}
    return {t.task_key: t.output or {} for t in tasks if t.task_key not in needed}


def _await_approvals(draft: Draft, wait: ApprovalWait) -> None:
    """An agent attempt asks for approvals: record the new ones; its task waits for them.

    An approval already recorded is not asked again (a replayed loop asks for the same ids);
    if every approval it asks for is decided already, the task stays ``running`` and the
    attempt is launched again at once.
    """
    for approval in wait.approvals:
        if approval.approval_id in draft.approvals:
            continue
        draft.set_approval(approval)
        draft.emit(
            EventType.APPROVAL_REQUESTED,
            wait.task_key,
            wait.attempt,
            {
                "approval_id": approval.approval_id,
                "tool": approval.tool,
                "tool_call_id": approval.tool_call_id,
                "expires_at": approval.expires_at.isoformat(),
            },
        )
    if not draft.pending_approvals(wait.key):
        return
    if draft.task(wait.task_key).status is not TaskStatus.WAITING_APPROVAL:
        draft.set_task(wait.task_key, TaskStatus.WAITING_APPROVAL)
        draft.emit(EventType.TASK_WAITING_APPROVAL, wait.task_key, wait.attempt)
    if draft.live[wait.key].paused_at is None:
        draft.set_attempt(wait.key, paused_at=draft.now)


DECISION_EVENTS = {
    ApprovalStatus.APPROVED: EventType.APPROVAL_APPROVED,
    ApprovalStatus.REJECTED: EventType.APPROVAL_REJECTED,
    ApprovalStatus.EXPIRED: EventType.APPROVAL_EXPIRED,
}


def decision_commit(
    snapshot: RunSnapshot,
    approval_id: str,
    status: ApprovalStatus,
    *,
    now: datetime,
    decided_by: str | None = None,
    comment: str | None = None,
) -> tuple[RunCommit, RunSnapshot] | None:
    """The commit that decides a pending approval (approved, rejected or expired).

    Once its attempt waits for no other approval, the task is ``running`` again, the time it
    waited is added to the attempt's ``paused_seconds``, and the runner launches the attempt
    again. None when the approval is not pending in ``snapshot``.
    """
    draft = Draft(snapshot, now)
    approval = draft.approvals.get(approval_id)
    if approval is None or approval.status is not ApprovalStatus.PENDING:
        return None
    decided = replace(
        approval, status=status, decided_by=decided_by, decided_at=now, comment=comment
    )
    draft.set_approval(decided)
    data: dict[str, Any] = {"approval_id": approval_id}
    if decided_by is not None:
        data["decided_by"] = decided_by
    draft.emit(DECISION_EVENTS[status], approval.task_key, approval.attempt, data)
    key = (approval.task_key, approval.attempt)
    attempt = draft.live.get(key)
    if (
        attempt is not None
        and not draft.pending_approvals(key)
        and draft.task(approval.task_key).status is TaskStatus.WAITING_APPROVAL
    ):
        waited = (now - attempt.paused_at).total_seconds() if attempt.paused_at else 0.0
        draft.set_attempt(
            key, paused_at=None, paused_seconds=attempt.paused_seconds + max(waited, 0.0)
        )
        draft.set_task(approval.task_key, TaskStatus.RUNNING)
    _settle_run(draft, has_ready=False)
    commit, after = draft.result()
    assert commit is not None  # the decision itself is a change
    return replace(commit, announce=True), after
