"""The behaviour every Store adapter must have (SPEC §5, §6): run against both adapters."""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import anyio
import pytest

from tests.contract.runs import start_first_attempt
from tests.engine.harness import Harness, mock, workflow
from workload_domain.compiler import compile_definition
from workload_domain.drafts import DraftApproval, DraftRecord, DraftStatus
from workload_domain.errors import (
    DraftChanged,
    IdempotencyKeyReused,
    InvalidCursor,
    RevisionConflict,
    RunNotFound,
    StoreIntegrityError,
    TaskNotFound,
    VersionNotFound,
    WorkflowExists,
    WorkflowNotFound,
)
from workload_domain.events import EventType
from workload_domain.idempotency import (
    IdempotencyClaim,
    IdempotencyRecord,
    Outcome,
    PendingRecord,
    Replayed,
)
from workload_domain.ports import Store
from workload_domain.records import (
    AppliedVersion,
    EventRecord,
    NewRun,
    NewVersion,
    RunCommit,
    RunRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.run_listing import RunFilter
from workload_domain.statuses import RunStatus
from workload_engine.clock import FakeClock

pytestmark = pytest.mark.anyio

DIAMOND = workflow(
    mock("a", sleep_ms=10),
    mock("b", ["a"], fail_first=1, retry={"max_attempts": 3, "initial_backoff_seconds": 1}),
    mock("c", ["a"], sleep_ms=5),
    mock("d", ["b", "c"], output={"ok": True}),
)


async def create_workflow(store: Store, clock: FakeClock, workflow_id: str = "wf") -> VersionRecord:
    compiled = compile_definition(workflow(mock("x"), workflow_id=workflow_id))
    now = clock.now()
    created = await store.create_workflow(
        WorkflowRecord(workflow_id, 1, "", now, now),
        VersionRecord(workflow_id, 1, compiled.definition_hash, 1, now, compiled.document()),
    )
    assert isinstance(created, VersionRecord)
    return created


def claim(key: str = "k1", request_hash: str = "h1", principal: str = "op") -> IdempotencyClaim:
    return IdempotencyClaim(principal, key, "create_run", request_hash)


def render_run(run: RunRecord) -> Outcome:
    return Outcome(202, {"run_id": run.run_id, "status": run.status.value})


async def test_workflows_and_versions(store: Store, clock: FakeClock) -> None:
    v1 = await create_workflow(store, clock)
    assert v1.version == 1
    with pytest.raises(WorkflowExists):
        await create_workflow(store, clock)
    clock.advance(1)
    definition = compile_definition(workflow(mock("y"), workflow_id="wf")).document()
    definition["description"] = "second"
    new_v2 = NewVersion("wf", "sha256:" + "b" * 64, 1, clock.now(), definition, "second")
    v2 = await store.create_version(new_v2)
    assert v2 == VersionRecord("wf", 2, "sha256:" + "b" * 64, 1, clock.now(), definition)
    got = await store.get_workflow("wf")
    assert (got.latest_version, got.description, got.updated_at) == (2, "second", clock.now())
    assert (await store.get_version("wf", 1)).definition == v1.definition
    assert (await store.get_version("wf", 2)).definition == definition
    with pytest.raises(VersionNotFound):
        await store.get_version("wf", 3)
    with pytest.raises(WorkflowNotFound):
        await store.get_version("nope", 1)
    with pytest.raises(WorkflowNotFound):
        await store.get_workflow("nope")
    with pytest.raises(WorkflowNotFound):
        await store.create_version(replace(new_v2, workflow_id="nope"))
    assert (await store.get_workflow("wf")).latest_version == 2


def new_version(clock: FakeClock, workflow_id: str, key: str) -> NewVersion:
    compiled = compile_definition(workflow(mock(key), workflow_id=workflow_id))
    document = compiled.document()
    return NewVersion(
        workflow_id, compiled.definition_hash, 1, clock.now(), document, f"with {key}"
    )


def render_version(version: VersionRecord) -> Outcome:
    return Outcome(201, {"version": version.version, "hash": version.definition_hash})


async def test_concurrent_new_versions_queue_and_none_fails(store: Store, clock: FakeClock) -> None:
    """Many new versions of one workflow at once: each gets its own next number (SPEC §6)."""
    await create_workflow(store, clock)
    n = 30
    written: dict[str, VersionRecord | Replayed] = {}

    async def add(i: int) -> None:
        pending = PendingRecord(claim(f"v{i}", f"h{i}"), render_version)
        written[f"t{i}"] = await store.create_version(new_version(clock, "wf", f"t{i}"), pending)

    async with anyio.create_task_group() as group:
        for i in range(n):
            group.start_soon(add, i)
    versions = {key: v for key, v in written.items() if isinstance(v, VersionRecord)}
    assert len(versions) == n  # none failed, none was a replay
    assert sorted(v.version for v in versions.values()) == list(range(2, n + 2))
    for key, version in versions.items():  # each stored as returned, under its own number
        stored = await store.get_version("wf", version.version)
        assert stored == version
        assert stored.definition["tasks"][0]["key"] == key
    assert (await store.get_workflow("wf")).latest_version == n + 1
    # Each key's record was rendered from its own numbered version, in its transaction.
    for i in range(n):
        number = versions[f"t{i}"].version
        again = await store.create_version(
            new_version(clock, "wf", f"t{i}"),
            PendingRecord(claim(f"v{i}", f"h{i}"), render_version),
        )
        assert isinstance(again, Replayed)
        assert again.outcome.body["version"] == number
    assert (await store.get_workflow("wf")).latest_version == n + 1  # replays wrote nothing


async def test_a_new_version_replays_and_refuses_a_reused_key(
    store: Store, clock: FakeClock
) -> None:
    await create_workflow(store, clock)
    first = await store.create_version(
        new_version(clock, "wf", "a"), PendingRecord(claim("nv"), render_version)
    )
    assert isinstance(first, VersionRecord)
    assert first.version == 2
    again = await store.create_version(
        new_version(clock, "wf", "a"), PendingRecord(claim("nv"), render_version)
    )
    assert again == Replayed(Outcome(201, {"version": 2, "hash": first.definition_hash}))
    with pytest.raises(IdempotencyKeyReused):
        await store.create_version(
            new_version(clock, "wf", "b"), PendingRecord(claim("nv", "other"), render_version)
        )
    assert (await store.get_workflow("wf")).latest_version == 2


async def test_engine_runs_identically_on_the_store(store: Store, clock: FakeClock) -> None:
    h = Harness(store=store, clock=clock)
    view = await h.run(DIAMOND, {"doc": "x.pdf", "n": 1.5})
    assert view.status == "succeeded"
    assert view.task_statuses() == dict.fromkeys("abcd", "succeeded")
    assert view.attempt_statuses("b") == ["failed", "succeeded"]
    assert view.tasks["d"].output == {"ok": True}
    assert view.snapshot.run.input == {"doc": "x.pdf", "n": 1.5}
    assert [e.sequence for e in view.events] == list(range(1, len(view.events) + 1))
    assert view.snapshot.last_sequence == len(view.events)
    assert view.events[0].type is EventType.RUN_CREATED
    error = view.attempts["b"][0].error
    assert error is not None
    assert error.code == "mock_failure"
    listed = await store.page_runs(RunFilter(), None, 10)
    assert list(listed.items) == [(view.snapshot.run, {"succeeded": 4})]
    run, own_counts = await store.get_run_with_counts(view.snapshot.run.run_id)
    assert (run, own_counts) == (view.snapshot.run, {"succeeded": 4})
    assert await store.list_unfinished_runs(None, 10) == []
    # Every attempt of the run at once, by (task_key, attempt), bounded.
    everything = await store.list_run_attempts(run.run_id, 100)
    assert [(a.task_key, a.attempt) for a in everything] == [
        ("a", 1),
        ("b", 1),
        ("b", 2),
        ("c", 1),
        ("d", 1),
    ]
    assert list(everything[1:3]) == list(await store.list_attempts(run.run_id, "b"))
    assert len(await store.list_run_attempts(run.run_id, 2)) == 2


async def test_active_runs_are_counted_by_status(store: Store, clock: FakeClock) -> None:
    assert await store.count_active_runs(None) == {}
    h = Harness(store=store, clock=clock)
    first = await h.create(DIAMOND)
    await h.create(DIAMOND)
    assert await store.count_active_runs(None) == {"pending": 2}
    assert await store.count_active_runs("nope") == {}
    view = await h.run(DIAMOND)  # a third run, to its end: finished runs are not counted
    assert view.status == "succeeded"
    assert await store.count_active_runs(None) == {"pending": 2}
    workflow_id = (await store.get_run(first)).workflow_id
    assert await store.count_active_runs(workflow_id) == {"pending": 2}


async def test_secrets_are_made_once_per_name(store: Store) -> None:
    first = await store.secret("console_session")
    assert len(first) >= 32
    assert await store.secret("console_session") == first
    assert await store.secret("another") != first


async def test_a_stale_commit_changes_nothing(store: Store, clock: FakeClock) -> None:
    h = Harness(store=store, clock=clock)
    run_id = await h.create(DIAMOND)
    snapshot = await store.load_run(run_id)
    now = clock.now()
    first = RunCommit(
        expected_revision=1,
        run=replace(snapshot.run, revision=2, status=RunStatus.RUNNING, started_at=now),
        events=(EventRecord(2, EventType.RUN_STARTED, now),),
    )
    await store.commit(first)
    before = (await store.load_run(run_id), await store.list_events(run_id))
    stale = replace(
        first,
        run=replace(first.run, cancel_requested=True),
        events=(EventRecord(2, EventType.RUN_CANCEL_REQUESTED, now),),
    )
    with pytest.raises(RevisionConflict):
        await store.commit(stale)
    gap = RunCommit(
        expected_revision=2,
        run=replace(first.run, revision=3),
        events=(EventRecord(9, EventType.RUN_CANCEL_REQUESTED, now),),
    )
    with pytest.raises(StoreIntegrityError):
        await store.commit(gap)
    shuffled = replace(
        gap,
        events=(
            EventRecord(5, EventType.RUN_CANCEL_REQUESTED, now),
            EventRecord(3, EventType.RUN_RECOVERED, now),
            EventRecord(4, EventType.RUN_RECOVERED, now),
        ),
    )
    with pytest.raises(StoreIntegrityError):
        await store.commit(shuffled)
    unknown_task = replace(
        gap,
        tasks=(replace(snapshot.tasks[0], task_key="zzz"),),
        events=(EventRecord(3, EventType.RUN_RECOVERED, now),),
    )
    with pytest.raises(StoreIntegrityError):
        await store.commit(unknown_task)
    assert (await store.load_run(run_id), await store.list_events(run_id)) == before
    with pytest.raises(RunNotFound):
        await store.commit(
            replace(first, run=replace(first.run, run_id="00000000-0000-7000-8000-000000000000"))
        )


async def test_reads_of_missing_things(store: Store, clock: FakeClock) -> None:
    h = Harness(store=store, clock=clock)
    run_id = await h.create(DIAMOND)
    spellings = (run_id.upper(), run_id.replace("-", ""), "{" + run_id + "}")
    for missing in (
        "00000000-0000-7000-8000-000000000000",
        "not-a-uuid",
        "'; DROP TABLE x; --",
        "\x00",
        *spellings,
    ):
        with pytest.raises(RunNotFound):
            await store.get_run(missing)
        with pytest.raises(RunNotFound):
            await store.load_run(missing)
        with pytest.raises(RunNotFound):
            await store.page_tasks(missing, None, 10)
        with pytest.raises(RunNotFound):
            await store.page_events(missing, None, 10)
        with pytest.raises(RunNotFound):
            await store.get_task(missing, "a")
        with pytest.raises(RunNotFound):
            await store.get_run_with_counts(missing)
        with pytest.raises(RunNotFound):
            await store.list_run_attempts(missing, 10)
    with pytest.raises(TaskNotFound):
        await store.get_task(run_id, "zzz")
    with pytest.raises(TaskNotFound):
        await store.page_attempts(run_id, "zzz", None, 10)
    assert (await store.page_attempts(run_id, "a", None, 10)).items == ()
    assert await store.list_run_attempts(run_id, 10) == []
    with pytest.raises(WorkflowNotFound):
        await store.page_versions("nope", None, 10)


async def collect(fetch: Any, limit: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    cursor = None
    pages = 0
    while True:
        page = await fetch(cursor, limit)
        items.extend(page.items)
        pages += 1
        if page.next_cursor is None:
            return items, pages
        cursor = page.next_cursor


async def test_keyset_pages_return_every_row_once_in_order(store: Store, clock: FakeClock) -> None:
    for i in range(7):
        await create_workflow(store, clock, f"wf-{i}")
        if i % 2:
            clock.advance(0.000001)  # some share a created_at: the id breaks the tie
    workflows, pages = await collect(store.page_workflows, 3)
    assert pages == 3
    assert [w.workflow_id for w in workflows] == [f"wf-{i}" for i in range(7)]

    h = Harness(store=store, clock=clock)
    run_ids = []
    for i in range(7):
        run_ids.append(
            await h.create(workflow(*[mock(f"t{j}") for j in range(5)], workflow_id=f"wf-{i % 2}"))
        )
        clock.advance(0.5)
    runs, pages = await collect(lambda c, n: store.page_runs(RunFilter(), c, n), 2)
    assert [r.run_id for r, _ in runs] == run_ids
    assert all(counts == {"pending": 5} for _, counts in runs)
    assert pages == 4
    only_wf0, _ = await collect(
        lambda c, n: store.page_runs(RunFilter("wf-0", RunStatus.PENDING), c, n), 2
    )
    assert [r.run_id for r, _ in only_wf0] == run_ids[0::2]
    assert (await store.page_runs(RunFilter("wf-0", RunStatus.SUCCEEDED), None, 10)).items == ()

    tasks, pages = await collect(lambda c, n: store.page_tasks(run_ids[0], c, n), 2)
    assert [t.task_key for t in tasks] == [f"t{j}" for j in range(5)]
    assert pages == 3
    events, _ = await collect(lambda c, n: store.page_events(run_ids[0], c, n), 1)
    assert [e.sequence for e in events] == [1]

    view = await h.run(
        workflow(
            mock("f", fail_always=True, retry={"max_attempts": 5, "initial_backoff_seconds": 0}),
            workflow_id="wf-attempts",
        )
    )
    run_id = view.snapshot.run.run_id
    attempts, pages = await collect(lambda c, n: store.page_attempts(run_id, "f", c, n), 2)
    assert [a.attempt for a in attempts] == [1, 2, 3, 4, 5]
    assert pages == 3
    events, _ = await collect(lambda c, n: store.page_events(run_id, c, n), 4)
    assert [e.sequence for e in events] == list(range(1, len(view.events) + 1))


async def test_cursors_are_bound_to_their_listing(store: Store, clock: FakeClock) -> None:
    h = Harness(store=store, clock=clock)
    first = await h.create(workflow(*[mock(f"t{j}") for j in range(3)]))
    second = await h.create(workflow(*[mock(f"t{j}") for j in range(3)]))
    tasks_cursor = (await store.page_tasks(first, None, 1)).next_cursor
    runs_cursor = (await store.page_runs(RunFilter("wf"), None, 1)).next_cursor
    assert tasks_cursor is not None
    assert runs_cursor is not None
    # Valid where issued.
    assert len((await store.page_tasks(first, tasks_cursor, 1)).items) == 1
    assert len((await store.page_runs(RunFilter("wf"), runs_cursor, 1)).items) == 1
    raw = base64.urlsafe_b64decode(tasks_cursor + "=" * (-len(tasks_cursor) % 4))
    flipped = bytearray(raw)
    flipped[-3] ^= 0x01
    tampered = base64.urlsafe_b64encode(bytes(flipped)).rstrip(b"=").decode()
    bad: list[Callable[[], Awaitable[object]]] = [
        lambda: store.page_tasks(second, tasks_cursor, 1),  # another parent
        lambda: store.page_events(first, tasks_cursor, 1),  # another kind
        lambda: store.page_runs(RunFilter("other"), runs_cursor, 1),  # other filters
        lambda: store.page_runs(RunFilter("wf", RunStatus.PENDING), runs_cursor, 1),
        lambda: store.page_runs(RunFilter(), runs_cursor, 1),
        lambda: store.page_tasks(first, tasks_cursor[:-4], 1),  # truncated
        lambda: store.page_tasks(first, tampered, 1),  # bit-flipped
        lambda: store.page_tasks(first, "A" * 5000, 1),  # oversized
        lambda: store.page_tasks(first, "!!not base64!!", 1),
        lambda: store.page_tasks(first, "", 1),
        lambda: store.page_tasks(first, "é", 1),
    ]
    for call in bad:
        with pytest.raises(InvalidCursor):
            await call()


async def test_new_runs_must_be_well_formed(store: Store, clock: FakeClock) -> None:
    h = Harness(store=store, clock=clock)
    run_id = await h.create(DIAMOND)
    snapshot = await store.load_run(run_id)
    tasks = tuple(await store.list_tasks(run_id))
    events = tuple(await store.list_events(run_id))
    fresh = "01890000-0000-7000-8000-0000000000aa"
    bad = [
        NewRun(replace(snapshot.run, run_id="r1"), tasks, events),
        NewRun(replace(snapshot.run, run_id=fresh.upper()), tasks, events),
        NewRun(replace(snapshot.run, run_id=fresh, revision=5), tasks, events),
        NewRun(replace(snapshot.run, run_id=fresh), tasks, (replace(events[0], sequence=2),)),
    ]
    for new in bad:
        with pytest.raises(StoreIntegrityError):
            await store.create_run(new)
    with pytest.raises(RunNotFound):
        await store.get_run(fresh)


async def test_idempotent_create_run_replays_and_refuses_reuse(
    store: Store, clock: FakeClock
) -> None:
    h = Harness(store=store, clock=clock)
    run_id = await h.create(DIAMOND)
    snapshot = await store.load_run(run_id)
    tasks = await store.list_tasks(run_id)
    new = NewRun(
        replace(snapshot.run, run_id="01890000-0000-7000-8000-000000000001"),
        tuple(tasks),
        tuple(await store.list_events(run_id)),
    )
    record = IdempotencyRecord(claim(), render_run(new.run))
    created = await store.create_run(new, record)
    assert created == new.run
    assert await store.find_outcome(claim()) == render_run(new.run)
    again = replace(new, run=replace(new.run, run_id="01890000-0000-7000-8000-000000000002"))
    replayed = await store.create_run(again, IdempotencyRecord(claim(), render_run(again.run)))
    assert replayed == Replayed(render_run(new.run))  # the first outcome, not this one
    with pytest.raises(RunNotFound):
        await store.get_run(again.run.run_id)  # the replay wrote nothing
    with pytest.raises(IdempotencyKeyReused):
        await store.create_run(
            again, IdempotencyRecord(claim(request_hash="other"), record.outcome)
        )
    with pytest.raises(IdempotencyKeyReused):
        await store.find_outcome(claim(request_hash="other"))
    # The same key under another principal is another key.
    await store.create_run(
        again, IdempotencyRecord(claim(principal="someone-else"), record.outcome)
    )
    assert (await store.get_run(again.run.run_id)).run_id == again.run.run_id


async def test_outcomes_without_a_write_and_purge(store: Store, clock: FakeClock) -> None:
    outcome = Outcome(200, {"status": "canceled"})
    assert await store.save_outcome(IdempotencyRecord(claim("cancel-1"), outcome)) is None
    replayed = await store.save_outcome(IdempotencyRecord(claim("cancel-1"), Outcome(202, {})))
    assert replayed == Replayed(outcome)
    with pytest.raises(IdempotencyKeyReused):
        await store.save_outcome(IdempotencyRecord(claim("cancel-1", "h2"), outcome))
    assert await store.find_outcome(claim("unknown")) is None
    clock.advance(3600)
    await store.save_outcome(IdempotencyRecord(claim("cancel-2"), outcome))
    assert await store.purge_outcomes(clock.now() - timedelta(hours=2)) == 0
    assert await store.purge_outcomes(clock.now() - timedelta(minutes=30)) == 1
    assert await store.find_outcome(claim("cancel-1")) is None
    assert await store.find_outcome(claim("cancel-2")) == outcome


async def test_unfinished_runs_page_by_id(store: Store, clock: FakeClock) -> None:
    h = Harness(store=store, clock=clock)
    ids = sorted([await h.create(workflow(mock("x"))) for _ in range(5)])
    seen: list[str] = []
    after = None
    while True:
        page = await store.list_unfinished_runs(after, 2)
        seen.extend(page)
        if len(page) < 2:
            break
        after = page[-1]
    assert seen == ids


async def test_runs_with_running_attempts(store: Store, clock: FakeClock) -> None:
    h = Harness(store=store, clock=clock)
    run_id = await h.create(DIAMOND)
    assert await store.runs_with_running_attempts({"mock"}) == []
    await start_first_attempt(store, clock, run_id)
    assert await store.runs_with_running_attempts({"mock"}) == [run_id]
    # Only the actions asked for: a remote attempt keeps its lease across a restart.
    assert await store.runs_with_running_attempts({"agent"}) == []


async def _ready_draft(store: Store, clock: FakeClock, draft_id: str) -> DraftRecord:
    compiled = compile_definition(workflow(mock("x"), workflow_id=f"wf-{draft_id[-4:]}"))
    now = clock.now()
    generating = DraftRecord(draft_id, DraftStatus.GENERATING, "p", "mock", "op", now, now)
    assert not isinstance(await store.create_draft(generating), Replayed)
    ready = replace(
        generating,
        status=DraftStatus.READY,
        workflow_id=compiled.workflow_id,
        definition=compiled.document(),
        definition_hash=compiled.definition_hash,
    )
    assert await store.finish_draft(ready)
    return ready


def render_draft(draft: DraftRecord) -> Outcome:
    return Outcome(200, {"draft_id": draft.draft_id, "status": draft.status.value})


async def test_a_drafts_decision_and_its_idempotency_record_are_one_write(
    store: Store, clock: FakeClock
) -> None:
    approved_id, rejected_id = (f"0190a0b0-c0d0-7000-8000-00000000000{i}" for i in (1, 2))
    draft = await _ready_draft(store, clock, approved_id)
    assert draft.definition_hash is not None
    version = VersionRecord(
        draft.workflow_id or "", 1, draft.definition_hash, 1, clock.now(), draft.definition or {}
    )
    workflow_record = WorkflowRecord(version.workflow_id, 1, "", clock.now(), clock.now())

    async def approve(record: PendingRecord[DraftRecord], hash_: str) -> DraftRecord | Replayed:
        approval = DraftApproval(approved_id, hash_, version, workflow_record, clock.now())
        return await store.approve_draft(approval, record)

    # A refused decision saves no record.
    with pytest.raises(DraftChanged):
        await approve(PendingRecord(claim("refused", "h0"), render_draft), "sha256:" + "0" * 64)
    assert await store.find_outcome(claim("refused", "h0")) is None
    # The decision saves its rendered outcome with it.
    approved = await approve(PendingRecord(claim("ok", "h1"), render_draft), draft.definition_hash)
    assert isinstance(approved, DraftRecord)
    assert approved.status is DraftStatus.APPROVED
    assert await store.find_outcome(claim("ok", "h1")) == render_draft(approved)
    again = await approve(PendingRecord(claim("ok", "h1"), render_draft), draft.definition_hash)
    assert again == Replayed(render_draft(approved))
    with pytest.raises(IdempotencyKeyReused):
        await approve(PendingRecord(claim("ok", "other"), render_draft), draft.definition_hash)
    # A second approval with another key: the draft as it is, and its own record.
    same = await approve(PendingRecord(claim("ok2", "h2"), render_draft), draft.definition_hash)
    assert same == approved
    assert await store.find_outcome(claim("ok2", "h2")) == render_draft(approved)

    await _ready_draft(store, clock, rejected_id)
    rejected = await store.reject_draft(
        rejected_id, clock.now(), PendingRecord(claim("no", "h3"), render_draft)
    )
    assert isinstance(rejected, DraftRecord)
    assert rejected.status is DraftStatus.REJECTED
    assert await store.find_outcome(claim("no", "h3")) == render_draft(rejected)
    replayed = await store.reject_draft(
        rejected_id, clock.now(), PendingRecord(claim("no", "h3"), render_draft)
    )
    assert replayed == Replayed(render_draft(rejected))


async def test_applying_a_definition_writes_a_version_only_when_it_differs(
    store: Store, clock: FakeClock
) -> None:
    def new_version(*keys: str) -> NewVersion:
        compiled = compile_definition(workflow(*(mock(k) for k in keys), workflow_id="applied"))
        return NewVersion(
            "applied",
            compiled.definition_hash,
            len(keys),
            clock.now(),
            compiled.document(),
            compiled.definition.description,
        )

    first = await store.apply_version(new_version("a"))
    assert isinstance(first, AppliedVersion)
    assert (first.version.version, first.created) == (1, True)
    assert (await store.get_workflow("applied")).latest_version == 1
    same = await store.apply_version(new_version("a"))
    assert same == AppliedVersion(first.version, created=False)
    changed = await store.apply_version(new_version("a", "b"))
    assert isinstance(changed, AppliedVersion)
    assert (changed.version.version, changed.created) == (2, True)
    assert (
        await store.get_version("applied", 2)
    ).definition_hash == changed.version.definition_hash

    rendered: list[AppliedVersion] = []

    def render(applied: AppliedVersion) -> Outcome:
        rendered.append(applied)
        return Outcome(201 if applied.created else 200, {"version": applied.version.version})

    keyed = PendingRecord(claim("apply-1"), render)
    replay_of = await store.apply_version(new_version("a", "b"), keyed)
    assert replay_of == AppliedVersion(changed.version, created=False)
    replayed = await store.apply_version(new_version("a", "b"), keyed)
    assert replayed == Replayed(Outcome(200, {"version": 2}))
    assert len(rendered) == 1


async def test_an_outcome_keeps_its_keys_in_the_order_written(store: Store) -> None:
    # SPEC §6: a replay is the original body again; JSONB would sort an object's keys.
    body = {"zeta": 1, "alpha": {"y": 2, "x": [{"b": 1, "a": 2}]}, "mid": "é"}
    assert await store.save_outcome(IdempotencyRecord(claim("ordered"), Outcome(202, body))) is None
    found = await store.find_outcome(claim("ordered"))
    assert found is not None
    assert json.dumps(found.body) == json.dumps(body)
