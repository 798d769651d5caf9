"""Helpers of the contract suites: runs brought to a given state through the store port."""

from __future__ import annotations

from dataclasses import replace

from workload_domain.events import EventType
from workload_domain.ids import attempt_id
from workload_domain.ports import Store
from workload_domain.records import AttemptRecord, EventRecord, RunCommit
from workload_domain.statuses import AttemptStatus, RunStatus, TaskStatus
from workload_engine.clock import FakeClock

__all__ = ["start_first_attempt"]


async def start_first_attempt(
    store: Store, clock: FakeClock, run_id: str, executed_by: str | None = None
) -> str:
    """Commit a pending run's first task and its first in-process attempt ``running``."""
    snapshot = await store.load_run(run_id)
    now = clock.now()
    task = snapshot.tasks[0]
    await store.commit(
        RunCommit(
            expected_revision=1,
            run=replace(snapshot.run, revision=2, status=RunStatus.RUNNING, started_at=now),
            tasks=(replace(task, status=TaskStatus.RUNNING, attempt_count=1, started_at=now),),
            attempts=(
                AttemptRecord(
                    task.task_key,
                    1,
                    AttemptStatus.RUNNING,
                    now,
                    attempt_id=attempt_id(run_id, task.task_key, 1),
                    action="mock",
                    executed_by=executed_by,
                ),
            ),
            events=(
                EventRecord(2, EventType.RUN_STARTED, now),
                EventRecord(3, EventType.ATTEMPT_STARTED, now, task.task_key, 1),
            ),
        )
    )
    return task.task_key
