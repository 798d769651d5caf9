"""The async client: the same behaviour as the blocking one, awaited."""

from __future__ import annotations

import httpx
import pytest

from tests.sdk.fakes import (
    RUN_ID,
    FakeApi,
    body,
    json_response,
    pages_of_runs,
    problem,
    responses,
    run_body,
)
from workload_sdk import (
    APIConnectionError,
    AsyncClient,
    AsyncPager,
    NotFound,
    Page,
    RunStatus,
    Unavailable,
    WaitTimeout,
)

pytestmark = pytest.mark.anyio

BASE = "http://api.test"


async def test_every_method_sends_its_request_and_parses_its_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WORKLOAD_URL", BASE)
    monkeypatch.setenv("WORKLOAD_TOKEN", "env-token")
    api = FakeApi()
    async with AsyncClient(transport=api.transport) as client:
        assert client.base_url == BASE
        version = await client.workflows.create({"id": "wf", "tasks": []}, idempotency_key="k1")
        assert version.version == 1
        assert [w.workflow_id async for w in client.workflows.list()] == ["wf"]
        assert (await client.workflows.list_page(limit=1)).items[0].workflow_id == "wf"
        assert (await client.workflows.get("wf")).latest_version == 2
        assert (await client.versions.create("wf", {"tasks": []})).workflow_id == "wf"
        assert [v.version async for v in client.versions.list("wf")] == [1]
        assert (await client.versions.list_page("wf")).next_cursor is None
        assert (await client.versions.get("wf", 1)).definition["id"] == "wf"
        run = await client.runs.start("wf", {"doc": 1}, version=1)
        assert run.run_id == RUN_ID
        assert body(api.last) == {"input": {"doc": 1}}
        assert [r.run_id async for r in client.runs.list(workflow_id="wf")] == [RUN_ID]
        assert len((await client.runs.list_page(status="pending")).items) == 1
        assert (await client.runs.get(RUN_ID)).status is RunStatus.PENDING
        fetched, etag = await client.runs.get_with_etag(RUN_ID)
        assert (fetched.revision, etag) == (1, '"1"')
        canceled = await client.runs.cancel(RUN_ID, if_revision=fetched.revision)
        assert api.last.headers["if-match"] == '"1"'
        assert canceled.cancel_requested
        assert [t.task_key async for t in client.runs.tasks(RUN_ID)] == ["a"]
        assert (await client.runs.tasks_page(RUN_ID)).items[0].attempt_count == 1
        assert (await client.runs.task(RUN_ID, "a")).max_attempts == 1
        assert [a.attempt async for a in client.runs.attempts(RUN_ID, "a")] == [1]
        assert (await client.runs.attempts_page(RUN_ID, "a")).items[0].error is not None
        assert [e.type async for e in client.runs.events(RUN_ID)] == ["run.created"]
        assert (await client.runs.events_page(RUN_ID, limit=3)).items[0].sequence == 1
        assert [s.kind async for s in client.runs.steps(RUN_ID, "agent")] == [
            "model_call",
            "tool_call",
        ]
        steps_page = await client.runs.steps_page(RUN_ID, "agent", limit=2, cursor="c")
        assert dict(api.last.url.params) == {"limit": "2", "cursor": "c"}
        assert api.last.url.path == f"/api/v1/runs/{RUN_ID}/tasks/agent/steps"
        assert steps_page.items[1].worker_id == "w-1"
    assert all(r.headers["authorization"] == "Bearer env-token" for r in api.requests)
    assert api.requests[0].headers["idempotency-key"] == "k1"


async def test_list_follows_cursors_across_three_pages() -> None:
    api = FakeApi(pages_of_runs(3))
    async with AsyncClient(base_url=BASE, transport=api.transport) as client:
        pager = client.runs.list(limit=2)
        assert isinstance(pager, AsyncPager)
        ids = [run.run_id async for run in pager]
        pages = [page async for page in client.runs.list(limit=2).pages()]
        rest = await client.runs.list(limit=2).to_list()
    assert ids == [f"run-{p}-{n}" for p in range(3) for n in range(2)]
    assert [r.url.params.get("cursor") for r in api.requests[:3]] == [None, "c1", "c2"]
    assert all(isinstance(p, Page) for p in pages)
    assert [p.next_cursor for p in pages] == ["c1", "c2", None]
    assert [r.run_id for r in rest] == ids


async def test_a_write_is_sent_once_and_the_key_allows_a_retry() -> None:
    api = FakeApi(responses(httpx.ConnectError("refused"), json_response(202, run_body())))
    async with AsyncClient(base_url=BASE, max_retries=3, transport=api.transport) as client:
        with pytest.raises(APIConnectionError) as caught:
            await client.runs.start("wf", version=1)
        assert len(api.requests) == 1
        key = caught.value.idempotency_key
        assert key is not None
        await client.runs.start("wf", version=1, idempotency_key=key)
    assert [r.headers["idempotency-key"] for r in api.requests] == [key, key]


async def test_reads_retry_connection_errors() -> None:
    api = FakeApi(responses(httpx.ConnectError("refused"), json_response(200, run_body())))
    async with AsyncClient(base_url=BASE, transport=api.transport) as client:
        assert (await client.runs.get("r1")).run_id == RUN_ID
    assert len(api.requests) == 2


async def test_reads_retry_unavailable_then_raise() -> None:
    api = FakeApi(responses(problem(503, "unavailable")))
    async with AsyncClient(base_url=BASE, max_retries=1, transport=api.transport) as client:
        with pytest.raises(Unavailable) as caught:
            await client.runs.get("r1")
    assert caught.value.code == "unavailable"
    assert len(api.requests) == 2


async def test_problems_raise_their_family() -> None:
    api = FakeApi(responses(problem(404, "run_not_found", "run 'r1' does not exist")))
    async with AsyncClient(base_url=BASE, transport=api.transport) as client:
        with pytest.raises(NotFound) as caught:
            await client.runs.get("r1")
    assert (caught.value.code, caught.value.request_id) == ("run_not_found", "req-run_not_found")


async def test_wait_for_run() -> None:
    api = FakeApi(
        responses(
            json_response(200, run_body("running", 2)),
            json_response(200, run_body("canceled", 4, cancel_requested=True)),
        )
    )
    async with AsyncClient(base_url=BASE, transport=api.transport) as client:
        run = await client.wait_for_run(RUN_ID, timeout=5, poll_interval=0.01)
    assert (run.status, run.cancel_requested) == (RunStatus.CANCELED, True)


async def test_wait_for_run_times_out() -> None:
    api = FakeApi(responses(json_response(200, run_body("pending"))))
    async with AsyncClient(base_url=BASE, transport=api.transport) as client:
        with pytest.raises(WaitTimeout) as caught:
            await client.wait_for_run(RUN_ID, timeout=0.03, poll_interval=0.01)
    assert caught.value.run.status is RunStatus.PENDING
