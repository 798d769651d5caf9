"""The blocking client: configuration, requests on the wire, idempotency, retries, models."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from tests.sdk.fakes import (
    BASE,
    MODEL_STEP,
    RUN_ID,
    TASK,
    TOOL_STEP,
    USAGE,
    FakeApi,
    body,
    json_response,
    page,
    pages_of_runs,
    problem,
    responses,
    run_body,
)
from workload_sdk import (
    APIConnectionError,
    APITimeoutError,
    AsyncClient,
    Attempt,
    AttemptStatus,
    Client,
    Conflict,
    ErrorObject,
    Event,
    NotFound,
    Page,
    Run,
    RunStatus,
    Step,
    TaskRun,
    TaskStatus,
    Unavailable,
    Usage,
    Version,
    VersionSummary,
    WaitTimeout,
    Workflow,
    new_idempotency_key,
)

# -- configuration ------------------------------------------------------------------------------


def test_arguments_configure_url_token_and_headers(client: Client, api: FakeApi) -> None:
    client.workflows.get("wf")
    request = api.last
    assert str(request.url) == f"{BASE}/api/v1/workflows/wf"
    assert request.headers["authorization"] == "Bearer tok"
    assert request.headers["accept"] == "application/json"
    assert request.headers["user-agent"].startswith("workload-sdk/")
    assert client.base_url == BASE
    assert client.max_retries == 2


def test_environment_configures_url_and_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKLOAD_URL", "http://from-env:9000/prefix/")
    monkeypatch.setenv("WORKLOAD_TOKEN", "env-token")
    api = FakeApi()
    with Client(transport=api.transport) as client:
        client.runs.get("r1")
    assert str(api.last.url) == "http://from-env:9000/prefix/api/v1/runs/r1"
    assert api.last.headers["authorization"] == "Bearer env-token"


def test_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKLOAD_URL", "http://from-env:9000")
    monkeypatch.setenv("WORKLOAD_TOKEN", "env-token")
    api = FakeApi()
    with Client(base_url=BASE, token="arg-token", transport=api.transport) as client:
        client.runs.get("r1")
    assert api.last.url.host == "api.test"
    assert api.last.headers["authorization"] == "Bearer arg-token"


@pytest.mark.parametrize(
    "token", ["tok\nen", "tok\r\n", "tok\x7f", "tok\u00e9", "\x00", "tok ", " tok", "tok\t", " "]
)
@pytest.mark.parametrize("client_class", [Client, AsyncClient])
def test_a_token_no_header_can_carry_is_refused_at_once(
    token: str, client_class: type[Client] | type[AsyncClient]
) -> None:
    # Not a connection error at each request (which a read would retry), nor a header forged.
    with pytest.raises(ValueError, match="the token holds what an HTTP header cannot carry"):
        client_class(base_url=BASE, token=token)


def test_defaults_without_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORKLOAD_URL", raising=False)
    monkeypatch.delenv("WORKLOAD_TOKEN", raising=False)
    api = FakeApi()
    with Client(transport=api.transport) as client:
        assert client.base_url == "http://127.0.0.1:8080"
        client.runs.get("r1")
    assert "authorization" not in api.last.headers


def test_invalid_options_are_refused() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        Client(base_url=BASE, max_retries=-1)


def test_the_sdk_imports_no_server_package() -> None:
    code = (
        "import sys, workload_sdk\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in {"
        "'workload_api', 'workload_domain', 'workload_engine', 'workload_store_postgres',"
        "'workload_cli', 'starlette', 'psycopg', 'anyio'}]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- every operation on the wire ----------------------------------------------------------------

Call = Callable[[Client], Any]
OPERATIONS: list[tuple[str, Call, str, str, dict[str, str], Any]] = [
    (
        "workflows.create",
        lambda c: c.workflows.create({"id": "wf", "tasks": []}),
        "POST",
        "/api/v1/workflows",
        {},
        {"id": "wf", "tasks": []},
    ),
    (
        "workflows.list_page",
        lambda c: c.workflows.list_page(),
        "GET",
        "/api/v1/workflows",
        {},
        None,
    ),
    ("workflows.get", lambda c: c.workflows.get("wf"), "GET", "/api/v1/workflows/wf", {}, None),
    (
        "versions.create",
        lambda c: c.versions.create("wf", {"tasks": []}),
        "POST",
        "/api/v1/workflows/wf/versions",
        {},
        {"tasks": []},
    ),
    (
        "versions.list_page",
        lambda c: c.versions.list_page("wf", limit=5, cursor="cur"),
        "GET",
        "/api/v1/workflows/wf/versions",
        {"limit": "5", "cursor": "cur"},
        None,
    ),
    (
        "versions.get",
        lambda c: c.versions.get("wf", 2),
        "GET",
        "/api/v1/workflows/wf/versions/2",
        {},
        None,
    ),
    (
        "runs.start",
        lambda c: c.runs.start("wf", {"doc": 1}, version=1),
        "POST",
        "/api/v1/workflows/wf/versions/1/runs",
        {},
        {"input": {"doc": 1}},
    ),
    (
        "runs.start without input",
        lambda c: c.runs.start("wf", version=1),
        "POST",
        "/api/v1/workflows/wf/versions/1/runs",
        {},
        None,
    ),
    (
        "runs.list_page",
        lambda c: c.runs.list_page(workflow_id="wf", status=RunStatus.FAILED, limit=7),
        "GET",
        "/api/v1/runs",
        {"workflow_id": "wf", "status": "failed", "limit": "7"},
        None,
    ),
    ("runs.get", lambda c: c.runs.get("r1"), "GET", "/api/v1/runs/r1", {}, None),
    ("runs.cancel", lambda c: c.runs.cancel("r1"), "POST", "/api/v1/runs/r1/cancel", {}, None),
    (
        "runs.tasks_page",
        lambda c: c.runs.tasks_page("r1"),
        "GET",
        "/api/v1/runs/r1/tasks",
        {},
        None,
    ),
    ("runs.task", lambda c: c.runs.task("r1", "a"), "GET", "/api/v1/runs/r1/tasks/a", {}, None),
    (
        "runs.attempts_page",
        lambda c: c.runs.attempts_page("r1", "a"),
        "GET",
        "/api/v1/runs/r1/tasks/a/attempts",
        {},
        None,
    ),
    (
        "runs.steps_page",
        lambda c: c.runs.steps_page("r1", "agent", limit=5, cursor="x"),
        "GET",
        "/api/v1/runs/r1/tasks/agent/steps",
        {"limit": "5", "cursor": "x"},
        None,
    ),
    (
        "runs.events_page",
        lambda c: c.runs.events_page("r1", cursor="x"),
        "GET",
        "/api/v1/runs/r1/events",
        {"cursor": "x"},
        None,
    ),
    # Approvals and drafts (SPEC §11): decisions name what was shown.
    (
        "approvals.list_page",
        lambda c: c.approvals.list_page(status="pending", limit=5, cursor="c1"),
        "GET",
        "/api/v1/approvals",
        {"status": "pending", "limit": "5", "cursor": "c1"},
        None,
    ),
    ("approvals.get", lambda c: c.approvals.get("ap-1"), "GET", "/api/v1/approvals/ap-1", {}, None),
    (
        "approvals.approve",
        lambda c: c.approvals.approve("ap-1", "sha256:ab"),
        "POST",
        "/api/v1/approvals/ap-1/decision",
        {},
        {"decision": "approve", "arguments_digest": "sha256:ab"},
    ),
    (
        "approvals.reject with a comment",
        lambda c: c.approvals.reject("ap-1", "sha256:ab", comment="not on a Friday"),
        "POST",
        "/api/v1/approvals/ap-1/decision",
        {},
        {"decision": "reject", "arguments_digest": "sha256:ab", "comment": "not on a Friday"},
    ),
    (
        "drafts.create",
        lambda c: c.drafts.create("fetch, then summarize"),
        "POST",
        "/api/v1/drafts",
        {},
        {"prompt": "fetch, then summarize", "model": "mock"},
    ),
    (
        "drafts.create with every field",
        lambda c: c.drafts.create("p", workflow_id="wf", model="mock", script=[{"content": "{}"}]),
        "POST",
        "/api/v1/drafts",
        {},
        {"prompt": "p", "model": "mock", "workflow_id": "wf", "script": [{"content": "{}"}]},
    ),
    (
        "drafts.list_page",
        lambda c: c.drafts.list_page(limit=3, cursor="c2"),
        "GET",
        "/api/v1/drafts",
        {"limit": "3", "cursor": "c2"},
        None,
    ),
    ("drafts.get", lambda c: c.drafts.get("d-1"), "GET", "/api/v1/drafts/d-1", {}, None),
    (
        "drafts.approve",
        lambda c: c.drafts.approve("d-1", "sha256:cd"),
        "POST",
        "/api/v1/drafts/d-1/approve",
        {},
        {"definition_hash": "sha256:cd"},
    ),
    (
        "drafts.reject",
        lambda c: c.drafts.reject("d-1"),
        "POST",
        "/api/v1/drafts/d-1/reject",
        {},
        None,
    ),
    # The worker protocol (SPEC §10): POSTs fenced by the lease, with no Idempotency-Key.
    (
        "attempts.claim",
        lambda c: c.attempts.claim("w-1", ["default"], ["resize", "ocr"]),
        "POST",
        "/api/v1/workers/w-1/claim",
        {},
        {
            "queues": ["default"],
            "actions": ["resize", "ocr"],
            "max_attempts": 1,
            "wait_seconds": 20,
        },
    ),
    (
        "attempts.claim batched",
        lambda c: c.attempts.claim("w-1", ("q",), ("a",), max_attempts=8, wait_seconds=0.5),
        "POST",
        "/api/v1/workers/w-1/claim",
        {},
        {"queues": ["q"], "actions": ["a"], "max_attempts": 8, "wait_seconds": 0.5},
    ),
    (
        "attempts.heartbeat",
        lambda c: c.attempts.heartbeat("att-1", "tok"),
        "POST",
        "/api/v1/attempts/att-1/heartbeat",
        {},
        {"lease_token": "tok"},
    ),
    (
        "attempts.heartbeat with progress",
        lambda c: c.attempts.heartbeat("att-1", "tok", {"done": 3}),
        "POST",
        "/api/v1/attempts/att-1/heartbeat",
        {},
        {"lease_token": "tok", "progress": {"done": 3}},
    ),
    (
        "attempts.complete",
        lambda c: c.attempts.complete("att-1", "tok", {"ok": True}),
        "POST",
        "/api/v1/attempts/att-1/complete",
        {},
        {"lease_token": "tok", "output": {"ok": True}},
    ),
    (
        "attempts.fail",
        lambda c: c.attempts.fail("att-1", "tok", "ValueError", "bad"),
        "POST",
        "/api/v1/attempts/att-1/fail",
        {},
        {
            "lease_token": "tok",
            "error": {"code": "ValueError", "message": "bad", "retryable": True},
        },
    ),
    (
        "attempts.fail not retryable",
        lambda c: c.attempts.fail("att-1", "tok", "Bad", "no", retryable=False),
        "POST",
        "/api/v1/attempts/att-1/fail",
        {},
        {"lease_token": "tok", "error": {"code": "Bad", "message": "no", "retryable": False}},
    ),
    (
        "workers.list_page",
        lambda c: c.workers.list_page(limit=5, cursor="c1"),
        "GET",
        "/api/v1/workers",
        {"limit": "5", "cursor": "c1"},
        None,
    ),
    ("queues.list", lambda c: c.queues.list(), "GET", "/api/v1/queues", {}, None),
]
LEASE_FENCED = re.compile(r"^/api/v1/(workers/[^/]+/claim|attempts/[^/]+/[a-z]+)$")


@pytest.mark.parametrize(
    ("call", "method", "path", "params", "sent"),
    [op[1:] for op in OPERATIONS],
    ids=[op[0] for op in OPERATIONS],
)
def test_each_operation_sends_its_request(
    client: Client,
    api: FakeApi,
    call: Call,
    method: str,
    path: str,
    params: dict[str, str],
    sent: Any,
) -> None:
    call(client)
    request = api.last
    assert (request.method, request.url.path, dict(request.url.params)) == (method, path, params)
    assert body(request) == sent
    if method == "POST" and not LEASE_FENCED.match(path):
        uuid.UUID(request.headers["idempotency-key"])  # a generated UUID
        if sent is not None:
            assert request.headers["content-type"] == "application/json"
    else:
        assert "idempotency-key" not in request.headers


def test_path_segments_are_escaped(client: Client, api: FakeApi) -> None:
    client.runs.task("a/../b", "k?x=1")
    assert api.last.url.raw_path == b"/api/v1/runs/a%2F..%2Fb/tasks/k%3Fx%3D1"


@pytest.mark.parametrize(("given", "sent"), [(".", "%2E"), ("..", "%2E%2E"), ("...", "...")])
def test_a_dot_segment_id_reaches_its_own_route(
    client: Client, api: FakeApi, given: str, sent: str
) -> None:
    # A URL's "." and ".." segments are removed (RFC 3986): `runs.get(".")` asked for the list.
    client.runs.cancel(given)
    assert api.last.url.raw_path == f"/api/v1/runs/{sent}/cancel".encode()


def test_operations_return_typed_models(client: Client) -> None:
    version = client.workflows.create({"id": "wf", "tasks": []})
    assert isinstance(version, Version)
    assert version.definition["tasks"][0]["key"] == "a"
    workflow = client.workflows.get("wf")
    assert isinstance(workflow, Workflow)
    assert workflow.created_at == datetime(2025, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    assert isinstance(client.versions.list_page("wf").items[0], VersionSummary)
    run = client.runs.start("wf", version=1)
    assert isinstance(run, Run)
    assert run.status is RunStatus.PENDING
    assert not run.is_terminal
    assert run.task_counts[TaskStatus.PENDING] == 1
    assert run.started_at is None
    task = client.runs.task(run.run_id, "a")
    assert isinstance(task, TaskRun)
    assert task.status is TaskStatus.FAILED
    assert task.error == ErrorObject(
        code="mock_failure", message="failed on purpose", retryable=True
    )
    attempt = next(client.runs.attempts(run.run_id, "a"))
    assert isinstance(attempt, Attempt)
    assert attempt.status is AttemptStatus.FAILED
    event = next(client.runs.events(run.run_id))
    assert isinstance(event, Event)
    assert (event.sequence, event.type) == (1, "run.created")
    model_call, tool_call = client.runs.steps(run.run_id, "agent")
    assert isinstance(model_call, Step)
    assert (model_call.kind, model_call.status, model_call.usage) == (
        "model_call",
        "succeeded",
        {"input_tokens": 100, "output_tokens": 20},
    )
    assert (tool_call.sequence, tool_call.tool_call_id, tool_call.worker_id) == (2, "call-1", "w-1")
    assert tool_call.request["tool"] == "search_docs"


def test_usage_is_typed_and_absent_from_older_servers() -> None:
    agent_task = {**TASK, "usage": USAGE}
    api = FakeApi(
        responses(
            json_response(200, run_body(usage=USAGE)),
            json_response(200, run_body()),  # a server older than agents
            json_response(200, agent_task),
            json_response(200, TASK),
        )
    )
    with Client(base_url=BASE, transport=api.transport) as client:
        assert client.runs.get("r1").usage == Usage(
            model_calls=2, tool_calls=1, input_tokens=120, output_tokens=30
        )
        assert client.runs.get("r1").usage is None
        usage = client.runs.task("r1", "agent").usage
        assert usage is not None
        assert usage.output_tokens == 30
        assert client.runs.task("r1", "a").usage is None


def test_steps_parse_kinds_and_statuses_of_newer_servers() -> None:
    newer = {**TOOL_STEP, "kind": "approval", "status": "waiting", "approval_id": "ap-1"}
    api = FakeApi(responses(json_response(200, page([newer]))))
    with Client(base_url=BASE, transport=api.transport) as client:
        (step,) = client.runs.steps("r1", "agent")
    assert (step.kind, step.status) == ("approval", "waiting")
    assert step.model_extra == {"approval_id": "ap-1"}


def test_steps_page_through_every_cursor() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        cursor = request.url.params.get("cursor")
        if cursor is None:
            return json_response(200, page([MODEL_STEP], "c1"))
        return json_response(200, page([TOOL_STEP]))

    api = FakeApi(handle)
    with Client(base_url=BASE, transport=api.transport) as client:
        steps = list(client.runs.steps("r1", "agent", limit=1))
    assert [s.sequence for s in steps] == [1, 2]
    assert [r.url.params.get("cursor") for r in api.requests] == [None, "c1"]
    assert {r.url.params["limit"] for r in api.requests} == {"1"}


def test_steps_of_an_unknown_task_raise_not_found() -> None:
    api = FakeApi(responses(problem(404, "task_not_found", "run 'r1' has no task 'x'")))
    with Client(base_url=BASE, transport=api.transport) as client:
        pager = client.runs.steps("r1", "x")  # nothing is sent until the first page is read
        assert api.requests == []
        with pytest.raises(NotFound) as caught:
            next(pager)
    assert caught.value.code == "task_not_found"


def test_new_server_fields_do_not_break_the_client() -> None:
    api = FakeApi(responses(json_response(200, run_body(priority=3))))
    with Client(base_url=BASE, transport=api.transport) as client:
        run = client.runs.get("r1")
    assert run.model_extra == {"priority": 3}


# -- revisions ----------------------------------------------------------------------------------


def test_get_with_etag_and_conditional_cancel(client: Client, api: FakeApi) -> None:
    run, etag = client.runs.get_with_etag("r1")
    assert (run.revision, etag) == (1, '"1"')
    client.runs.cancel("r1", if_match=etag)
    assert api.last.headers["if-match"] == '"1"'
    canceled = client.runs.cancel("r1", if_revision=run.revision)
    assert api.last.headers["if-match"] == '"1"'
    assert canceled.cancel_requested
    client.runs.cancel("r1")
    assert "if-match" not in api.last.headers
    with pytest.raises(ValueError, match="not both"):
        client.runs.cancel("r1", if_revision=1, if_match='"1"')


# -- idempotency and retries --------------------------------------------------------------------


def test_every_write_gets_its_own_generated_key(client: Client, api: FakeApi) -> None:
    client.runs.start("wf", version=1)
    client.runs.start("wf", version=1)
    first, second = (r.headers["idempotency-key"] for r in api.requests)
    assert first != second


def test_an_explicit_key_is_sent_and_validated(client: Client, api: FakeApi) -> None:
    key = new_idempotency_key()
    client.workflows.create({"id": "wf"}, idempotency_key=key)
    assert api.last.headers["idempotency-key"] == key
    with pytest.raises(ValueError, match="idempotency_key"):
        client.runs.cancel("r1", idempotency_key="has space")
    with pytest.raises(ValueError, match="idempotency_key"):
        client.runs.cancel("r1", idempotency_key="")
    assert len(api.requests) == 1


def test_a_write_is_sent_once_even_when_the_connection_fails() -> None:
    api = FakeApi(responses(httpx.ConnectError("refused")))
    with (
        Client(base_url=BASE, max_retries=5, transport=api.transport) as client,
        pytest.raises(APIConnectionError) as caught,
    ):
        client.runs.start("wf", {"n": 1}, version=1)
    assert len(api.requests) == 1
    assert type(caught.value) is APIConnectionError
    assert caught.value.status is None
    assert caught.value.idempotency_key == api.last.headers["idempotency-key"]
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


def test_a_write_is_not_retried_on_503_either() -> None:
    api = FakeApi(responses(problem(503, "unavailable")))
    with (
        Client(base_url=BASE, transport=api.transport) as client,
        pytest.raises(Unavailable),
    ):
        client.runs.cancel("r1")
    assert len(api.requests) == 1


def test_an_explicit_retry_reuses_the_key_and_replays() -> None:
    api = FakeApi(responses(httpx.ReadTimeout("slow"), json_response(202, run_body())))
    with Client(base_url=BASE, transport=api.transport) as client:
        with pytest.raises(APITimeoutError) as caught:
            client.runs.start("wf", {"n": 1}, version=1)
        key = caught.value.idempotency_key
        assert key is not None
        run = client.runs.start("wf", {"n": 1}, version=1, idempotency_key=key)
    assert run.run_id == RUN_ID
    assert [r.headers["idempotency-key"] for r in api.requests] == [key, key]
    assert body(api.requests[0]) == body(api.requests[1]) == {"input": {"n": 1}}


def test_reuse_with_another_request_is_a_conflict() -> None:
    api = FakeApi(responses(problem(409, "idempotency_key_reused")))
    with (
        Client(base_url=BASE, transport=api.transport) as client,
        pytest.raises(Conflict) as caught,
    ):
        client.runs.start("wf", {"n": 2}, version=1, idempotency_key="k1")
    assert (caught.value.code, caught.value.idempotency_key) == ("idempotency_key_reused", "k1")


def test_reads_retry_connection_errors() -> None:
    api = FakeApi(
        responses(
            httpx.ConnectError("refused"),
            httpx.ReadTimeout("slow"),
            json_response(200, run_body("running")),
        )
    )
    with Client(base_url=BASE, transport=api.transport) as client:
        run = client.runs.get("r1")
    assert run.status is RunStatus.RUNNING
    assert len(api.requests) == 3


def test_reads_give_up_after_max_retries() -> None:
    api = FakeApi(responses(httpx.ConnectError("refused")))
    with (
        Client(base_url=BASE, max_retries=1, transport=api.transport) as client,
        pytest.raises(APIConnectionError, match="got no response"),
    ):
        client.workflows.list_page()
    assert len(api.requests) == 2


def test_reads_retry_unavailable_responses() -> None:
    api = FakeApi(responses(problem(503, "unavailable"), json_response(200, run_body())))
    with Client(base_url=BASE, transport=api.transport) as client:
        assert client.runs.get("r1").run_id == RUN_ID
    assert len(api.requests) == 2


def test_max_retries_zero_sends_a_read_once() -> None:
    api = FakeApi(responses(httpx.ReadTimeout("slow")))
    with (
        Client(base_url=BASE, max_retries=0, transport=api.transport) as client,
        pytest.raises(APITimeoutError),
    ):
        client.runs.get("r1")
    assert len(api.requests) == 1


def test_errors_that_retrying_cannot_fix_are_not_retried() -> None:
    api = FakeApi(responses(httpx.UnsupportedProtocol("ftp?")))
    with (
        Client(base_url=BASE, transport=api.transport) as client,
        pytest.raises(APIConnectionError),
    ):
        client.runs.get("r1")
    assert len(api.requests) == 1


# -- pagination ---------------------------------------------------------------------------------


def test_list_follows_cursors_across_three_pages() -> None:
    api = FakeApi(pages_of_runs(3))
    with Client(base_url=BASE, transport=api.transport) as client:
        pager = client.runs.list(status="succeeded", limit=2)
        assert api.requests == []  # lazy: nothing is fetched before iterating
        ids = [run.run_id for run in pager]
    assert ids == [f"run-{p}-{n}" for p in range(3) for n in range(2)]
    assert [r.url.params.get("cursor") for r in api.requests] == [None, "c1", "c2"]
    assert all(r.url.params["status"] == "succeeded" for r in api.requests)
    assert all(r.url.params["limit"] == "2" for r in api.requests)


def test_to_list_takes_every_remaining_item_as_the_async_pager_does() -> None:
    api = FakeApi(pages_of_runs(3))
    with Client(base_url=BASE, transport=api.transport) as client:
        pager = client.runs.list(limit=2)
        first = next(pager)
        rest = pager.to_list()
        assert pager.to_list() == []  # one pass: nothing remains
    assert [first.run_id, *(r.run_id for r in rest)] == [
        f"run-{p}-{n}" for p in range(3) for n in range(2)
    ]
    assert [r.url.params.get("cursor") for r in api.requests] == [None, "c1", "c2"]


def test_one_page_at_a_time() -> None:
    api = FakeApi(pages_of_runs(3))
    with Client(base_url=BASE, transport=api.transport) as client:
        first = client.runs.list_page(limit=2)
        assert isinstance(first, Page)
        assert first.next_cursor == "c1"
        second = client.runs.list_page(limit=2, cursor=first.next_cursor)
        assert [r.run_id for r in second.items] == ["run-1-0", "run-1-1"]
        pages = list(client.runs.list().pages())
    assert [p.next_cursor for p in pages] == ["c1", "c2", None]


def test_every_listing_pages(client: Client) -> None:
    assert [w.workflow_id for w in client.workflows.list()] == ["wf"]
    assert [v.version for v in client.versions.list("wf")] == [1]
    assert [r.run_id for r in client.runs.list(workflow_id="wf")] == [RUN_ID]
    assert [t.task_key for t in client.runs.tasks("r1")] == ["a"]
    assert [a.attempt for a in client.runs.attempts("r1", "a")] == [1]
    assert [e.sequence for e in client.runs.events("r1", limit=10)] == [1]
    assert [s.sequence for s in client.runs.steps("r1", "agent")] == [1, 2]


# -- wait_for_run -------------------------------------------------------------------------------


def test_wait_for_run_polls_until_terminal() -> None:
    api = FakeApi(
        responses(
            json_response(200, run_body("pending")),
            json_response(200, run_body("waiting_retry", 3)),
            json_response(200, run_body("succeeded", 5, finished_at="2025-01-02T03:04:09Z")),
        )
    )
    with Client(base_url=BASE, transport=api.transport) as client:
        run = client.wait_for_run(RUN_ID, timeout=10, poll_interval=0.01)
    assert (run.status, run.revision, run.is_terminal) == (RunStatus.SUCCEEDED, 5, True)
    assert len(api.requests) == 3


def test_wait_for_run_times_out_with_the_last_state() -> None:
    api = FakeApi(responses(json_response(200, run_body("running", 2))))
    with (
        Client(base_url=BASE, transport=api.transport) as client,
        pytest.raises(WaitTimeout) as caught,
    ):
        client.wait_for_run(RUN_ID, timeout=0.05, poll_interval=0.01)
    assert caught.value.run.status is RunStatus.RUNNING
    assert "still running" in str(caught.value)
    assert len(api.requests) >= 2


def test_wait_for_run_validates_its_arguments(client: Client) -> None:
    with pytest.raises(ValueError, match="poll_interval"):
        client.wait_for_run(RUN_ID, poll_interval=0)


def test_close_is_idempotent() -> None:
    client = Client(base_url=BASE, transport=FakeApi().transport)
    client.close()
    client.close()
    assert repr(client) == "Client(base_url='http://api.test')"
