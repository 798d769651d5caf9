"""The ``WorkerStore`` contract (SPEC §10), on both stores: claims, leases, deadlines, listings."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import anyio
import pytest

from tests.engine.harness import Harness
from tests.engine.test_agent import agent, call, guarded, run_until, say, wf
from tests.engine.test_agent import harness as agent_harness
from workload_domain.compiler import CompiledWorkflow, compile_definition
from workload_domain.errors import RevisionConflict
from workload_domain.events import EventType
from workload_domain.leases import LeaseLostReason, RunPosition, lease_lost, token_digest
from workload_domain.ports import Store
from workload_domain.records import EventRecord, RunCommit, RunSnapshot
from workload_domain.statuses import AttemptStatus, RunStatus
from workload_domain.workers import Claim, worker_status
from workload_engine.cancellation import cancel_commit
from workload_engine.clock import FakeClock
from workload_engine.planner import AttemptOutcome, plan
from workload_engine.remote import deadline_outcome
from workload_engine.runs import request_cancel

pytestmark = pytest.mark.anyio
_tokens = itertools.count()


def remote(key: str = "r", **fields: Any) -> dict[str, Any]:
    return {"key": key, "action": "resize", "input": {"size": 8}, **fields}


async def queued_run(
    store: Store, clock: FakeClock, *tasks: dict[str, Any], traceparent: str | None = None
) -> str:
    """A run whose first plan queued its ready remote attempts (committed, as a runner does)."""
    definition = {"id": "wf", "tasks": list(tasks) or [remote()]}
    h = Harness(store=store, clock=clock)
    run_id = await h.create(definition, traceparent=traceparent)
    snapshot = await store.load_run(run_id)
    decided = plan(snapshot, compile_definition(definition), now=clock.now(), executing=())
    assert decided.commit is not None
    await store.commit(decided.commit)
    return run_id


def claim(
    worker: str = "w1", n: int = 1, queues: tuple[str, ...] = ("default",)
) -> tuple[Claim, list[str]]:
    tokens = [f"token-{next(_tokens)}" for _ in range(n)]
    digests = tuple(token_digest(t) for t in tokens)
    return Claim(worker, queues, ("resize",), n, digests), tokens


async def test_a_claim_leases_the_queued_attempt_once(store: Store, clock: FakeClock) -> None:
    run_id = await queued_run(store, clock, remote(heartbeat_timeout_seconds=10))
    before = await store.load_run(run_id)
    (live,) = before.live_attempts
    assert (live.status, live.worker_id, live.queue) == (AttemptStatus.QUEUED, None, "default")
    clock.advance(1)
    request, tokens = claim(n=2)
    (item,) = await store.claim(request, clock.now())
    assert (item.run_id, item.task_key, item.attempt, item.action) == (run_id, "r", 1, "resize")
    assert (item.input, item.upstream, item.run_input) == ({"size": 8}, {}, {})
    assert item.token_index == 0
    assert item.lease_expires_at == clock.now() + timedelta(seconds=10)
    assert item.timeout_at == clock.now() + timedelta(seconds=300)
    after = await store.load_run(run_id)
    assert after.run.revision == before.run.revision + 1
    assert after.last_sequence == before.last_sequence + 1
    (leased,) = after.live_attempts
    assert (leased.status, leased.worker_id, leased.claimed_at) == (
        AttemptStatus.RUNNING,
        "w1",
        clock.now(),
    )
    event = (await store.list_events(run_id))[-1]
    assert (event.type, event.task_key, event.attempt, event.data) == (
        "attempt.started",
        "r",
        1,
        {"worker_id": "w1"},
    )
    found = await store.find_attempt(item.attempt_id)
    assert found is not None
    assert found.run_id == run_id
    assert found.token_digest == token_digest(tokens[0])
    assert await store.claim(claim()[0], clock.now()) == []  # never handed out twice


async def test_claims_are_fifo_batched_and_filtered(store: Store, clock: FakeClock) -> None:
    runs = []
    for _ in range(3):
        runs.append(await queued_run(store, clock))
        clock.advance(1)
    other = await queued_run(store, clock, remote(queue="gpu"))
    assert await store.claim(claim(queues=("nothing",))[0], clock.now()) == []
    first = await store.claim(claim(n=2)[0], clock.now())
    assert [i.run_id for i in first] == runs[:2]
    assert [i.token_index for i in first] == [0, 1]
    rest = await store.claim(claim(n=5, queues=("default", "gpu"))[0], clock.now())
    assert [i.run_id for i in rest] == [runs[2], other]


async def test_upstream_outputs_come_with_the_claim(store: Store, clock: FakeClock) -> None:
    definition = [
        {"key": "a", "action": "mock", "input": {"output": {"n": 1}}},
        remote(depends_on=["a"]),
    ]
    h = Harness(store=store, clock=clock)
    run_id = await h.create({"id": "wf", "tasks": definition})
    compiled = compile_definition({"id": "wf", "tasks": definition})
    snapshot = await store.load_run(run_id)
    # Task a succeeds (as its runner would record it), so r is queued.
    done = replace(snapshot.tasks[0], output={"n": 1})
    first = plan(
        replace(snapshot, tasks=(done, snapshot.tasks[1])),
        compiled,
        now=clock.now(),
        executing=(),
    )
    assert first.commit is not None
    assert [a.task_key for a in first.commit.attempts] == []  # a is local: needs a slot
    started = plan(snapshot, compiled, now=clock.now(), slots={"a"}, executing=())
    assert started.commit is not None
    await store.commit(started.commit)
    outcome = AttemptOutcome("a", 1, AttemptStatus.SUCCEEDED, clock.now(), output={"n": 1})
    after = plan(started.after, compiled, now=clock.now(), outcomes=[outcome], executing=())
    assert after.commit is not None
    await store.commit(after.commit)
    (item,) = await store.claim(claim()[0], clock.now())
    assert item.upstream == {"a": {"n": 1}}


async def test_heartbeats_renew_only_a_held_lease(store: Store, clock: FakeClock) -> None:
    run_id = await queued_run(store, clock, remote(heartbeat_timeout_seconds=10))
    request, (token,) = claim()
    (item,) = await store.claim(request, clock.now())
    clock.advance(5)
    renewed = await store.heartbeat(item.attempt_id, token_digest(token), clock.now(), {"p": 1})
    assert renewed == clock.now() + timedelta(seconds=10)
    (live,) = (await store.load_run(run_id)).live_attempts
    assert (live.lease_expires_at, live.progress) == (renewed, {"p": 1})
    assert await store.heartbeat(item.attempt_id, token_digest("x"), clock.now(), None) is None
    assert await store.heartbeat("not-an-id", token_digest(token), clock.now(), None) is None
    unknown = "00000000-0000-4000-8000-000000000000"
    assert await store.heartbeat(unknown, token_digest(token), clock.now(), None) is None
    assert await store.find_attempt(unknown) is None
    assert await store.find_attempt("not-an-id") is None
    clock.advance(10)  # the lease ran out: a heartbeat no longer revives it
    assert await store.heartbeat(item.attempt_id, token_digest(token), clock.now(), None) is None
    assert await store.due_attempts(clock.now(), 10) == [(run_id, "r", 1)]


async def test_a_commit_never_writes_a_lease_back(store: Store, clock: FakeClock) -> None:
    run_id = await queued_run(store, clock, remote(heartbeat_timeout_seconds=10))
    request, (token,) = claim()
    (item,) = await store.claim(request, clock.now())
    stale = await store.load_run(run_id)
    clock.advance(5)
    renewed = await store.heartbeat(item.attempt_id, token_digest(token), clock.now(), {"p": 2})
    # A commit made from the older snapshot carries the attempt as it was read then: the lease
    # (renewed since, with no new revision) must survive it.
    run = replace(stale.run, revision=stale.run.revision + 1, cancel_requested=True)
    event = EventRecord(stale.last_sequence + 1, EventType.RUN_CANCEL_REQUESTED, clock.now())
    await store.commit(
        RunCommit(stale.run.revision, run, attempts=stale.live_attempts, events=(event,))
    )
    (live,) = (await store.load_run(run_id)).live_attempts
    assert (live.lease_expires_at, live.progress) == (renewed, {"p": 2})


LEASED = remote(heartbeat_timeout_seconds=10)
RETRIED = remote(
    heartbeat_timeout_seconds=10, retry={"max_attempts": 2, "initial_backoff_seconds": 0}
)
"""A leased task whose reap queues its retry in the same commit (a write of several statements)."""


@dataclass(frozen=True)
class StaleReap:
    """The lease reaper's commit, decided on a ``read`` that found a 10 s lease run out.

    ``heartbeat`` (the store's arguments) renews the lease as a heartbeat timed half a second
    before its end does.
    """

    read: RunSnapshot
    workflow: CompiledWorkflow
    commit: RunCommit
    attempt_id: str
    heartbeat: dict[str, Any]


async def stale_reap(store: Store, clock: FakeClock, task: dict[str, Any] = LEASED) -> StaleReap:
    run_id = await queued_run(store, clock, task)
    request, (token,) = claim()
    (item,) = await store.claim(request, clock.now())
    heartbeat_at = clock.now() + timedelta(seconds=9.5)
    clock.advance(10)
    stale = await store.load_run(run_id)
    workflow = compile_definition({"id": "wf", "tasks": [task]})
    heartbeat = {
        "attempt_id": item.attempt_id,
        "token_digest": token_digest(token),
        "now": heartbeat_at,
        "progress": None,
    }
    return StaleReap(stale, workflow, reap(stale, workflow, clock), item.attempt_id, heartbeat)


def reap(snapshot: RunSnapshot, workflow: CompiledWorkflow, clock: FakeClock) -> RunCommit:
    """The commit that ends the run's one attempt for its lease's expiry (its lease ran out)."""
    (running,) = snapshot.live_attempts
    ended = deadline_outcome(running, clock.now())
    assert ended is not None
    assert ended.status is AttemptStatus.INTERRUPTED
    reaped = plan(snapshot, workflow, now=clock.now(), outcomes=[ended]).commit
    assert reaped is not None
    return reaped


@pytest.mark.parametrize("task", [LEASED, RETRIED], ids=["last-attempt", "retried"])
async def test_a_lease_renewed_after_the_reapers_read_is_not_ended_by_it(
    store: Store, clock: FakeClock, task: dict[str, Any]
) -> None:
    # The reaper read the attempt after its lease ran out; a heartbeat that found the lease
    # held (its time, just before the end) committed after that read, without a revision.
    # The reaper's commit must not end the attempt its answer keeps (SPEC §10): it conflicts,
    # and a read of the run again decides nothing.
    stale = await stale_reap(store, clock, task)
    renewed = await store.heartbeat(**stale.heartbeat)
    assert renewed == stale.heartbeat["now"] + timedelta(seconds=10)
    with pytest.raises(RevisionConflict):
        await store.commit(stale.commit)
    fresh = await store.load_run(stale.read.run.run_id)
    assert fresh.run.revision == stale.read.run.revision
    (live,) = fresh.live_attempts
    assert (live.status, live.lease_expires_at) == (AttemptStatus.RUNNING, renewed)
    assert deadline_outcome(live, clock.now()) is None
    # Once the renewed lease runs out, the reaper's read and commit end the attempt.
    clock.advance(10)
    await store.commit(reap(fresh, stale.workflow, clock))
    found = await store.find_attempt(stale.attempt_id)
    assert found is not None
    assert found.attempt.status is AttemptStatus.INTERRUPTED
    after = await store.load_run(stale.read.run.run_id)
    retries = [(a.attempt, a.status) for a in after.live_attempts]
    assert retries == ([(2, AttemptStatus.QUEUED)] if task is RETRIED else [])


async def test_an_attempt_is_found_with_its_run_as_a_read_of_the_run_gives(
    store: Store, clock: FakeClock
) -> None:
    # A runner takes the attempt and the run's position found here for a read of the run.
    run_id = await queued_run(store, clock, remote(heartbeat_timeout_seconds=10))
    queued = await store.load_run(run_id)
    clock.advance(2)
    request, (token,) = claim()
    (item,) = await store.claim(request, clock.now())
    clock.advance(1)
    await store.heartbeat(item.attempt_id, token_digest(token), clock.now(), {"p": 1})
    found = await store.find_attempt(item.attempt_id)
    snapshot = await store.load_run(run_id)
    assert found is not None
    assert found.run == RunPosition(
        snapshot.run.revision, snapshot.last_sequence, snapshot.run.updated_at
    )
    # The claim was one revision and one event, and moved the run's update time.
    assert (snapshot.run.revision, snapshot.last_sequence) == (
        queued.run.revision + 1,
        queued.last_sequence + 1,
    )
    assert snapshot.run.updated_at > queued.run.updated_at
    assert snapshot.live_attempts == (found.attempt,)


async def test_due_attempts_cover_every_deadline(store: Store, clock: FakeClock) -> None:
    lease = await queued_run(store, clock, remote(heartbeat_timeout_seconds=5))
    (item,) = await store.claim(claim()[0], clock.now())
    assert item.run_id == lease
    unserved = await queued_run(
        store, clock, remote(action="nobody-serves-this", schedule_to_start_timeout_seconds=3)
    )
    slow = await queued_run(store, clock, remote(timeout_seconds=2, heartbeat_timeout_seconds=60))
    (item,) = await store.claim(claim()[0], clock.now())
    assert item.run_id == slow
    assert await store.due_attempts(clock.now(), 10) == []
    clock.advance(2)
    assert await store.due_attempts(clock.now(), 10) == [(slow, "r", 1)]
    clock.advance(1)
    assert await store.due_attempts(clock.now(), 10) == [(slow, "r", 1), (unserved, "r", 1)]
    clock.advance(2)
    due = await store.due_attempts(clock.now(), 10)
    assert set(due) == {(slow, "r", 1), (unserved, "r", 1), (lease, "r", 1)}
    assert len(await store.due_attempts(clock.now(), 2)) == 2


async def test_no_claim_takes_an_attempt_past_its_schedule_to_start_deadline(
    store: Store, clock: FakeClock
) -> None:
    # The lease reaper fails it (schedule_to_start_timed_out); a claim before it must not win.
    late = await queued_run(store, clock, remote(schedule_to_start_timeout_seconds=3))
    clock.advance(1)
    timely = await queued_run(store, clock, remote(schedule_to_start_timeout_seconds=3))
    clock.advance(2)  # the first one's deadline is now; the second's is a second away
    (item,) = await store.claim(claim(n=2)[0], clock.now())
    assert item.run_id == timely
    (still,) = (await store.load_run(late)).live_attempts
    assert (still.status, still.worker_id) == (AttemptStatus.QUEUED, None)
    assert await store.due_attempts(clock.now(), 10) == [(late, "r", 1)]


async def test_a_cancel_ends_remote_attempts_at_once_while_local_ones_stop(
    store: Store, clock: FakeClock
) -> None:
    # SPEC §10: remote attempts are canceled at once, even while the runner still has to stop
    # a local attempt of the same run; their workers' reports are refused (409 canceled).
    local = {"key": "m", "action": "mock", "input": {"sleep_ms": 60000}}
    definition = {"id": "wf", "tasks": [remote(), local]}
    run_id = await Harness(store=store, clock=clock).create(definition)
    snapshot = await store.load_run(run_id)
    # The runner's plan: the remote attempt queued, the local one started (it has a slot).
    decided = plan(
        snapshot, compile_definition(definition), now=clock.now(), slots=["m"], executing=()
    )
    assert decided.commit is not None
    await store.commit(decided.commit)
    request, tokens = claim()
    (item,) = await store.claim(request, clock.now())
    before = await store.load_run(run_id)
    assert {(a.task_key, a.status) for a in before.live_attempts} == {
        ("r", AttemptStatus.RUNNING),
        ("m", AttemptStatus.RUNNING),
    }
    commit, _ = cancel_commit(before, now=clock.now())
    await store.commit(commit)
    after = await store.load_run(run_id)
    assert after.run.cancel_requested
    assert after.run.status is RunStatus.RUNNING  # the runner converges it once m stops
    assert [(a.task_key, a.status) for a in after.live_attempts] == [("m", AttemptStatus.RUNNING)]
    assert {t.task_key: t.status.value for t in after.tasks} == {"r": "canceled", "m": "running"}
    found = await store.find_attempt(item.attempt_id)
    assert found is not None
    assert found.attempt.status is AttemptStatus.CANCELED
    assert lease_lost(found, tokens[0], clock.now()) is LeaseLostReason.CANCELED


async def test_workers_and_queues_are_listed(store: Store, clock: FakeClock) -> None:
    assert (await store.page_workers(None, 10)).items == ()
    assert await store.queue_stats() == []
    await queued_run(store, clock, remote(queue="alpha"), remote("b", queue="beta"))
    clock.advance(3)
    await store.claim(claim("w2", queues=("beta",))[0], clock.now())
    await store.claim(claim("w1", queues=("nothing",))[0], clock.now())
    page = await store.page_workers(None, 1)
    assert [(w.worker_id, w.in_flight) for w in page.items] == [("w1", 0)]
    assert page.next_cursor is not None
    rest = await store.page_workers(page.next_cursor, 10)
    (w2,) = rest.items
    assert (w2.worker_id, w2.in_flight, w2.queues, w2.actions) == ("w2", 1, ("beta",), ("resize",))
    assert (w2.first_seen_at, w2.last_seen_at) == (clock.now(), clock.now())
    stats = {q.queue: q for q in await store.queue_stats()}
    assert (stats["alpha"].queued, stats["alpha"].running) == (1, 0)
    assert stats["alpha"].oldest_queued_at == clock.now() - timedelta(seconds=3)
    assert (stats["beta"].queued, stats["beta"].running, stats["beta"].oldest_queued_at) == (
        0,
        1,
        None,
    )


async def test_a_look_after_a_wake_up_records_the_worker_only_if_it_claims(
    store: Store, clock: FakeClock
) -> None:
    # ADR 0025: a long-poll records its worker when it begins; its later looks that find
    # nothing do not, however long ago that was (SEEN_SECONDS would otherwise record it).
    first, _ = claim("w1")
    assert await store.claim(first, clock.now()) == []
    seen_at = clock.now()
    clock.advance(60)
    assert await store.claim(replace(first, record_seen=False), clock.now()) == []
    (worker,) = (await store.page_workers(None, 10)).items
    assert worker.last_seen_at == seen_at
    await queued_run(store, clock)
    woken, _ = claim("w1")
    assert len(await store.claim(replace(woken, record_seen=False), clock.now())) == 1
    (worker,) = (await store.page_workers(None, 10)).items
    assert worker.last_seen_at == clock.now()


@pytest.mark.parametrize("limit", [1, 3])
async def test_a_claim_counts_one_commit_per_run(
    store: Store, clock: FakeClock, limit: int
) -> None:
    run_id = await queued_run(store, clock, remote(), remote("s"), remote("t"))
    before = await store.load_run(run_id)
    items = await store.claim(claim(n=limit)[0], clock.now())
    after = await store.load_run(run_id)
    assert len(items) == limit
    assert after.run.revision == before.run.revision + 1
    events = (await store.list_events(run_id))[before.last_sequence :]
    assert [e.sequence for e in events] == list(
        range(before.last_sequence + 1, before.last_sequence + 1 + limit)
    )
    assert after.run.status is RunStatus.RUNNING


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def test_a_claim_hands_out_the_run_trace_and_queue_time(
    store: Store, clock: FakeClock
) -> None:
    traced = await queued_run(store, clock, traceparent=TRACEPARENT)
    untraced = await queued_run(store, clock)
    queued_at = clock.now()
    assert (await store.load_run(traced)).run.traceparent == TRACEPARENT
    assert (await store.load_run(untraced)).run.traceparent is None
    clock.advance(4)
    items = {i.run_id: i for i in await store.claim(claim(n=2)[0], clock.now())}
    assert (items[traced].traceparent, items[traced].queued_at) == (TRACEPARENT, queued_at)
    assert (items[untraced].traceparent, items[untraced].queued_at) == (None, queued_at)
    # A commit (the claim's, a settle's) never loses the run's trace context.
    assert (await store.load_run(traced)).run.traceparent == TRACEPARENT


async def test_activity_counts_open_runs_and_recent_workers(store: Store, clock: FakeClock) -> None:
    assert (await store.activity(clock.now())).runs_active == 0
    await queued_run(store, clock)
    await queued_run(store, clock)
    await store.claim(claim("early", queues=("nothing",))[0], clock.now())
    (held,) = await store.claim(claim("busy")[0], clock.now())
    clock.advance(100)
    await store.claim(claim("late", queues=("nothing",))[0], clock.now())
    window = clock.now() - timedelta(seconds=90)
    activity = await store.activity(window)
    # "busy" was seen 100 s ago but holds an attempt (its heartbeats may come less often than
    # the window): active, as the workers listing says; "early" holds nothing: gone.
    assert (activity.runs_active, activity.workers_active, activity.approvals_pending) == (
        2,
        2,
        0,
    )
    assert (await store.activity(clock.now() - timedelta(seconds=101))).workers_active == 3
    listed = {w.worker_id: w for w in (await store.page_workers(None, 10)).items}
    statuses = {name: worker_status(w, clock.now()) for name, w in listed.items()}
    assert statuses == {"early": "gone", "busy": "active", "late": "active"}
    assert listed["busy"].in_flight == 1
    # Once its attempt ended, it is gone like any worker not seen within the window.
    leased = await store.find_attempt(held.attempt_id)
    assert leased is not None
    snapshot = await store.load_run(leased.run_id)
    commit, _ = cancel_commit(snapshot, now=clock.now(), local_actions=())
    await store.commit(commit)
    assert (await store.activity(window)).workers_active == 1
    (busy,) = [w for w in (await store.page_workers(None, 10)).items if w.worker_id == "busy"]
    assert worker_status(busy, clock.now()) == "gone"


async def test_activity_counts_pending_approvals(store: Store, clock: FakeClock) -> None:
    """SPEC §12's workload_approvals_pending and workload status: approvals not yet decided."""
    h, _ = agent_harness(store, clock)
    idle = await store.activity(clock.now())
    assert (idle.approvals_pending, idle.oldest_approval_requested_at) == (0, None)
    asks = wf(agent(tools=[guarded()], script=[call("deploy"), say("done")]))
    first, second = await h.create(asks), await h.create(asks)
    asked_at = []
    async with anyio.create_task_group() as tg:
        await tg.start(h.engine.run)
        for run_id in (first, second):
            asked_at.append(clock.now())
            h.engine.submit(run_id)
            await run_until(h, run_id, "waiting_approval")
            clock.advance(60)
        both = await store.activity(clock.now())
        # The alert on approvals waiting long reads the oldest one's age (SPEC §12).
        assert (both.approvals_pending, both.oldest_approval_requested_at) == (2, asked_at[0])
        await request_cancel(h.store, h.clock, first, local_actions=h.engine.local_actions)
        h.engine.notify(first)
        await h.engine.wait_finished(first)
        # A canceled approval is decided for good: one is left waiting.
        left = await store.activity(clock.now())
        assert (left.approvals_pending, left.oldest_approval_requested_at) == (1, asked_at[1])
        tg.cancel_scope.cancel()


async def test_connection_counts_are_by_state(store: Store) -> None:
    counts = store.connection_counts()
    assert set(counts) <= {"idle", "used"}
    assert all(n >= 0 for n in counts.values())


async def test_workers_not_seen_for_a_while_are_forgotten(store: Store, clock: FakeClock) -> None:
    """ADR 0023: the purge forgets workers last seen before its cutoff, unless they hold work."""
    await queued_run(store, clock, remote(heartbeat_timeout_seconds=3600))
    (held,) = await store.claim(claim("busy")[0], clock.now())  # holds its attempt from now on
    await store.claim(claim("idle", queues=("nothing",))[0], clock.now())
    clock.advance(3600)
    await store.claim(claim("edge", queues=("nothing",))[0], clock.now())
    clock.advance(3600)
    await store.claim(claim("recent", queues=("nothing",))[0], clock.now())
    cutoff = clock.now() - timedelta(seconds=3600)  # "edge" was last seen exactly then
    assert await store.forget_workers(cutoff) == 1
    left = [w.worker_id for w in (await store.page_workers(None, 10)).items]
    assert left == ["busy", "edge", "recent"]
    assert await store.forget_workers(cutoff) == 0
    # Once its attempt ended, a worker holding nothing is forgotten like any other.
    leased = await store.find_attempt(held.attempt_id)
    assert leased is not None
    commit, _ = cancel_commit(
        await store.load_run(leased.run_id), now=clock.now(), local_actions=()
    )
    await store.commit(commit)
    assert await store.forget_workers(clock.now()) == 2  # "recent" was seen at now: kept
    assert [w.worker_id for w in (await store.page_workers(None, 10)).items] == ["recent"]
