"""Every problem code of SPEC §6 becomes the exception of its family, with its fields."""

from __future__ import annotations

import httpx
import pytest

from tests.sdk.fakes import FakeApi, json_response, problem, responses
from workload_sdk import (
    APIConnectionError,
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    ApprovalChanged,
    ApprovalDecided,
    Client,
    Conflict,
    DraftChanged,
    DraftNotReady,
    DraftWaitTimeout,
    Forbidden,
    InvalidRequest,
    LeaseLost,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
    ProblemItem,
    ServerError,
    TooManyRequests,
    Unauthenticated,
    Unavailable,
    UnsupportedMediaType,
    WaitTimeout,
    WorkloadError,
    from_response,
)

PROBLEM_CODES: list[tuple[int, str, type[APIStatusError]]] = [
    (400, "invalid_json", InvalidRequest),
    (400, "invalid_argument", InvalidRequest),
    (400, "invalid_definition", InvalidRequest),
    (400, "invalid_cursor", InvalidRequest),
    (400, "idempotency_key_required", InvalidRequest),
    (400, "workflow_id_mismatch", InvalidRequest),
    (401, "unauthenticated", Unauthenticated),
    (403, "forbidden", Forbidden),
    (404, "workflow_not_found", NotFound),
    (404, "version_not_found", NotFound),
    (404, "run_not_found", NotFound),
    (404, "task_not_found", NotFound),
    (404, "not_found", NotFound),
    (405, "method_not_allowed", MethodNotAllowed),
    (409, "workflow_exists", Conflict),
    (409, "idempotency_key_reused", Conflict),
    (409, "run_finished", Conflict),
    (409, "lease_lost", LeaseLost),
    (409, "approval_changed", ApprovalChanged),
    (409, "approval_decided", ApprovalDecided),
    (409, "draft_changed", DraftChanged),
    (409, "draft_not_ready", DraftNotReady),
    (412, "precondition_failed", PreconditionFailed),
    (413, "payload_too_large", PayloadTooLarge),
    (415, "unsupported_media_type", UnsupportedMediaType),
    (429, "too_many_requests", TooManyRequests),
    (500, "internal", ServerError),
    (503, "unavailable", Unavailable),
]


def _client(answer: httpx.Response) -> tuple[Client, FakeApi]:
    api = FakeApi(responses(answer))
    return Client(base_url="http://api.test", max_retries=0, transport=api.transport), api


def test_every_code_of_the_spec_is_covered() -> None:
    assert len({code for _, code, _ in PROBLEM_CODES}) == 28


@pytest.mark.parametrize(("status", "code", "cls"), PROBLEM_CODES)
def test_a_problem_on_a_read_raises_its_family(
    status: int, code: str, cls: type[APIStatusError]
) -> None:
    client, _ = _client(problem(status, code, f"detail of {code}"))
    with client, pytest.raises(cls) as caught:
        client.runs.get("r1")
    error = caught.value
    assert type(error) is cls
    assert (error.status, error.code) == (status, code)
    assert error.detail == f"detail of {code}"
    assert error.request_id == f"req-{code}"
    assert error.errors == []
    assert error.idempotency_key is None
    assert error.response is not None
    assert error.response.status_code == status
    assert str(error) == f"{status} {code}: detail of {code} (request_id req-{code})"
    assert isinstance(error, WorkloadError)


@pytest.mark.parametrize(("status", "code", "cls"), PROBLEM_CODES)
def test_a_problem_on_a_write_carries_the_idempotency_key(
    status: int, code: str, cls: type[APIStatusError]
) -> None:
    client, api = _client(problem(status, code))
    with client, pytest.raises(cls) as caught:
        client.runs.cancel("r1", idempotency_key="key-1")
    assert (caught.value.code, caught.value.idempotency_key) == (code, "key-1")
    assert len(api.requests) == 1


@pytest.mark.parametrize(("status", "code", "cls"), PROBLEM_CODES)
def test_from_response_maps_a_bare_response(
    status: int, code: str, cls: type[APIStatusError]
) -> None:
    error = from_response(problem(status, code, "why"))
    assert type(error) is cls
    assert (error.status, error.code, error.detail, error.request_id) == (
        status,
        code,
        "why",
        f"req-{code}",
    )


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("2", 2),
        (" 30 ", 30),
        ("0", 0),
        (None, None),
        ("", None),
        ("soon", None),
        ("-1", None),
        ("1.5", None),
        ("Wed, 21 Oct 2026 07:28:00 GMT", None),  # an HTTP date: the worker's own backoff
        ("9" * 40, None),
    ],
    ids=[
        "two",
        "spaces",
        "zero",
        "absent",
        "empty",
        "word",
        "negative",
        "fraction",
        "date",
        "huge",
    ],
)
def test_a_429_carries_its_retry_after_in_seconds(header: str | None, seconds: int | None) -> None:
    answer = problem(429, "too_many_requests", "at most 16 claims at once per worker")
    if header is not None:
        answer.headers["Retry-After"] = header
    error = from_response(answer)
    assert type(error) is TooManyRequests
    assert error.retry_after == seconds


