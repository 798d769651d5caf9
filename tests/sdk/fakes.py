"""A fake Workload API for the SDK's unit tests: canned resources behind ``httpx.MockTransport``.

Only httpx is needed: no server package, no network.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx

BASE = "http://api.test"
T0 = "2025-01-02T03:04:05.123456Z"
T1 = "2025-01-02T03:04:06Z"
RUN_ID = "01940000-0000-7000-8000-000000000001"

WORKFLOW: dict[str, Any] = {
    "workflow_id": "wf",
    "latest_version": 2,
    "description": "demo",
    "created_at": T0,
    "updated_at": T1,
}
SUMMARY: dict[str, Any] = {
    "workflow_id": "wf",
    "version": 1,
    "definition_hash": "sha256:" + "0" * 64,
    "task_count": 1,
    "created_at": T0,
}
DEFINITION: dict[str, Any] = {"id": "wf", "tasks": [{"key": "a", "action": "mock"}]}
VERSION: dict[str, Any] = {**SUMMARY, "definition": DEFINITION}
TASK_STATUSES = (
    "pending",
    "running",
    "waiting_retry",
    "waiting_approval",
    "succeeded",
    "failed",
    "canceled",
    "skipped",
)
TASK_COUNTS = dict.fromkeys(TASK_STATUSES, 0)
ERROR = {"code": "mock_failure", "message": "failed on purpose", "retryable": True}
TASK: dict[str, Any] = {
    "task_key": "a",
    "status": "failed",
    "depends_on": [],
    "attempt_count": 1,
    "max_attempts": 1,
    "next_attempt_at": None,
    "started_at": T0,
    "finished_at": T1,
    "output": None,
    "error": ERROR,
}
ATTEMPT: dict[str, Any] = {
    "attempt": 1,
    "status": "failed",
    "started_at": T0,
    "finished_at": T1,
    "output": None,
    "error": ERROR,
}
CLAIMED: dict[str, Any] = {
    "kind": "task",
    "attempt_id": "att-1",
    "lease_token": "secret-lease-token",
    "lease_expires_at": T1,
    "timeout_at": "2025-01-02T03:09:06Z",
    "heartbeat_timeout_seconds": 30,
    "run_id": RUN_ID,
    "workflow_id": "wf",
    "version": 1,
    "task_key": "a",
    "attempt": 1,
    "queue": "default",
    "action": "resize",
    "input": {"size": 3},
    "run_input": {"doc": 7},
    "upstream": {"fetch": {"bytes": 10}},
    "traceparent": None,
}
TOOL_CALL: dict[str, Any] = {
    **CLAIMED,
    "kind": "tool_call",
    "attempt_id": "att-2",
    "tool_call_id": "call-1",
    "tool": "search_docs",
    "arguments": {"q": "lease"},
    "input": {"q": "lease"},
    "upstream": {},
}
REMOTE_ATTEMPT: dict[str, Any] = {
    **ATTEMPT,
    "status": "succeeded",
    "output": {"ok": True},
    "error": None,
    "attempt_id": "att-1",
    "queue": "default",
    "worker_id": "w-1",
    "claimed_at": T0,
    "lease_expires_at": T1,
    "progress": {"done": 1},
}
WORKER: dict[str, Any] = {
    "worker_id": "w-1",
    "queues": ["default"],
    "actions": ["resize"],
    "first_seen_at": T0,
    "last_seen_at": T1,
    "in_flight": 2,
    "status": "active",
}
QUEUE: dict[str, Any] = {
    "queue": "default",
    "queued": 3,
    "running": 2,
    "oldest_queued_age_seconds": 1.5,
}
USAGE: dict[str, Any] = {
    "model_calls": 2,
    "tool_calls": 1,
    "input_tokens": 120,
    "output_tokens": 30,
}
MODEL_STEP: dict[str, Any] = {
    "step_id": "step-1",
    "attempt": 1,
    "sequence": 1,
    "kind": "model_call",
    "status": "succeeded",
    "request": {"model": "mock", "messages": [{"role": "user", "content": "hi"}]},
    "request_hash": "sha256:" + "1" * 64,
    "response": {"content": None, "tool_calls": [{"id": "call-1", "name": "search_docs"}]},
    "usage": {"input_tokens": 100, "output_tokens": 20},
    "tool_call_id": None,
    "started_at": T0,
    "finished_at": T1,
    "worker_id": None,
}
TOOL_STEP: dict[str, Any] = {
    **MODEL_STEP,
    "step_id": "step-2",
    "sequence": 2,
    "kind": "tool_call",
    "request": {"tool": "search_docs", "action": "search", "arguments": {"q": "lease"}},
    "response": {"output": {"hits": 2}},
    "usage": None,
    "tool_call_id": "call-1",
    "worker_id": "w-1",
}
APPROVAL_ID = "01940000-0000-7000-8000-0000000000a1"
DRAFT_ID = "01940000-0000-7000-8000-0000000000d1"
APPROVAL: dict[str, Any] = {
    "approval_id": APPROVAL_ID,
    "run_id": RUN_ID,
    "task_key": "agent",
    "tool": "deploy",
    "tool_call_id": "call-1",
    "arguments": {"env": "prod"},
    "arguments_digest": "sha256:" + "a" * 64,
    "status": "pending",
    "requested_at": T0,
    "expires_at": "2025-01-03T03:04:05Z",
    "decided_by": None,
    "decided_at": None,
    "comment": None,
}
DECIDED: dict[str, Any] = {
    **APPROVAL,
    "status": "approved",
    "decided_by": "operator:3f9a1c0b2d4e",
    "decided_at": T1,
    "comment": "ok",
}
DRAFT: dict[str, Any] = {
    "draft_id": DRAFT_ID,
    "status": "ready",
    "prompt": "fetch, then summarize",
    "model": "mock",
    "workflow_id": "wf",
    "definition": DEFINITION,
    "definition_hash": "sha256:" + "d" * 64,
    "problems": [{"answer": 1, "path": "/tasks", "message": "must not be empty"}],
    "usage": {"model_calls": 2, "tool_calls": 0, "input_tokens": 300, "output_tokens": 80},
    "created_by": "operator:3f9a1c0b2d4e",
    "created_at": T0,
    "updated_at": T1,
    "version": None,
}
GENERATING: dict[str, Any] = {
    **DRAFT,
    "status": "generating",
    "definition": None,
    "definition_hash": None,
    "problems": [],
    "usage": {"model_calls": 0, "tool_calls": 0, "input_tokens": 0, "output_tokens": 0},
}
EVENT: dict[str, Any] = {
    "sequence": 1,
    "type": "run.created",
    "occurred_at": T0,
    "task_key": None,
    "attempt": None,
    "data": {},
}
STATUS: dict[str, Any] = {
    "status": "ready",
    "role": "leader",
    "epoch": 1,
    "runs_active": 0,
    "workers_active": 0,
    "approvals_pending": 0,
    "queues": [QUEUE],
}
CLUSTER: dict[str, Any] = {
    "shards_total": 2,
    "replicas": [{"replica_id": "r-1", "shards": [0, 1], "started_at": T0, "last_seen_at": T1}],
}
# One event, then the end: a whole run's stream (GET /runs/{run_id}/events/stream).
STREAM = f"id: 1\ndata: {json.dumps(EVENT)}\n\nevent: end\ndata: {{}}\n\n"


def run_body(status: str = "pending", revision: int = 1, **extra: Any) -> dict[str, Any]:
    """A run resource."""
    return {
        "run_id": RUN_ID,
        "workflow_id": "wf",
        "version": 1,
        "status": status,
        "revision": revision,
        "input": {},
        "cancel_requested": False,
        "created_at": T0,
        "updated_at": T1,
        "started_at": None,
        "finished_at": None,
        "task_counts": {**TASK_COUNTS, "pending": 1},
        **extra,
    }


def page(items: list[dict[str, Any]], next_cursor: str | None = None) -> dict[str, Any]:
    """A page of a listing."""
    return {"items": items, "next_cursor": next_cursor}


def problem(status: int, code: str, detail: str = "it went wrong", **extra: Any) -> httpx.Response:
    """An RFC 9457 problem response, as the server sends it."""
    request_id = f"req-{code}"
    body = {
        "type": f"urn:workload:problem:{code}",
        "title": "Some Title",
        "status": status,
        "detail": detail,
        "code": code,
        "request_id": request_id,
        **extra,
    }
    return httpx.Response(
        status,
        content=json.dumps(body).encode(),
        headers={"content-type": "application/problem+json", "x-request-id": request_id},
    )


def json_response(status: int, body: Any, **headers: str) -> httpx.Response:
    """A JSON response."""
    return httpx.Response(status, json=body, headers=headers)


_ROUTES: list[tuple[str, str, Callable[[httpx.Request], httpx.Response]]] = [
    ("POST", r"/api/v1/workflows", lambda r: json_response(201, VERSION)),
    ("PUT", r"/api/v1/workflows/[^/]+", lambda r: json_response(201, VERSION)),
    ("GET", r"/api/v1/workflows", lambda r: json_response(200, page([WORKFLOW]))),
    ("GET", r"/api/v1/workflows/[^/]+", lambda r: json_response(200, WORKFLOW)),
    ("POST", r"/api/v1/workflows/[^/]+/versions", lambda r: json_response(201, VERSION)),
    ("GET", r"/api/v1/workflows/[^/]+/versions", lambda r: json_response(200, page([SUMMARY]))),
    ("GET", r"/api/v1/workflows/[^/]+/versions/[^/]+", lambda r: json_response(200, VERSION)),
    (
        "POST",
        r"/api/v1/workflows/[^/]+/versions/[^/]+/runs",
        lambda r: json_response(202, run_body(), location=f"/api/v1/runs/{RUN_ID}"),
    ),
    ("GET", r"/api/v1/runs", lambda r: json_response(200, page([run_body()]))),
    ("GET", r"/api/v1/runs/[^/]+", lambda r: json_response(200, run_body(), etag='"1"')),
    (
        "POST",
        r"/api/v1/runs/[^/]+/cancel",
        lambda r: json_response(202, run_body("running", 2, cancel_requested=True)),
    ),
    ("GET", r"/api/v1/runs/[^/]+/tasks", lambda r: json_response(200, page([TASK]))),
    ("GET", r"/api/v1/runs/[^/]+/tasks/[^/]+", lambda r: json_response(200, TASK)),
    (
        "GET",
        r"/api/v1/runs/[^/]+/tasks/[^/]+/attempts",
        lambda r: json_response(200, page([ATTEMPT])),
    ),
    (
        "GET",
        r"/api/v1/runs/[^/]+/tasks/[^/]+/steps",
        lambda r: json_response(200, page([MODEL_STEP, TOOL_STEP])),
    ),
    ("GET", r"/api/v1/runs/[^/]+/events", lambda r: json_response(200, page([EVENT]))),
    (
        "GET",
        r"/api/v1/runs/[^/]+/events/stream",
        lambda r: httpx.Response(
            200, content=STREAM.encode(), headers={"content-type": "text/event-stream"}
        ),
    ),
    ("GET", r"/api/v1/status", lambda r: json_response(200, STATUS)),
    ("GET", r"/api/v1/cluster", lambda r: json_response(200, CLUSTER)),
    (
        "POST",
        r"/api/v1/workers/[^/]+/claim",
        lambda r: json_response(200, {"attempts": [CLAIMED, TOOL_CALL]}),
    ),
    (
        "POST",
        r"/api/v1/attempts/[^/]+/heartbeat",
        lambda r: json_response(200, {"lease_expires_at": T1}),
    ),
    ("POST", r"/api/v1/attempts/[^/]+/complete", lambda r: json_response(200, REMOTE_ATTEMPT)),
    ("POST", r"/api/v1/attempts/[^/]+/fail", lambda r: json_response(200, REMOTE_ATTEMPT)),
    ("GET", r"/api/v1/workers", lambda r: json_response(200, page([WORKER]))),
    ("GET", r"/api/v1/queues", lambda r: json_response(200, {"items": [QUEUE]})),
    ("GET", r"/api/v1/approvals", lambda r: json_response(200, page([APPROVAL]))),
    ("GET", r"/api/v1/approvals/[^/]+", lambda r: json_response(200, APPROVAL)),
    ("POST", r"/api/v1/approvals/[^/]+/decision", lambda r: json_response(200, DECIDED)),
    ("POST", r"/api/v1/drafts", lambda r: json_response(202, GENERATING)),
    ("GET", r"/api/v1/drafts", lambda r: json_response(200, page([DRAFT]))),
    ("GET", r"/api/v1/drafts/[^/]+", lambda r: json_response(200, DRAFT)),
    (
        "POST",
        r"/api/v1/drafts/[^/]+/approve",
        lambda r: json_response(200, {**DRAFT, "status": "approved", "version": 3}),
    ),
    (
        "POST",
        r"/api/v1/drafts/[^/]+/reject",
        lambda r: json_response(200, {**DRAFT, "status": "rejected"}),
    ),
]


def canned(request: httpx.Request) -> httpx.Response:
    """Answer any operation of SPEC §6 with a canned resource (404 ``not_found`` otherwise)."""
    path = request.url.raw_path.split(b"?")[0].decode()
    path = path[path.find("/api/v1") :]  # a base URL may carry a prefix
    for method, pattern, respond in _ROUTES:
        if request.method == method and re.fullmatch(pattern, path):
            return respond(request)
    return problem(404, "not_found", "no such route")


class FakeApi:
    """Records every request and answers it with ``handler`` (default: :func:`canned`)."""

    def __init__(self, handler: Callable[[httpx.Request], httpx.Response] = canned) -> None:
        self.requests: list[httpx.Request] = []
        self.handler = handler

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.handler(request)

    @property
    def transport(self) -> httpx.MockTransport:
        """A transport for ``Client(transport=...)`` or ``AsyncClient(transport=...)``."""
        return httpx.MockTransport(self)

    @property
    def last(self) -> httpx.Request:
        """The last request received."""
        return self.requests[-1]


def responses(*answers: httpx.Response | Exception) -> Callable[[httpx.Request], httpx.Response]:
    """A handler answering (or raising) each of ``answers`` in turn, then the last one forever.

    A ``httpx.TransportError`` is raised again with the request attached, as httpx does.
    """
    queue: Iterator[httpx.Response | Exception] = iter(answers)
    last: list[httpx.Response | Exception] = []

    def handle(request: httpx.Request) -> httpx.Response:
        answer = next(queue, None)
        if answer is None:
            answer = last[0]
        else:
            last[:] = [answer]
        if isinstance(answer, httpx.TransportError):
            raise type(answer)(str(answer), request=request)
        if isinstance(answer, Exception):
            raise answer
        # A fresh copy each time: one response object must not be sent twice.
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)

    return handle


def pages_of_runs(count: int = 3) -> Callable[[httpx.Request], httpx.Response]:
    """A ``GET /runs`` handler serving ``count`` pages of two runs, chained by cursors."""

    def handle(request: httpx.Request) -> httpx.Response:
        cursor = request.url.params.get("cursor")
        index = 0 if cursor is None else int(cursor.removeprefix("c"))
        items = [run_body(run_id=f"run-{index}-{n}") for n in range(2)]
        following = f"c{index + 1}" if index + 1 < count else None
        return json_response(200, page(items, following))

    return handle


def body(request: httpx.Request) -> Any:
    """The parsed JSON body of a request (None when empty)."""
    return json.loads(request.content) if request.content else None
