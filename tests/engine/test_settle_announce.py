"""Which settles wake the run's runner in another process (SPEC §14, §16).

A worker's report settled by a process that does not run the run is announced to the run's
runner only when that runner must act: the run ended, an in-process task became ready, or a
retry's backoff is to be kept. A commit that only ended one remote attempt and queued the next
is not: the idle runner learns of it at its next commit.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.harness import Harness
from workload_domain.idempotency import IdempotencyRecord, Replayed
from workload_domain.leases import token_digest
from workload_domain.records import AttemptRecord, RunCommit, TaskError
from workload_domain.statuses import AttemptStatus
from workload_domain.workers import Claim
from workload_engine.clock import FakeClock
from workload_engine.memory import InMemoryStore
from workload_engine.planner import AttemptOutcome, plan
from workload_engine.remote import RemoteAttempts

pytestmark = pytest.mark.anyio


class AnnouncedStore(InMemoryStore):
    """Records the ``announce`` flag of every commit."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.announced: list[bool] = []

    async def commit(
        self, commit: RunCommit, idempotency: IdempotencyRecord | None = None
    ) -> Replayed | None:
        replayed = await super().commit(commit, idempotency)
        self.announced.append(commit.announce)
        return replayed


def succeeded(attempt: AttemptRecord, now: Any) -> AttemptOutcome:
    return AttemptOutcome(attempt.task_key, attempt.attempt, AttemptStatus.SUCCEEDED, now)


def failed(attempt: AttemptRecord, now: Any) -> AttemptOutcome:
    error = TaskError("boom", "it broke", retryable=True)
    return AttemptOutcome(attempt.task_key, attempt.attempt, AttemptStatus.FAILED, now, error=error)


async def settle_first(tasks: list[dict[str, Any]], decide: Any) -> list[bool]:
    """Start a run of ``tasks`` (its first attempt queued, then claimed), settle it by
    ``decide`` as a process without the run's runner would; the commits' announce flags."""
    clock = FakeClock()
    store = AnnouncedStore(clock)
    h = Harness(store=store, clock=clock)
    run_id = await h.create({"id": "wf", "tasks": tasks})
    snapshot = await store.load_run(run_id)
    workflow = await h.engine.definitions.get("wf", 1)
    decided = plan(snapshot, workflow, now=clock.now(), local_actions=h.engine.local_actions)
    assert decided.commit is not None
    await store.commit(decided.commit)
    claim = Claim("w1", ("default",), ("resize",), 1, (token_digest("t"),))
    (claimed,) = await store.claim(claim, clock.now())
    store.announced.clear()
    remote = RemoteAttempts(store, h.engine)  # its engine runs nothing: the runner is elsewhere
    await remote.settle(run_id, claimed.task_key, claimed.attempt, decide)
    return store.announced


async def test_a_step_of_a_remote_chain_is_not_announced() -> None:
    chain: list[dict[str, Any]] = [
        {"key": "a", "action": "resize"},
        {"key": "b", "action": "resize", "depends_on": ["a"]},
    ]
    assert await settle_first(chain, succeeded) == [False]


@pytest.mark.parametrize(
    ("tasks", "decide"),
    [
        ([{"key": "a", "action": "resize"}], succeeded),  # the run ends
        (
            [{"key": "a", "action": "resize"}, {"key": "b", "action": "mock", "depends_on": ["a"]}],
            succeeded,
        ),  # an in-process task is ready: only the runner's engine gives it a slot
        (
            [
                {
                    "key": "a",
                    "action": "resize",
                    "retry": {"max_attempts": 2, "initial_backoff_seconds": 30},
                }
            ],
            failed,
        ),  # a retry's backoff is the runner's to keep
    ],
    ids=["run-ends", "local-ready", "retry-later"],
)
async def test_a_settle_the_runner_must_act_on_is_announced(
    tasks: list[dict[str, Any]], decide: Any
) -> None:
    assert await settle_first(tasks, decide) == [True]
