"""A copy-on-write working state of one run, recording what a plan changed (for its commit)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from workload_domain.approvals import ApprovalRecord, ApprovalStatus
from workload_domain.events import EventType
from workload_domain.evolve import evolve
from workload_domain.ids import attempt_id
from workload_domain.jsonvalues import JsonObject
from workload_domain.records import (
    AttemptRecord,
    EventRecord,
    RunCommit,
    RunSnapshot,
    TaskError,
    TaskRecord,
)
from workload_domain.statuses import AttemptStatus, RunStatus, TaskStatus, check_transition

__all__ = ["AttemptKey", "WorkingRun", "run_output", "settle_run"]

AttemptKey = tuple[str, int]
"""An attempt's identity within its run: (task key, attempt number)."""


class WorkingRun:
    """A copy-on-write working state of one run that records what changed."""

    def __init__(self, snapshot: RunSnapshot, now: datetime) -> None:
        self.before = snapshot
        self.now = now
        self.run = snapshot.run
        self.tasks = list(snapshot.tasks)
        self.positions = {t.task_key: i for i, t in enumerate(self.tasks)}
        self.live = {(a.task_key, a.attempt): a for a in snapshot.live_attempts}
        self.changed_tasks: set[int] = set()
        self.changed_attempts: dict[AttemptKey, AttemptRecord] = {}
        self.events: list[EventRecord] = []
        self.sequence = snapshot.last_sequence
        self.approvals = {a.approval_id: a for a in snapshot.approvals}
        """The approvals of the run's live attempts, by id (SPEC §11)."""
        self.changed_approvals: dict[str, ApprovalRecord] = {}

    def emit(
        self,
        type_: EventType,
        task_key: str | None = None,
        attempt: int | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        self.sequence += 1
        self.events.append(
            EventRecord(self.sequence, type_, self.now, task_key, attempt, data or {})
        )

    def set_run(self, status: RunStatus | None = None, **changes: Any) -> None:
        if status is not None and status is not self.run.status:
            changes["status"] = check_transition(self.run.status, status)
        if changes:
            self.run = evolve(self.run, **changes)

    def task(self, key: str) -> TaskRecord:
        return self.tasks[self.positions[key]]

    def set_task(self, key: str, status: TaskStatus | None = None, **changes: Any) -> TaskRecord:
        i = self.positions[key]
        current = self.tasks[i]
        if status is not None and status is not current.status:
            changes["status"] = check_transition(current.status, status)
        self.tasks[i] = evolve(current, **changes)
        self.changed_tasks.add(i)
        return self.tasks[i]

    def end_attempt(
        self,
        key: AttemptKey,
        status: AttemptStatus,
        finished_at: datetime,
        *,
        output: dict[str, Any] | None = None,
        error: TaskError | None = None,
        report_hash: str | None = None,
    ) -> None:
        attempt = self.live.pop(key)
        ended = evolve(
            attempt,
            status=check_transition(attempt.status, status),
            finished_at=finished_at,
            output=output,
            error=error,
            report_hash=report_hash,
        )
        self.changed_attempts[key] = ended

    def start_attempt(self, key: str, status: AttemptStatus, **fields: Any) -> AttemptRecord:
        """A new attempt of task ``key``: ``running`` (in-process) or ``queued`` (remote)."""
        task = self.task(key)
        number = task.attempt_count + 1
        attempt = AttemptRecord(
            key,
            number,
            status,
            self.now,
            attempt_id=attempt_id(self.run.run_id, key, number),
            **fields,
        )
        self.live[(key, number)] = attempt
        self.changed_attempts[(key, number)] = attempt
        self.set_task(
            key,
            TaskStatus.RUNNING,
            attempt_count=number,
            next_attempt_at=None,
            started_at=task.started_at or self.now,
        )
        return attempt

    def set_attempt(self, key: AttemptKey, **changes: Any) -> None:
        """Change fields of a live attempt (not its status)."""
        attempt = evolve(self.live[key], **changes)
        self.live[key] = attempt
        self.changed_attempts[key] = attempt

    def set_approval(self, approval: ApprovalRecord) -> None:
        """Add an approval, or record its decision."""
        self.approvals[approval.approval_id] = approval
        self.changed_approvals[approval.approval_id] = approval

    def pending_approvals(self, key: AttemptKey) -> list[ApprovalRecord]:
        """The approvals an attempt still waits for."""
        return [
            a
            for a in self.approvals.values()
            if (a.task_key, a.attempt) == key and a.status is ApprovalStatus.PENDING
        ]

    def changed(self) -> bool:
        return bool(
            self.events or self.changed_tasks or self.changed_attempts or self.changed_approvals
        ) or (self.run != self.before.run)

    def result(self) -> tuple[RunCommit | None, RunSnapshot]:
        if not self.changed():
            return None, self.before
        run = evolve(self.run, revision=self.before.run.revision + 1, updated_at=self.now)
        commit = RunCommit(
            expected_revision=self.before.run.revision,
            run=run,
            tasks=tuple(self.tasks[i] for i in sorted(self.changed_tasks)),
            attempts=tuple(self.changed_attempts.values()),
            events=tuple(self.events),
            approvals=tuple(self.changed_approvals.values()),
        )
        live = {(a.task_key, a.attempt) for a in self.live.values()}
        after = RunSnapshot(
            run=run,
            tasks=tuple(self.tasks),
            live_attempts=tuple(self.live.values()),
            last_sequence=self.sequence,
            approvals=tuple(a for a in self.approvals.values() if (a.task_key, a.attempt) in live),
        )
        return commit, after


def run_output(tasks: Sequence[TaskRecord]) -> JsonObject:
    """A succeeded run's result: ``{task_key: output}`` of its sinks (SPEC §6).

    The sinks are the tasks no other task depends on; a sink without an output counts ``{}``.
    """
    needed = {key for t in tasks for key in t.depends_on}
    return {t.task_key: t.output or {} for t in tasks if t.task_key not in needed}


def settle_run(working: WorkingRun, *, has_ready: bool) -> None:
    """Derive the run's status from its tasks (SPEC §4)."""
    statuses = [t.status for t in working.tasks]
    if all(s.is_terminal for s in statuses):
        if all(s is TaskStatus.SUCCEEDED for s in statuses):
            working.set_run(
                RunStatus.SUCCEEDED, finished_at=working.now, output=run_output(working.tasks)
            )
            working.emit(EventType.RUN_SUCCEEDED)
        else:
            failed = [t.task_key for t in working.tasks if t.status is TaskStatus.FAILED]
            working.set_run(RunStatus.FAILED, finished_at=working.now)
            working.emit(EventType.RUN_FAILED, data={"failed_tasks": failed})
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
    if target is not working.run.status and (
        working.events or working.run.status is RunStatus.PENDING
    ):
        working.set_run(target)
