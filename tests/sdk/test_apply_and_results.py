"""``workflows.apply``, ``runs.start`` of the latest version and ``runs.result``, on the wire.

The fake API answers with canned resources; both twins run every case. The same behaviour
against the real service is ``test_live_apply_and_results.py``.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.sdk.fakes import (
    BASE,
    DEFINITION,
    RUN_ID,
    VERSION,
    FakeApi,
    body,
    canned,
    json_response,
    problem,
    responses,
    run_body,
)
from workload_sdk import (
    AppliedVersion,
    AsyncClient,
    Client,
    RunCanceled,
    RunFailed,
    RunStatus,
    WaitTimeout,
    WorkloadError,
)


class Twin:
    """One of the twins, called the same way: sync calls as they are, async ones run to the end."""

    def __init__(self, kind: str, api: FakeApi, **options: Any) -> None:
        self.kind = kind
        if kind == "sync":
            self.client: Any = Client(
                base_url=BASE, token="tok", transport=api.transport, **options
            )
        else:
            self.client = AsyncClient(
                base_url=BASE, token="tok", transport=api.transport, **options
            )

    def __call__(self, call: Callable[[Any], Any]) -> Any:
        result = call(self.client)
        if inspect.isawaitable(result):
            return asyncio.run(_finish(result))
        return result


async def _finish(awaitable: Any) -> Any:
    return await awaitable


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


def twin(kind: str, api: FakeApi, **options: Any) -> Twin:
    return Twin(kind, api, **options)


# -- apply ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "created"), [(201, True), (200, False)])
def test_apply_puts_the_definition_under_its_id_and_says_created_by_status(
    kind: str, status: int, created: bool
) -> None:
    api = FakeApi(responses(json_response(status, VERSION)))
    applied = twin(kind, api)(lambda c: c.workflows.apply(DEFINITION))
    assert isinstance(applied, AppliedVersion)
    assert applied.created is created
    assert (applied.workflow_id, applied.version, applied.definition) == ("wf", 1, DEFINITION)
    request = api.last
    assert (request.method, request.url.path) == ("PUT", "/api/v1/workflows/wf")
    assert body(request) == DEFINITION


def test_apply_sends_the_key_given_or_a_new_one_each_call(kind: str) -> None:
    api = FakeApi()
    twin(kind, api)(lambda c: c.workflows.apply(DEFINITION, idempotency_key="apply-1"))
    twin(kind, api)(lambda c: c.workflows.apply(DEFINITION))
    twin(kind, api)(lambda c: c.workflows.apply(DEFINITION))
    given, first, second = (r.headers["idempotency-key"] for r in api.requests)
    assert given == "apply-1"
    assert uuid.UUID(first) != uuid.UUID(second)


def test_apply_escapes_the_id_in_the_path(kind: str) -> None:
    api = FakeApi()
    twin(kind, api)(lambda c: c.workflows.apply({**DEFINITION, "id": "a/../b"}))
    assert api.last.url.raw_path == b"/api/v1/workflows/a%2F..%2Fb"


@pytest.mark.parametrize(
    ("definition", "error"),
    [
        pytest.param({"tasks": []}, ValueError, id="no-id"),
        pytest.param({"id": "", "tasks": []}, ValueError, id="empty-id"),
        pytest.param({"id": 7, "tasks": []}, ValueError, id="id-not-a-string"),
        pytest.param([("id", "wf")], TypeError, id="not-a-mapping"),
        pytest.param('{"id": "wf"}', TypeError, id="json-text"),
    ],
)
def test_apply_refuses_a_definition_it_cannot_name_and_sends_nothing(
    kind: str, definition: Any, error: type[Exception]
) -> None:
    api = FakeApi()
    with pytest.raises(error):
        twin(kind, api)(lambda c: c.workflows.apply(definition))
    assert api.requests == []


def test_apply_refuses_a_malformed_key_and_sends_nothing(kind: str) -> None:
    api = FakeApi()
    with pytest.raises(ValueError, match="idempotency_key"):
        twin(kind, api)(lambda c: c.workflows.apply(DEFINITION, idempotency_key="has space"))
    assert api.requests == []


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(httpx.ConnectError("refused"), id="no-answer"),
        pytest.param(problem(503, "unavailable"), id="503"),
    ],
)
def test_apply_is_a_write_sent_once_and_its_caller_retries_with_its_key(
    kind: str, failure: httpx.Response | Exception
) -> None:
    """SPEC §8: writes are never retried by default; the key makes the caller's retry safe."""
    api = FakeApi(responses(failure, json_response(201, VERSION)))
    with pytest.raises(WorkloadError) as caught:
        twin(kind, api, max_retries=2)(lambda c: c.workflows.apply(DEFINITION))
    assert len(api.requests) == 1
    key = caught.value.idempotency_key
    assert key == api.last.headers["idempotency-key"]
    applied = twin(kind, api)(lambda c: c.workflows.apply(DEFINITION, idempotency_key=key))
    assert applied.created is True
    assert [r.method for r in api.requests] == ["PUT", "PUT"]
    assert api.last.headers["idempotency-key"] == key


