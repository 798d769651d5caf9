"""The SDK against the real service: every method, sync and async, over real HTTP."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.plugins.live_api import OPERATOR_TOKEN, VIEWER_TOKEN, LiveApi
from tests.waiting import wait_until
from workload_sdk import (
    AttemptStatus,
    Client,
    Conflict,
    Forbidden,
    InvalidRequest,
    NotFound,
    PreconditionFailed,
    Run,
    RunStatus,
    TaskStatus,
    Unauthenticated,
    Version,
    WaitTimeout,
    Workflow,
    new_idempotency_key,
)

pytestmark = pytest.mark.real_http

RETRYING: dict[str, Any] = {
    "id": "retrying",
    "description": "fails twice, then succeeds",
    "tasks": [
        {"key": "fetch", "action": "mock", "input": {"sleep_ms": 10}},
        {
            "key": "flaky",
            "action": "mock",
            "depends_on": ["fetch"],
            "input": {"fail_first": 2, "output": {"ok": True}},
            "retry": {"max_attempts": 3, "initial_backoff_seconds": 0.05},
        },
    ],
}
SLOW: dict[str, Any] = {
    "id": "slow",
    "tasks": [
        {"key": "long", "action": "mock", "input": {"sleep_ms": 60000}},
        {"key": "other", "action": "mock", "input": {"sleep_ms": 60000}},
        {"key": "after", "action": "mock", "depends_on": ["long"]},
    ],
}
QUICK: dict[str, Any] = {"id": "quick", "tasks": [{"key": "a", "action": "mock"}]}
MISSING_RUN = "00000000-0000-7000-8000-000000000000"


@pytest.fixture
def operator(live_api: LiveApi) -> Iterator[Client]:
    with live_api.sdk(OPERATOR_TOKEN, timeout=30) as client:
        yield client


@pytest.fixture
def viewer(live_api: LiveApi) -> Iterator[Client]:
    with live_api.sdk(VIEWER_TOKEN) as client:
        yield client


def test_workflows_and_versions(operator: Client, viewer: Client) -> None:
    v1 = operator.workflows.create(RETRYING)
    assert isinstance(v1, Version)
    assert (v1.workflow_id, v1.version, v1.task_count) == ("retrying", 1, 2)
    assert v1.definition_hash.startswith("sha256:")
    assert v1.definition["tasks"][0]["timeout_seconds"] == 300
    assert v1.created_at.tzinfo is not None

    workflow = viewer.workflows.get("retrying")
    assert isinstance(workflow, Workflow)
    assert (workflow.latest_version, workflow.description) == (1, RETRYING["description"])

    v2 = operator.versions.create("retrying", {"tasks": [{"key": "only", "action": "mock"}]})
    assert (v2.version, v2.task_count, v2.definition["id"]) == (2, 1, "retrying")
    operator.workflows.create(QUICK)
    operator.workflows.create(SLOW)

    assert [w.workflow_id for w in viewer.workflows.list(limit=1)] == ["retrying", "quick", "slow"]
    first = viewer.workflows.list_page(limit=2)
    assert [w.workflow_id for w in first.items] == ["retrying", "quick"]
    rest = viewer.workflows.list_page(limit=2, cursor=first.next_cursor)
    assert ([w.workflow_id for w in rest.items], rest.next_cursor) == (["slow"], None)

    assert [v.version for v in viewer.versions.list("retrying", limit=1)] == [1, 2]
    page = viewer.versions.list_page("retrying", limit=1)
    assert [v.version for v in page.items] == [1]
    assert page.next_cursor is not None
    assert viewer.versions.get("retrying", 1) == v1
    assert viewer.workflows.get("retrying").latest_version == 2

    with pytest.raises(Conflict) as exists:
        operator.workflows.create(RETRYING)
    assert exists.value.code == "workflow_exists"
    with pytest.raises(InvalidRequest) as mismatch:
        operator.versions.create("retrying", {**QUICK})
    assert mismatch.value.code == "workflow_id_mismatch"
    with pytest.raises(NotFound) as missing:
        viewer.versions.get("retrying", 9)
    assert missing.value.code == "version_not_found"
    with pytest.raises(InvalidRequest) as invalid:
        operator.workflows.create({"id": "bad", "tasks": [{"key": "a", "action": "mock", "x": 1}]})
    assert invalid.value.code == "invalid_definition"
    assert invalid.value.errors
    assert all(item.path.startswith("/") for item in invalid.value.errors)


def test_a_run_that_retries(operator: Client, viewer: Client) -> None:
    operator.workflows.create(RETRYING)
    run = operator.runs.start("retrying", {"doc": 7}, version=1)
    assert isinstance(run, Run)
    assert (run.status, run.revision, run.input) == (RunStatus.PENDING, 1, {"doc": 7})
    assert run.task_counts[TaskStatus.PENDING] == 2

    final = viewer.wait_for_run(run.run_id, timeout=20, poll_interval=0.02)
    assert final.status is RunStatus.SUCCEEDED
    assert final.is_terminal
    assert final.finished_at is not None
    assert final.revision > run.revision
    assert final.task_counts[TaskStatus.SUCCEEDED] == 2

    tasks = list(viewer.runs.tasks(run.run_id, limit=1))
    assert [(t.task_key, t.status) for t in tasks] == [
        ("fetch", TaskStatus.SUCCEEDED),
        ("flaky", TaskStatus.SUCCEEDED),
    ]
    flaky = viewer.runs.task(run.run_id, "flaky")
    assert (flaky.attempt_count, flaky.max_attempts, flaky.depends_on) == (3, 3, ["fetch"])
    assert flaky.output == {"ok": True}
    assert flaky.error is None
    assert viewer.runs.tasks_page(run.run_id).next_cursor is None

    attempts = list(viewer.runs.attempts(run.run_id, "flaky", limit=2))
    assert [a.attempt for a in attempts] == [1, 2, 3]
    assert [a.status for a in attempts] == [
        AttemptStatus.FAILED,
        AttemptStatus.FAILED,
        AttemptStatus.SUCCEEDED,
    ]
    assert attempts[0].error is not None
    assert (attempts[0].error.code, attempts[0].error.retryable) == ("mock_failure", True)
    assert viewer.runs.attempts_page(run.run_id, "flaky").items == attempts

    events = list(viewer.runs.events(run.run_id, limit=3))
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert (events[0].type, events[-1].type) == ("run.created", "run.succeeded")
    assert [e.type for e in events].count("task.waiting_retry") == 2
    assert len(events) > 6  # so the iterator followed at least three pages
    first_page = viewer.runs.events_page(run.run_id, limit=3)
    assert first_page.items == events[:3]

    assert [r.run_id for r in viewer.runs.list(workflow_id="retrying", status="succeeded")] == [
        run.run_id
    ]
    assert viewer.runs.list_page(status=RunStatus.FAILED).items == []


def test_a_replayed_start_returns_the_same_run(operator: Client, viewer: Client) -> None:
    operator.workflows.create(QUICK)
    key = new_idempotency_key()
    first = operator.runs.start("quick", {"n": 1}, version=1, idempotency_key=key)
    replay = operator.runs.start("quick", {"n": 1}, version=1, idempotency_key=key)
    assert replay == first
    with pytest.raises(Conflict) as reused:
        operator.runs.start("quick", {"n": 2}, version=1, idempotency_key=key)
    assert (reused.value.code, reused.value.idempotency_key) == ("idempotency_key_reused", key)
    assert reused.value.request_id
    assert [r.run_id for r in viewer.runs.list()] == [first.run_id]
    other = operator.runs.start("quick", {"n": 1}, version=1)  # a fresh key: another run
    assert other.run_id != first.run_id


def test_cancel_with_if_revision(operator: Client, viewer: Client) -> None:
    operator.workflows.create(SLOW)
    run = operator.runs.start("slow", version=1)
    # Both independent tasks running: nothing commits again until the cancel.
    wait_until(lambda: viewer.runs.get(run.run_id).task_counts[TaskStatus.RUNNING] == 2)
    current, etag = viewer.runs.get_with_etag(run.run_id)
    assert etag == f'"{current.revision}"'
    with pytest.raises(WaitTimeout) as waited:
        viewer.wait_for_run(run.run_id, timeout=0.05, poll_interval=0.01)
    assert waited.value.run.status is RunStatus.RUNNING

    with pytest.raises(PreconditionFailed) as stale:
        operator.runs.cancel(run.run_id, if_revision=current.revision - 1)
    assert stale.value.code == "precondition_failed"
    assert viewer.runs.get(run.run_id).revision == current.revision

    accepted = operator.runs.cancel(run.run_id, if_revision=current.revision)
    assert accepted.cancel_requested
    final = viewer.wait_for_run(run.run_id, timeout=20, poll_interval=0.02)
    assert final.status is RunStatus.CANCELED
    assert {t.status for t in viewer.runs.tasks(run.run_id)} == {TaskStatus.CANCELED}
    assert [a.status for a in viewer.runs.attempts(run.run_id, "long")] == [AttemptStatus.CANCELED]
    again = operator.runs.cancel(run.run_id)  # a canceled run: a no-op answering the run
    assert (again.status, again.revision) == (RunStatus.CANCELED, final.revision)


def test_errors_carry_request_ids(live_api: LiveApi, operator: Client, viewer: Client) -> None:
    operator.workflows.create(QUICK)
    done = operator.wait_for_run(operator.runs.start("quick", version=1).run_id, timeout=20)
    with pytest.raises(Conflict) as finished:
        operator.runs.cancel(done.run_id)
    assert (finished.value.status, finished.value.code) == (409, "run_finished")
    assert finished.value.request_id
    assert finished.value.response is not None
    assert finished.value.request_id == finished.value.response.headers["x-request-id"]

    lookups: list[tuple[Callable[[], object], str]] = [
        (lambda: viewer.runs.get(MISSING_RUN), "run_not_found"),
        (lambda: viewer.runs.task(done.run_id, "zz"), "task_not_found"),
        (lambda: viewer.workflows.get("nope"), "workflow_not_found"),
    ]
    for call, code in lookups:
        with pytest.raises(NotFound) as missing:
            call()
        assert (missing.value.status, missing.value.code) == (404, code)
        assert missing.value.request_id

    with pytest.raises(Forbidden) as forbidden:
        viewer.runs.start("quick", version=1)
    assert forbidden.value.code == "forbidden"
    with (
        live_api.sdk("wrong") as stranger,
        pytest.raises(Unauthenticated) as unauthenticated,
    ):
        stranger.workflows.get("quick")
    assert unauthenticated.value.code == "unauthenticated"
    with pytest.raises(InvalidRequest) as cursor:
        viewer.runs.list_page(cursor="not-a-cursor")
    assert cursor.value.code == "invalid_cursor"


@pytest.mark.anyio
async def test_the_async_client_end_to_end(live_api: LiveApi) -> None:
    async with (
        live_api.async_sdk(OPERATOR_TOKEN) as op,
        live_api.async_sdk(VIEWER_TOKEN) as viewer,
    ):
        v1 = await op.workflows.create(RETRYING)
        assert v1.version == 1
        await op.workflows.create(SLOW)
        assert [w.workflow_id async for w in viewer.workflows.list(limit=1)] == [
            "retrying",
            "slow",
        ]
        assert (await viewer.workflows.list_page(limit=1)).next_cursor is not None
        assert (await viewer.workflows.get("slow")).latest_version == 1
        v2 = await op.versions.create("retrying", RETRYING)
        assert v2.version == 2
        assert [v.version async for v in viewer.versions.list("retrying", limit=1)] == [1, 2]
        assert len((await viewer.versions.list_page("retrying")).items) == 2
        assert (await viewer.versions.get("retrying", 2)).definition_hash == v1.definition_hash

        key = new_idempotency_key()
        run = await op.runs.start("retrying", {"a": 1}, version=2, idempotency_key=key)
        assert (await op.runs.start("retrying", {"a": 1}, version=2, idempotency_key=key)) == run
        final = await viewer.wait_for_run(run.run_id, timeout=20, poll_interval=0.02)
        assert final.status is RunStatus.SUCCEEDED
        assert [t.task_key async for t in viewer.runs.tasks(run.run_id)] == ["fetch", "flaky"]
        assert (await viewer.runs.tasks_page(run.run_id, limit=1)).next_cursor is not None
        assert (await viewer.runs.task(run.run_id, "flaky")).attempt_count == 3
        attempts = [a.status async for a in viewer.runs.attempts(run.run_id, "flaky", limit=1)]
        assert attempts == ["failed", "failed", "succeeded"]
        assert len((await viewer.runs.attempts_page(run.run_id, "flaky")).items) == 3
        events = await viewer.runs.events(run.run_id, limit=4).to_list()
        assert events[-1].type == "run.succeeded"
        assert (await viewer.runs.events_page(run.run_id, limit=2)).items == events[:2]
        assert [r.run_id async for r in viewer.runs.list(workflow_id="retrying")] == [run.run_id]
        assert (await viewer.runs.list_page(status="running")).items == []

        slow = await op.runs.start("slow", version=1)
        current, etag = await viewer.runs.get_with_etag(slow.run_id)
        assert etag == f'"{current.revision}"'
        with pytest.raises(PreconditionFailed):
            await op.runs.cancel(slow.run_id, if_revision=current.revision + 100)
        canceled = await op.runs.cancel(slow.run_id)
        assert canceled.cancel_requested
        assert (await viewer.wait_for_run(slow.run_id, timeout=20)).status is RunStatus.CANCELED
        with pytest.raises(Conflict) as finished:
            await op.runs.cancel(run.run_id)
        assert finished.value.code == "run_finished"
        assert finished.value.request_id
        with pytest.raises(NotFound) as missing:
            await viewer.runs.get(MISSING_RUN)
        assert (missing.value.code, bool(missing.value.request_id)) == ("run_not_found", True)
        assert (await viewer.runs.get(slow.run_id)).status is RunStatus.CANCELED


def test_stream_events_follows_a_run_to_its_end(operator: Client, viewer: Client) -> None:
    operator.workflows.create(RETRYING)
    run = operator.runs.start("retrying", version=1)
    streamed = list(viewer.runs.stream_events(run.run_id, timeout=30))
    assert [e.sequence for e in streamed] == list(range(1, len(streamed) + 1))
    assert streamed[-1].type == "run.succeeded"
    assert streamed == list(viewer.runs.events(run.run_id))
    later = list(viewer.runs.stream_events(run.run_id, after=streamed[2].sequence, timeout=30))
    assert later == streamed[3:]
    with pytest.raises(NotFound):
        list(viewer.runs.stream_events(MISSING_RUN))


@pytest.mark.anyio
async def test_the_async_client_streams_events(live_api: LiveApi) -> None:
    async with live_api.async_sdk(OPERATOR_TOKEN) as op:
        await op.workflows.create(QUICK)
        run = await op.runs.start("quick", version=1)
        streamed = [e async for e in op.runs.stream_events(run.run_id, timeout=30)]
        assert streamed[-1].type == "run.succeeded"
        assert streamed == await op.runs.events(run.run_id).to_list()
