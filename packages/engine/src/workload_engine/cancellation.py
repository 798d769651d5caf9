"""Cancelling a run: the commit that records a cancel request, and cancelling everything.

Pure, as the planner is: :func:`cancel_commit` is made by whoever receives the request;
:func:`~workload_engine.planner.plan` cancels everything once the run's local attempts stopped.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from datetime import datetime

from workload_domain.approvals import ApprovalStatus
from workload_domain.events import EventType
from workload_domain.records import RunCommit, RunSnapshot
from workload_domain.statuses import AttemptStatus, RunStatus, TaskStatus
from workload_engine._working_run import WorkingRun

__all__ = ["cancel_commit", "cancel_everything"]


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
    working = WorkingRun(snapshot, now)
    working.set_run(cancel_requested=True)
    working.emit(EventType.RUN_CANCEL_REQUESTED)
    if not any(a.action in local_actions for a in working.live.values()):
        cancel_everything(working)
    else:
        # Local attempts are the runner's to stop; remote ones end now all the same, so that
        # their workers' reports and heartbeats are refused (409, reason canceled) at once,
        # and pending approvals too: none can be decided between the request and the runner.
        _cancel_pending_approvals(working)
        remote = [k for k, a in working.live.items() if a.action not in local_actions]
        for key in sorted(remote, key=lambda k: working.positions[k[0]]):
            working.end_attempt(key, AttemptStatus.CANCELED, now)
            working.emit(EventType.ATTEMPT_CANCELED, key[0], key[1])
            working.set_task(key[0], TaskStatus.CANCELED, finished_at=now, next_attempt_at=None)
            working.emit(EventType.TASK_CANCELED, key[0])
    commit, after = working.result()
    assert commit is not None  # the request itself is always a change
    return replace(commit, announce=True), after


def cancel_everything(working: WorkingRun) -> None:
    """Cancel every pending approval, live attempt and open task, then the run (SPEC §4)."""
    _cancel_pending_approvals(working)
    for key in sorted(working.live, key=lambda k: working.positions[k[0]]):
        working.end_attempt(key, AttemptStatus.CANCELED, working.now)
        working.emit(EventType.ATTEMPT_CANCELED, key[0], key[1])
    for task in list(working.tasks):
        if not task.status.is_terminal:
            working.set_task(
                task.task_key, TaskStatus.CANCELED, finished_at=working.now, next_attempt_at=None
            )
            working.emit(EventType.TASK_CANCELED, task.task_key)
    working.set_run(RunStatus.CANCELED, finished_at=working.now)
    working.emit(EventType.RUN_CANCELED)


def _cancel_pending_approvals(working: WorkingRun) -> None:
    pending = [a for a in working.approvals.values() if a.status is ApprovalStatus.PENDING]
    for approval in sorted(pending, key=lambda a: (working.positions[a.task_key], a.requested_at)):
        working.set_approval(
            replace(approval, status=ApprovalStatus.CANCELED, decided_at=working.now)
        )
        working.emit(
            EventType.APPROVAL_CANCELED,
            approval.task_key,
            approval.attempt,
            {"approval_id": approval.approval_id},
        )