def test_validation_problems_are_listed() -> None:
    items = [
        {"path": "/tasks/0/key", "message": "duplicate key"},
        {"path": "/tasks/1/depends_on/0", "message": "unknown dependency"},
    ]
    client, _ = _client(problem(400, "invalid_definition", "2 problems", errors=items))
    with client, pytest.raises(InvalidRequest) as caught:
        client.workflows.create({"id": "x", "tasks": []})
    assert caught.value.errors == [ProblemItem(**item) for item in items]
    assert caught.value.idempotency_key is not None


def test_unauthenticated_keeps_the_response_headers() -> None:
    answer = problem(401, "unauthenticated")
    answer.headers["www-authenticate"] = 'Bearer realm="workload", error="invalid_token"'
    client, _ = _client(answer)
    with client, pytest.raises(Unauthenticated) as caught:
        client.workflows.list_page()
    assert caught.value.response is not None
    assert "invalid_token" in caught.value.response.headers["www-authenticate"]


def test_a_non_problem_body_still_maps_by_status() -> None:
    html = httpx.Response(
        502, content=b"<html>Bad gateway</html>", headers={"x-request-id": "proxy-1"}
    )
    error = from_response(html)
    assert type(error) is ServerError
    assert (error.status, error.code, error.request_id) == (502, None, "proxy-1")
    assert error.detail == "<html>Bad gateway</html>"

    empty = from_response(httpx.Response(404))
    assert type(empty) is NotFound
    assert (empty.code, empty.detail, empty.request_id) == (None, "Not Found", None)

    readiness = from_response(httpx.Response(503, json={"status": "unavailable"}))
    assert type(readiness) is Unavailable
    assert (readiness.code, readiness.detail) == (None, "Service Unavailable")
    assert str(readiness) == "503: Service Unavailable"


def test_an_unlisted_status_is_an_api_status_error() -> None:
    teapot = from_response(httpx.Response(418, json={"code": "slow_down", "detail": "later"}))
    assert type(teapot) is APIStatusError
    assert (teapot.status, teapot.code, teapot.detail) == (418, "slow_down", "later")
    assert type(from_response(httpx.Response(599))) is ServerError
    assert from_response(httpx.Response(599)).detail == "error"


def test_a_malformed_success_body_is_a_response_validation_error() -> None:
    client, _ = _client(json_response(200, {"run_id": 3}, **{"x-request-id": "abc"}))
    with client, pytest.raises(APIResponseValidationError) as caught:
        client.runs.get("r1")
    assert (caught.value.status, caught.value.request_id) == (200, "abc")
    client, _ = _client(httpx.Response(200, content=b"not json"))
    with client, pytest.raises(APIResponseValidationError, match="not JSON"):
        client.runs.get("r1")


def test_a_code_with_its_own_class_under_another_status_keeps_the_family() -> None:
    # Only the status the server gives a code selects its class: a proxy or an older server
    # sending the code with another status gets the status's family.
    assert type(from_response(problem(400, "approval_changed"))) is InvalidRequest
    assert type(from_response(problem(500, "draft_changed"))) is ServerError
    assert type(from_response(problem(404, "draft_changed"))) is NotFound


def test_the_hierarchy() -> None:
    assert issubclass(Unavailable, ServerError)
    assert issubclass(ServerError, APIStatusError)
    assert issubclass(APITimeoutError, APIConnectionError)
    assert issubclass(APIConnectionError, WorkloadError)
    assert not issubclass(APIConnectionError, APIStatusError)
    assert issubclass(WaitTimeout, TimeoutError)
    assert issubclass(WaitTimeout, WorkloadError)
    assert issubclass(DraftWaitTimeout, TimeoutError)
    assert issubclass(DraftWaitTimeout, WorkloadError)
    conflicts: list[type[APIStatusError]] = [
        ApprovalChanged,
        ApprovalDecided,
        DraftChanged,
        DraftNotReady,
    ]
    assert all(issubclass(cls, Conflict) for cls in conflicts)
