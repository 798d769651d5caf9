"""Executing one local attempt: the executor under the attempt's deadline, as an observation."""

from __future__ import annotations

from workload_domain.errors import SystemFault
from workload_domain.ports import Clock, Executor
from workload_domain.records import (
    ExecutorFailure,
    ExecutorResult,
    ExecutorSuspended,
    TaskError,
)
from workload_domain.statuses import AttemptStatus
from workload_engine.approval_planning import ApprovalWait
from workload_engine.planner import TIMED_OUT_ERROR, AttemptOutcome, Launch, Observation

__all__ = ["execute"]


async def execute(executor: Executor, clock: Clock, launch: Launch) -> Observation:
    """Run the executor, cancelled if the attempt's deadline on the clock passes first."""
    result: ExecutorResult | None = None
    with clock.cancel_at(launch.deadline) as deadline:
        try:
            result = await executor.execute(launch.request)
        except SystemFault:
            raise  # the store or the lock failed (an agent's journal): fail-stop
        except Exception as exc:  # an executor's crash is the task's failure, not ours
            result = ExecutorFailure(
                TaskError("executor_error", f"{type(exc).__name__}: {exc}", True)
            )
    timed_out = deadline.expired

    request = launch.request
    key = (request.task_key, request.attempt)
    now = clock.now()
    if timed_out or result is None:
        return AttemptOutcome(*key, AttemptStatus.TIMED_OUT, now, error=TIMED_OUT_ERROR)
    if isinstance(result, ExecutorSuspended):
        return ApprovalWait(*key, result.approvals)
    if isinstance(result, ExecutorFailure):
        return AttemptOutcome(*key, AttemptStatus.FAILED, now, error=result.error)
    return AttemptOutcome(*key, AttemptStatus.SUCCEEDED, now, output=result.output)