def test_a_refused_apply_is_sent_once(kind: str) -> None:
    refused = FakeApi(responses(problem(403, "forbidden")))
    with pytest.raises(WorkloadError) as caught:
        twin(kind, refused, max_retries=2)(lambda c: c.workflows.apply(DEFINITION))
    assert caught.value.status == 403
    assert len(refused.requests) == 1


# -- start: the latest version --------------------------------------------------------------------


def test_start_without_a_version_runs_the_latest(kind: str) -> None:
    api = FakeApi()  # the canned workflow's latest_version is 2
    run = twin(kind, api)(lambda c: c.runs.start("wf", {"doc": 1}, idempotency_key="s-1"))
    assert run.run_id == RUN_ID
    assert [(r.method, r.url.path) for r in api.requests] == [
        ("GET", "/api/v1/workflows/wf"),
        ("POST", "/api/v1/workflows/wf/versions/2/runs"),
    ]
    assert body(api.last) == {"input": {"doc": 1}}
    assert api.last.headers["idempotency-key"] == "s-1"


def test_start_with_a_version_reads_nothing_first(kind: str) -> None:
    api = FakeApi()
    twin(kind, api)(lambda c: c.runs.start("wf", version=7))
    assert [(r.method, r.url.path) for r in api.requests] == [
        ("POST", "/api/v1/workflows/wf/versions/7/runs")
    ]
    assert api.last.content == b""  # no input: no body


def test_start_of_an_unknown_workflow_is_the_reads_not_found(kind: str) -> None:
    api = FakeApi(responses(problem(404, "workflow_not_found")))
    with pytest.raises(WorkloadError) as caught:
        twin(kind, api)(lambda c: c.runs.start("nope"))
    assert caught.value.code == "workflow_not_found"
    assert [r.method for r in api.requests] == ["GET"]  # nothing written


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(1, id="a-version-passed-positionally"),
        pytest.param("{}", id="json-text"),
        pytest.param([1, 2], id="a-list"),
        pytest.param(True, id="a-bool"),
    ],
)
def test_start_refuses_an_input_that_is_not_a_mapping_and_sends_nothing(
    kind: str, value: Any
) -> None:
    api = FakeApi()
    with pytest.raises(TypeError, match=r"version=N"):
        twin(kind, api)(lambda c: c.runs.start("wf", value))
    assert api.requests == []


def test_the_old_positional_call_with_an_input_fails_loudly(kind: str) -> None:
    api = FakeApi()
    with pytest.raises(TypeError):
        twin(kind, api)(lambda c: c.runs.start("wf", 1, {"doc": 1}))
    assert api.requests == []


# -- result ---------------------------------------------------------------------------------------


def runs_then(*bodies: dict[str, Any]) -> Callable[[httpx.Request], httpx.Response]:
    """GET /runs/{id} answers each body in turn (then the last); anything else is canned."""
    answers: Iterator[dict[str, Any]] = iter(bodies)
    last: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == f"/api/v1/runs/{RUN_ID}":
            answer = next(answers, None)
            if answer is None:
                answer = last[0]
            last[:] = [answer]
            return json_response(200, answer)
        return canned(request)

    return handle


OUTPUT = {"summarize": {"words": 42}, "count": {"n": 3}}


def test_result_waits_and_returns_the_output_of_the_sink_tasks(kind: str) -> None:
    api = FakeApi(
        runs_then(run_body("running"), run_body("succeeded", 5, output=OUTPUT)),
    )
    output = twin(kind, api)(lambda c: c.runs.result(RUN_ID, poll_interval=0.01))
    assert output == OUTPUT
    assert len(api.requests) == 2


@pytest.mark.parametrize(("status", "error"), [("failed", RunFailed), ("canceled", RunCanceled)])
def test_result_raises_with_the_run_when_it_did_not_succeed(
    kind: str, status: str, error: type[RunFailed | RunCanceled]
) -> None:
    counts = {"succeeded": 1, status: 1}
    api = FakeApi(runs_then(run_body(status, 4, task_counts=counts)))
    with pytest.raises(error) as caught:
        twin(kind, api)(lambda c: c.runs.result(RUN_ID, poll_interval=0.01))
    raised = caught.value
    assert isinstance(raised, RunFailed | RunCanceled)
    assert raised.run.status == RunStatus(status)
    assert raised.run.run_id == RUN_ID
    assert RUN_ID in str(caught.value)
    assert f"1 {status}" in str(caught.value)


def test_result_times_out_with_the_last_state_seen(kind: str) -> None:
    api = FakeApi(runs_then(run_body("running", 2)))
    with pytest.raises(WaitTimeout) as caught:
        twin(kind, api)(lambda c: c.runs.result(RUN_ID, timeout=0.05, poll_interval=0.01))
    assert caught.value.run.status is RunStatus.RUNNING


def test_result_of_a_server_without_results_is_empty(kind: str) -> None:
    api = FakeApi(runs_then(run_body("succeeded", 3)))  # no "output" field at all
    assert twin(kind, api)(lambda c: c.runs.result(RUN_ID)) == {}
