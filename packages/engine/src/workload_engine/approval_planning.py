"""The planner's part in approvals (SPEC §11): an agent attempt waiting, and a decision.

:func:`~workload_engine.planner.plan` records the approvals an agent attempt asks for
(:func:`await_approvals`); :func:`decision_commit` is the commit that decides one. Both are pure,
as the planner is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from workload_domain.approvals import ApprovalRecord, ApprovalStatus
from workload_domain.events import EventType
from workload_domain.records import RunCommit, RunSnapshot
from workload_domain.statuses import TaskStatus
from workload_engine._working_run import AttemptKey, WorkingRun, settle_run

__all__ = ["DECISION_EVENTS", "ApprovalWait", "await_approvals", "decision_commit"]


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


def await_approvals(working: WorkingRun, wait: ApprovalWait) -> None:
    """An agent attempt asks for approvals: record the new ones; its task waits for them.

    An approval already recorded is not asked again (a replayed loop asks for the same ids);
    if every approval it asks for is decided already, the task stays ``running`` and the
    attempt is launched again at once.
    """
    for approval in wait.approvals:
        if approval.approval_id in working.approvals:
            continue
        working.set_approval(approval)
        working.emit(
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
    if not working.pending_approvals(wait.key):
        return
    if working.task(wait.task_key).status is not TaskStatus.WAITING_APPROVAL:
        working.set_task(wait.task_key, TaskStatus.WAITING_APPROVAL)
        working.emit(EventType.TASK_WAITING_APPROVAL, wait.task_key, wait.attempt)
    if working.live[wait.key].paused_at is None:
        working.set_attempt(wait.key, paused_at=working.now)


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
    working = WorkingRun(snapshot, now)
    approval = working.approvals.get(approval_id)
    if approval is None or approval.status is not ApprovalStatus.PENDING:
        return None
    decided = replace(
        approval, status=status, decided_by=decided_by, decided_at=now, comment=comment
    )
    working.set_approval(decided)
    data: dict[str, Any] = {"approval_id": approval_id}
    if decided_by is not None:
        data["decided_by"] = decided_by
    working.emit(DECISION_EVENTS[status], approval.task_key, approval.attempt, data)
    key = (approval.task_key, approval.attempt)
    attempt = working.live.get(key)
    if (
        attempt is not None
        and not working.pending_approvals(key)
        and working.task(approval.task_key).status is TaskStatus.WAITING_APPROVAL
    ):
        waited = (now - attempt.paused_at).total_seconds() if attempt.paused_at else 0.0
        working.set_attempt(
            key, paused_at=None, paused_seconds=attempt.paused_seconds + max(waited, 0.0)
        )
        working.set_task(approval.task_key, TaskStatus.RUNNING)
    settle_run(working, has_ready=False)
    commit, after = working.result()
    assert commit is not None  # the decision itself is a change
    return replace(commit, announce=True), after
