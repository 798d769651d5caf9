"""A fake of the worker endpoints of SPEC §10, with real leases, behind ``httpx.MockTransport``.

It runs in the worker's event loop (the transport's handler is a coroutine): a claim waits for
matching work like the server's long poll, leases expire on the loop's clock, and reports are
fenced by the lease token exactly as the contract says (409 ``lease_lost`` with a ``reason``;
the same report repeated is the same 200). Faults are scripted per route with :meth:`script`.
Only httpx and anyio are needed: no server package. ``PUT /workflows/{id}`` (SPEC §6, apply by
content) answers an operator token only, so that ``apply_on_start`` can be watched too.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import secrets
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import httpx

BASE_URL = "http://workload.test"
WORKER_TOKEN = "worker-token"
OPERATOR_TOKEN = "operator-token"
_PROGRESS_LIMIT = 64 * 1024
_ids = itertools.count(1)


@dataclass
class FakeAttempt:
    """One remote attempt, from queued to its outcome."""

    attempt_id: str
    action: str
    queue: str
    input: dict[str, Any]
    run_input: dict[str, Any]
    upstream: dict[str, Any]
    heartbeat_timeout: float
    timeout: float
    kind: str = "task"
    tool_call_id: str | None = None
    run_id: str = "run-1"
    task_key: str = "task"
    attempt: int = 1
    status: str = "queued"
    lease_token: str | None = None
    worker_id: str | None = None
    lease_expires: float = 0.0
    timeout_deadline: float = 0.0
    output: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    progress: dict[str, Any] | None = None
    report: tuple[str, Any] | None = None
    claimed_at: datetime | None = None

    def resource(self) -> dict[str, Any]:
        now = datetime.now(UTC).isoformat()
        return {
            "attempt": self.attempt,
            "status": self.status,
            "started_at": now,
            "finished_at": now,
            "output": self.output,
            "error": self.error,
            "attempt_id": self.attempt_id,
            "queue": self.queue,
            "worker_id": self.worker_id,
            "claimed_at": self.claimed_at.isoformat() if self.claimed_at else None,
            "lease_expires_at": None,
            "progress": self.progress,
        }


@dataclass
class Beat:
    """A heartbeat the fake received."""

    attempt_id: str
    at: float
    progress: dict[str, Any] | None
    status: int


@dataclass
class Report:
    """A complete or fail the fake received, and the status it answered."""

    attempt_id: str
    route: str
    body: dict[str, Any]
    status: int


@dataclass
class FakeControlPlane:
    """The control plane's worker endpoints, faked (see the module docstring)."""

    token: str = WORKER_TOKEN
    attempts: dict[str, FakeAttempt] = field(default_factory=dict)
    claims: list[dict[str, Any]] = field(default_factory=list)
    claim_times: list[float] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)
    """How many attempts each answered claim handed out (0: an empty answer after its wait)."""
    hung_up: int = 0
    """How many claims the worker hung up on while they waited (they hand out nothing)."""
    beats: list[Beat] = field(default_factory=list)
    reports: list[Report] = field(default_factory=list)
    requests: list[httpx.Request] = field(default_factory=list)
    versions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """The definitions applied, by workflow id (version n at index n - 1)."""
    _scripts: dict[str, deque[httpx.Response | Exception]] = field(default_factory=dict)
    _stalls: dict[str, deque[float]] = field(default_factory=dict)
    _work: anyio.Event = field(default_factory=anyio.Event)

    @property
    def transport(self) -> httpx.MockTransport:
        """The transport to give the worker's SDK client."""
        return httpx.MockTransport(self.handle)

    # -- what tests arrange ------------------------------------------------------------------

    def add(
        self,
        action: str,
        input: dict[str, Any] | None = None,
        *,
        queue: str = "default",
        run_input: dict[str, Any] | None = None,
        upstream: dict[str, Any] | None = None,
        heartbeat_timeout: float = 30.0,
        timeout: float = 300.0,
        **extra: Any,
    ) -> FakeAttempt:
        """Queue an attempt of ``action``; a waiting claim gets it at once."""
        number = next(_ids)
        attempt = FakeAttempt(
            attempt_id=f"att-{number}",
            action=action,
            queue=queue,
            input=input or {},
            run_input=run_input or {},
            upstream=upstream or {},
            heartbeat_timeout=heartbeat_timeout,
            timeout=timeout,
            **({"task_key": f"task-{number}"} | extra),
        )
        self.attempts[attempt.attempt_id] = attempt
        self._work.set()  # wakes every waiting claim; later claims wait on a new event
        self._work = anyio.Event()
        return attempt

    def cancel(self, attempt_id: str) -> None:
        """Cancel the attempt's run: the next heartbeat or report answers ``canceled``."""
        self.attempts[attempt_id].status = "canceled"

    def script(self, route: str, *answers: httpx.Response | Exception) -> None:
        """Answer the next requests of ``route`` (claim, heartbeat, complete, fail) so."""
        self._scripts.setdefault(route, deque()).extend(answers)

    def stall(self, route: str, *seconds: float) -> None:
        """Hold the next requests of ``route`` so long before handling them (a hung server)."""
        self._stalls.setdefault(route, deque()).extend(seconds)

    # -- what tests read ----------------------------------------------------------------------

    def beats_of(self, attempt_id: str) -> list[Beat]:
        return [b for b in self.beats if b.attempt_id == attempt_id]

    def reports_of(self, attempt_id: str) -> list[Report]:
        return [r for r in self.reports if r.attempt_id == attempt_id]

    def recorded(self, attempt_id: str) -> Report | None:
        """The report that set the attempt's outcome, if one did."""
        return next((r for r in self.reports_of(attempt_id) if r.status == 200), None)

    # -- the endpoints ------------------------------------------------------------------------

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path.removeprefix("/api/v1/").split("/")
        body = json.loads(request.content) if request.content else {}
        route = path[-1] if request.method == "POST" else path[0]
        if request.method == "PUT" and route == "workflows":
            return self._scripted(route, request) or self._apply(request, path[1], body)
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return problem(401, "unauthenticated")
        stalls = self._stalls.get(route)
        if stalls:
            await anyio.sleep(stalls.popleft())
        scripted = self._scripted(route, request)
        if scripted is not None:
            return scripted
        if route == "claim":
            return await self._claim(path[1], body)
        if route == "heartbeat":
            return self._heartbeat(path[1], body)
        if route in {"complete", "fail"}:
            return self._report(path[1], route, body)
        return problem(404, "not_found")

    def _scripted(self, route: str, request: httpx.Request) -> httpx.Response | None:
        scripted = self._scripts.get(route)
        if not scripted:
            return None
        answer = scripted.popleft()
        if isinstance(answer, httpx.TransportError):
            raise type(answer)(str(answer), request=request)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def _apply(
        self, request: httpx.Request, workflow_id: str, body: dict[str, Any]
    ) -> httpx.Response:
        """Apply by content: a new version (201) unless the latest is the same (200)."""
        token = request.headers.get("authorization")
        if token == f"Bearer {self.token}":
            return problem(403, "forbidden")  # a worker token never writes definitions
        if token != f"Bearer {OPERATOR_TOKEN}":
            return problem(401, "unauthenticated")
        if body.get("id") != workflow_id or not body.get("tasks"):
            errors = [{"path": "/tasks", "message": "at least 1 task"}]
            return problem(400, "invalid_definition", errors=errors)
        versions = self.versions.setdefault(workflow_id, [])
        created = not versions or versions[-1] != body
        if created:
            versions.append(body)
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        version = {
            "workflow_id": workflow_id,
            "version": len(versions),
            "definition_hash": "sha256:" + hashlib.sha256(canonical.encode()).hexdigest(),
            "task_count": len(body["tasks"]),
            "created_at": datetime.now(UTC).isoformat(),
            "definition": body,
        }
        return httpx.Response(201 if created else 200, json=version)

    async def _claim(self, worker_id: str, body: dict[str, Any]) -> httpx.Response:
        queues, actions = body.get("queues"), body.get("actions")
        max_attempts, wait = body.get("max_attempts", 1), body.get("wait_seconds", 20)
        if not queues or not actions or not 1 <= max_attempts <= 100 or not 0 <= wait <= 50:
            return problem(400, "invalid_argument")
        self.claims.append(body)
        self.claim_times.append(anyio.current_time())
        try:
            with anyio.move_on_after(wait):
                while not self._ready(queues, actions):
                    await self._work.wait()
        except anyio.get_cancelled_exc_class():
            # The worker hung up (the handler runs in its task): like the server, which
            # watches the connection, hand nothing out.
            self.hung_up += 1
            raise
        items = [self._hand_out(a, worker_id) for a in self._ready(queues, actions)[:max_attempts]]
        self.answered.append(len(items))
        return httpx.Response(200, json={"attempts": items})

    def _ready(self, queues: list[str], actions: list[str]) -> list[FakeAttempt]:
        return [
            a
            for a in self.attempts.values()
            if a.status == "queued" and a.queue in queues and a.action in actions
        ]

    def _hand_out(self, attempt: FakeAttempt, worker_id: str) -> dict[str, Any]:
        now, wall = anyio.current_time(), datetime.now(UTC)
        attempt.status, attempt.worker_id, attempt.claimed_at = "running", worker_id, wall
        attempt.lease_token = secrets.token_urlsafe(16)
        attempt.lease_expires = now + attempt.heartbeat_timeout
        attempt.timeout_deadline = now + attempt.timeout
        item = {
            "kind": attempt.kind,
            "attempt_id": attempt.attempt_id,
            "lease_token": attempt.lease_token,
            "lease_expires_at": (wall + timedelta(seconds=attempt.heartbeat_timeout)).isoformat(),
            "timeout_at": (wall + timedelta(seconds=attempt.timeout)).isoformat(),
            "heartbeat_timeout_seconds": attempt.heartbeat_timeout,
            "run_id": attempt.run_id,
            "workflow_id": "wf",
            "version": 1,
            "task_key": attempt.task_key,
            "attempt": attempt.attempt,
            "queue": attempt.queue,
            "action": attempt.action,
            "input": attempt.input,
            "run_input": attempt.run_input,
            "upstream": attempt.upstream,
            "traceparent": None,
        }
        if attempt.kind == "tool_call":
            item |= {"tool_call_id": attempt.tool_call_id, "tool": "t", "arguments": attempt.input}
        return item

    def _fenced(self, attempt_id: str, body: dict[str, Any]) -> FakeAttempt | httpx.Response:
        """The attempt if it is running under the body's lease token, else the 409 to answer."""
        attempt = self.attempts.get(attempt_id)
        if attempt is None or attempt.lease_token != body.get("lease_token"):
            return lease_lost("unknown")
        now = anyio.current_time()
        if attempt.status == "running" and now > attempt.timeout_deadline:
            attempt.status = "timed_out"
        elif attempt.status == "running" and now > attempt.lease_expires:
            attempt.status = "expired"
        if attempt.status != "running":
            finished = attempt.status in {"succeeded", "failed"}
            return lease_lost("finished" if finished else attempt.status)
        return attempt

    def _heartbeat(self, attempt_id: str, body: dict[str, Any]) -> httpx.Response:
        progress = body.get("progress")
        if progress is not None and len(json.dumps(progress)) > _PROGRESS_LIMIT:
            answer = problem(413, "payload_too_large")
        else:
            found = self._fenced(attempt_id, body)
            if isinstance(found, httpx.Response):
                answer = found
            else:
                found.lease_expires = anyio.current_time() + found.heartbeat_timeout
                found.progress = progress if progress is not None else found.progress
                expires = datetime.now(UTC) + timedelta(seconds=found.heartbeat_timeout)
                answer = httpx.Response(200, json={"lease_expires_at": expires.isoformat()})
        self.beats.append(Beat(attempt_id, anyio.current_time(), progress, answer.status_code))
        return answer

    def _report(self, attempt_id: str, route: str, body: dict[str, Any]) -> httpx.Response:
        attempt = self.attempts.get(attempt_id)
        answer: httpx.Response
        if attempt is not None and attempt.report == (route, body):
            answer = httpx.Response(200, json=attempt.resource())  # the same report again
        else:
            found = self._fenced(attempt_id, body)
            if isinstance(found, httpx.Response):
                answer = found
            else:
                found.report = (route, body)
                if route == "complete":
                    found.status, found.output = "succeeded", body["output"]
                else:
                    found.status, found.error = "failed", body["error"]
                answer = httpx.Response(200, json=found.resource())
        self.reports.append(Report(attempt_id, route, body, answer.status_code))
        return answer


def problem(status: int, code: str, **extra: Any) -> httpx.Response:
    """A problem+json answer."""
    document = {"type": "about:blank", "status": status, "code": code, "detail": code, **extra}
    return httpx.Response(
        status, json=document, headers={"content-type": "application/problem+json"}
    )


def lease_lost(reason: str) -> httpx.Response:
    """409 ``lease_lost`` with its reason."""
    return problem(409, "lease_lost", reason=reason)
