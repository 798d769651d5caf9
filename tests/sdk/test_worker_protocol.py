"""The worker endpoints (SPEC §10): claim, heartbeat, complete, fail; workers and queues.

Both clients build each request with the same function, so the wire format is checked on the
blocking client and the async one is checked to send the same requests.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.sdk.fakes import (
    BASE,
    CLAIMED,
    QUEUE,
    WORKER,
    FakeApi,
    body,
    json_response,
    page,
    problem,
    responses,
)
from tests.sdk.test_client import OPERATIONS
from workload_sdk import (
    APIConnectionError,
    AsyncClient,
    Attempt,
    AttemptStatus,
    ClaimedAttempt,
    Client,
    Conflict,
    Lease,
    LeaseLost,
    QueueStats,
    Unavailable,
    WorkerInfo,
    WorkerStatus,
)
from workload_sdk._worker_requests import CLAIM_READ_MARGIN


def test_path_segments_are_escaped(client: Client, api: FakeApi) -> None:
    client.attempts.claim("w/1", ["q"], ["a"])
    client.attempts.heartbeat("../runs", "tok")
    assert [r.url.raw_path for r in api.requests] == [
        b"/api/v1/workers/w%2F1/claim",
        b"/api/v1/attempts/..%2Fruns/heartbeat",
    ]


def test_a_claim_parses_task_and_tool_call_items(client: Client) -> None:
    task, tool_call = client.attempts.claim("w-1", ["default"], ["resize"], max_attempts=2)
    assert isinstance(task, ClaimedAttempt)
    assert (task.kind, task.attempt_id, task.attempt, task.heartbeat_timeout_seconds) == (
        "task",
        "att-1",
        1,
        30,
    )
    assert task.upstream == {"fetch": {"bytes": 10}}
    assert task.timeout_at.tzinfo is not None
    assert (task.tool_call_id, task.tool, task.arguments) == (None, None, None)
    assert (tool_call.kind, tool_call.tool_call_id, tool_call.tool) == (
        "tool_call",
        "call-1",
        "search_docs",
    )
    assert tool_call.arguments == tool_call.input == {"q": "lease"}
    assert "secret-lease-token" not in repr(task)  # a credential of the attempt


def test_a_claim_item_keeps_fields_added_by_newer_servers() -> None:
    item = ClaimedAttempt.model_validate({**CLAIMED, "kind": "batch", "priority": 5})
    assert item.kind == "batch"
    assert item.model_extra == {"priority": 5}


def test_an_empty_claim_is_an_empty_list() -> None:
    api = FakeApi(responses(json_response(200, {"attempts": []})))
    with Client(base_url=BASE, transport=api.transport) as client:
        assert client.attempts.claim("w-1", ["q"], ["a"]) == []


def test_a_claim_needs_queues_and_actions(client: Client, api: FakeApi) -> None:
    with pytest.raises(ValueError, match="queue"):
        client.attempts.claim("w-1", [], ["a"])
    with pytest.raises(ValueError, match="action"):
        client.attempts.claim("w-1", ["q"], [])
    assert api.requests == []


@pytest.mark.parametrize(
    ("configured", "wait", "read"),
    [
        (30.0, 20, 30.0),  # the client's timeout is already longer than the wait
        (5.0, 20, 20 + CLAIM_READ_MARGIN),
        (5.0, 50, 50 + CLAIM_READ_MARGIN),
        (None, 50, None),  # no timeout at all stays none
    ],
    ids=["long-enough", "raised", "raised-max", "no-timeout"],
)
def test_a_claim_reads_longer_than_it_waits(
    configured: float | None, wait: int, read: float | None
) -> None:
    api = FakeApi()
    with Client(base_url=BASE, timeout=configured, transport=api.transport) as client:
        client.attempts.claim("w-1", ["q"], ["a"], wait_seconds=wait)
        claim_timeout = api.last.extensions["timeout"]
        client.attempts.heartbeat("att-1", "tok")
        heartbeat_timeout = api.last.extensions["timeout"]
    assert claim_timeout["read"] == read
    assert claim_timeout["connect"] == configured
    assert heartbeat_timeout["read"] == configured


def test_reports_parse_the_attempt_with_its_worker_fields(client: Client) -> None:
    lease = client.attempts.heartbeat("att-1", "tok", {"done": 1})
    assert isinstance(lease, Lease)
    assert lease.lease_expires_at.tzinfo is not None
    attempt = client.attempts.complete("att-1", "tok", {"ok": True})
    assert isinstance(attempt, Attempt)
    assert attempt.status is AttemptStatus.SUCCEEDED
    assert (attempt.attempt_id, attempt.queue, attempt.worker_id) == ("att-1", "default", "w-1")
    assert attempt.claimed_at is not None
    assert attempt.lease_expires_at is not None
    assert attempt.progress == {"done": 1}
    assert client.attempts.fail("att-1", "tok", "E", "m").attempt_id == "att-1"


def test_an_attempt_from_an_older_server_still_parses() -> None:
    older = {
        "attempt": 1,
        "status": "queued",
        "started_at": "2025-01-02T03:04:05Z",
        "finished_at": None,
        "output": None,
        "error": None,
    }
    attempt = Attempt.model_validate(older)
    assert attempt.status is AttemptStatus.QUEUED
    assert not attempt.status.is_terminal
    assert (attempt.attempt_id, attempt.worker_id, attempt.progress) == (None, None, None)


@pytest.mark.parametrize("reason", ["expired", "canceled", "finished", "timed_out", "unknown"])
def test_lease_lost_carries_its_reason(reason: str) -> None:
    api = FakeApi(responses(problem(409, "lease_lost", "the lease is gone", reason=reason)))
    with (
        Client(base_url=BASE, transport=api.transport) as client,
        pytest.raises(LeaseLost) as caught,
    ):
        client.attempts.complete("att-1", "tok", {})
    error = caught.value
    assert isinstance(error, Conflict)
    assert (error.status, error.code, error.reason) == (409, "lease_lost", reason)
    assert error.request_id == "req-lease_lost"


def test_lease_lost_without_a_reason_is_unknown_and_other_conflicts_are_not_lease_lost() -> None:
    api = FakeApi(responses(problem(409, "lease_lost"), problem(409, "run_finished")))
    with Client(base_url=BASE, transport=api.transport) as client:
        with pytest.raises(LeaseLost) as lost:
            client.attempts.heartbeat("att-1", "tok")
        with pytest.raises(Conflict) as other:
            client.attempts.heartbeat("att-1", "tok")
    assert lost.value.reason == "unknown"
    assert type(other.value) is Conflict


@pytest.mark.parametrize(
    "answer",
    [httpx.ConnectError("refused"), problem(503, "unavailable")],
    ids=["refused", "503"],
)
def test_claims_and_reports_are_sent_once(answer: httpx.Response | Exception) -> None:
    api = FakeApi(responses(answer))
    with Client(base_url=BASE, max_retries=5, transport=api.transport) as client:
        for call in (
            lambda: client.attempts.claim("w-1", ["q"], ["a"]),
            lambda: client.attempts.heartbeat("att-1", "tok"),
            lambda: client.attempts.complete("att-1", "tok", {}),
            lambda: client.attempts.fail("att-1", "tok", "E", "m"),
        ):
            with pytest.raises((APIConnectionError, Unavailable)) as caught:
                call()
            assert caught.value.idempotency_key is None
    assert len(api.requests) == 4


def test_workers_and_queues_parse(client: Client) -> None:
    [worker] = list(client.workers.list())
    assert isinstance(worker, WorkerInfo)
    assert worker.status is WorkerStatus.ACTIVE
    assert (worker.worker_id, worker.queues, worker.actions, worker.in_flight) == (
        "w-1",
        ["default"],
        ["resize"],
        2,
    )
    [queue] = client.queues.list()
    assert queue == QueueStats.model_validate(QUEUE)
    assert (queue.queued, queue.running, queue.oldest_queued_age_seconds) == (3, 2, 1.5)


def test_workers_list_follows_cursors() -> None:
    second = {**WORKER, "worker_id": "w-2", "status": "gone"}

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("cursor") is None:
            return json_response(200, page([WORKER], "c1"))
        return json_response(200, page([second]))

    api = FakeApi(handle)
    with Client(base_url=BASE, transport=api.transport) as client:
        workers = list(client.workers.list(limit=1))
    assert [(w.worker_id, w.status) for w in workers] == [
        ("w-1", WorkerStatus.ACTIVE),
        ("w-2", WorkerStatus.GONE),
    ]


def test_a_queue_without_waiting_work_has_no_age() -> None:
    idle = {**QUEUE, "queued": 0, "oldest_queued_age_seconds": None}
    api = FakeApi(responses(json_response(200, {"items": [idle]})))
    with Client(base_url=BASE, transport=api.transport) as client:
        assert client.queues.list()[0].oldest_queued_age_seconds is None


WORKER_OPERATIONS = [
    op for op in OPERATIONS if op[0].split(".")[0] in {"attempts", "workers", "queues"}
]


@pytest.mark.anyio
async def test_the_async_client_sends_the_same_requests() -> None:
    sync_api, async_api = FakeApi(), FakeApi()
    with Client(base_url=BASE, token="t", transport=sync_api.transport) as client:
        for _, call, *_ in WORKER_OPERATIONS:
            call(client)
    async with AsyncClient(base_url=BASE, token="t", transport=async_api.transport) as aclient:
        items = await aclient.attempts.claim("w-1", ["default"], ["resize", "ocr"])
        await aclient.attempts.claim("w-1", ("q",), ("a",), max_attempts=8, wait_seconds=0.5)
        await aclient.attempts.heartbeat("att-1", "tok")
        await aclient.attempts.heartbeat("att-1", "tok", {"done": 3})
        await aclient.attempts.complete("att-1", "tok", {"ok": True})
        await aclient.attempts.fail("att-1", "tok", "ValueError", "bad")
        await aclient.attempts.fail("att-1", "tok", "Bad", "no", retryable=False)
        await aclient.workers.list_page(limit=5, cursor="c1")
        queues = await aclient.queues.list()
        workers = await aclient.workers.list().to_list()
    assert [item.kind for item in items] == ["task", "tool_call"]
    assert queues[0].queue == "default"
    assert workers[0].worker_id == "w-1"

    def wire(api: FakeApi) -> list[tuple[str, bytes, Any, str | None]]:
        return [
            (r.method, r.url.raw_path, body(r), r.headers.get("idempotency-key"))
            for r in api.requests
        ]

    assert wire(async_api)[:-1] == wire(sync_api)
