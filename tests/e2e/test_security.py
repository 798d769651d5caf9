"""Security of the live API (SPEC §6): bearer auth with two roles and rotation, public endpoints,
problems for unknown routes and methods, request ids, and logs that never hold secrets.

Checks inside a test are collected rather than stopped at the first failure, so one run reports
every wrong answer at once.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import logging
import re
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.plugins.live_api import (
    OPERATOR_TOKEN,
    ROTATED_OPERATOR_TOKEN,
    VIEWER_TOKEN,
    LiveApi,
)

V1 = "/api/v1"
PROBLEM_FIELDS = {"type", "title", "status", "detail", "code", "request_id"}
REALM = 'Bearer realm="workload"'
REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
WRONG_TOKEN = "wrong-token-e2e-000000000000"
SECRET_MARKER = "SECRET-BODY-MARKER-6d1f0c"
TERMINAL = {"succeeded", "failed", "canceled"}

_keys = itertools.count()


def idem() -> dict[str, str]:
    """A fresh Idempotency-Key header."""
    return {"Idempotency-Key": f"security-{next(_keys)}"}


def definition(workflow_id: str, **task: Any) -> dict[str, Any]:
    return {"id": workflow_id, "tasks": [{"key": "a", "action": "mock", **task}]}


# -- assertions --------------------------------------------------------------------------------


class Findings:
    """Collects every failed check of a test; :meth:`done` fails the test with all of them."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    def check(self, label: str, ok: bool, detail: object = "") -> None:
        if not ok:
            self.failures.append(f"{label}: {detail}")

    def status(self, label: str, response: httpx.Response, status: int) -> None:
        self.check(
            label,
            response.status_code == status,
            f"status {response.status_code} != {status}: {response.text[:300]!r}",
        )
        self.check(f"{label} X-Request-ID", bool(response.headers.get("x-request-id")))

    def problem(self, label: str, response: httpx.Response, status: int, code: str) -> None:
        if response.status_code != status:
            self.failures.append(
                f"{label}: status {response.status_code} != {status}: {response.text[:300]!r}"
            )
            return
        media = response.headers.get("content-type", "").split(";")[0].strip()
        self.check(f"{label} content type", media == "application/problem+json", media)
        if response.request.method == "HEAD":
            return
        try:
            body = response.json()
        except ValueError:
            self.failures.append(f"{label}: body is not JSON: {response.text[:300]!r}")
            return
        self.check(f"{label} fields", body.keys() >= PROBLEM_FIELDS, body)
        self.check(f"{label} code", body.get("code") == code, f"{body.get('code')!r} != {code!r}")
        self.check(f"{label} body status", body.get("status") == status, body)
        rid = response.headers.get("x-request-id")
        self.check(f"{label} request_id", bool(rid) and body.get("request_id") == rid, (rid, body))

    def done(self) -> None:
        if self.failures:
            lines = [f if len(f) < 400 else f[:400] + "…" for f in self.failures]
            pytest.fail(f"{len(lines)} failed checks:\n" + "\n".join(lines), pytrace=False)


def pages(client: httpx.Client, path: str) -> Iterator[dict[str, Any]]:
    cursor: str | None = None
    while True:
        params = {"limit": "200"} if cursor is None else {"limit": "200", "cursor": cursor}
        response = client.get(path, params=params)
        assert response.status_code == 200, response.text
        yield from response.json()["items"]
        cursor = response.json()["next_cursor"]
        if cursor is None:
            return


def snapshot(live: LiveApi) -> dict[str, Any]:
    """Workflows with their versions, and runs with their cancel flags."""
    workflows = {
        w["workflow_id"]: [
            v["version"] for v in pages(live.viewer, f"{V1}/workflows/{w['workflow_id']}/versions")
        ]
        for w in pages(live.viewer, f"{V1}/workflows")
    }
    runs = {r["run_id"]: r["cancel_requested"] for r in pages(live.viewer, f"{V1}/runs")}
    return {"workflows": workflows, "runs": runs}


# -- the API surface ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    method: str
    route: str
    body: Any = None

    def path(self, run_id: str) -> str:
        return (
            self.route.replace("{workflow_id}", "seed")
            .replace("{version}", "1")
            .replace("{run_id}", run_id)
            .replace("{task_key}", "a")
        )


OPERATIONS = (
    Op("POST", f"{V1}/workflows", definition("created-here")),
    Op("GET", f"{V1}/workflows"),
    Op("GET", f"{V1}/workflows/{{workflow_id}}"),
    Op(
        "POST",
        f"{V1}/workflows/{{workflow_id}}/versions",
        {"tasks": [{"key": "v", "action": "mock"}]},
    ),
    Op("GET", f"{V1}/workflows/{{workflow_id}}/versions"),
    Op("GET", f"{V1}/workflows/{{workflow_id}}/versions/{{version}}"),
    Op("POST", f"{V1}/workflows/{{workflow_id}}/versions/{{version}}/runs", {"input": {}}),
    Op("GET", f"{V1}/runs"),
    Op("GET", f"{V1}/runs/{{run_id}}"),
    Op("POST", f"{V1}/runs/{{run_id}}/cancel"),
    Op("GET", f"{V1}/runs/{{run_id}}/tasks"),
    Op("GET", f"{V1}/runs/{{run_id}}/tasks/{{task_key}}"),
    Op("GET", f"{V1}/runs/{{run_id}}/tasks/{{task_key}}/attempts"),
    Op("GET", f"{V1}/runs/{{run_id}}/events"),
)
WRITES = [op for op in OPERATIONS if op.method == "POST"]
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def send(client: httpx.Client, op: Op, run_id: str, **headers: str) -> httpx.Response:
    path = op.path(run_id)
    if op.method == "POST":
        return client.post(path, json=op.body, headers={**idem(), **headers})
    return client.get(path, headers=headers)


def seed(live: LiveApi) -> str:
    """A workflow ``seed`` (one task ``a`` that runs for a minute) and a running run of it."""
    created = live.operator.post(
        f"{V1}/workflows", json=definition("seed", input={"sleep_ms": 60_000}), headers=idem()
    )
    assert created.status_code == 201, created.text
    started = live.operator.post(f"{V1}/workflows/seed/versions/1/runs", headers=idem())
    assert started.status_code == 202, started.text
    run_id: str = started.json()["run_id"]
    return run_id


def anonymous_with(live: LiveApi, authorization: str | bytes) -> httpx.Client:
    value = authorization if isinstance(authorization, bytes) else authorization.encode()
    return httpx.Client(base_url=live.base_url, headers={b"Authorization": value}, timeout=30)


# -- tests -------------------------------------------------------------------------------------


def test_every_operation_needs_a_valid_bearer_token(live_api: LiveApi) -> None:
    run_id = seed(live_api)
    before = snapshot(live_api)
    found = Findings()
    assert len(OPERATIONS) == 14

    bad_credentials: dict[str, str | bytes] = {
        "wrong token": f"Bearer {WRONG_TOKEN}",
        "token with a suffix": f"Bearer {OPERATOR_TOKEN}x",
        "token prefix": f"Bearer {OPERATOR_TOKEN[:-1]}",
        "upper-cased token": f"Bearer {OPERATOR_TOKEN.upper()}",
        "two tokens": f"Bearer {VIEWER_TOKEN}{OPERATOR_TOKEN}",
        "comma-joined tokens": f"Bearer {VIEWER_TOKEN},{OPERATOR_TOKEN}",
        "a long token": "Bearer " + "t" * 4000,
        "non-ASCII token": f"Bearer {OPERATOR_TOKEN}é".encode(),
    }
    other_schemes: dict[str, str | bytes] = {
        "Basic": "Basic " + base64.b64encode(f"operator:{OPERATOR_TOKEN}".encode()).decode(),
        "Basic with the token": f"Basic {OPERATOR_TOKEN}",
        "Token scheme": f"Token {OPERATOR_TOKEN}",
        "Digest": f'Digest username="x", response="{OPERATOR_TOKEN}"',
        "no scheme": OPERATOR_TOKEN,
        "scheme glued to token": f"Bearer{OPERATOR_TOKEN}",
        "Bearer alone": "Bearer",
        "empty header": "",
    }

    with contextlib.ExitStack() as stack:
        bad_clients = {
            name: stack.enter_context(anonymous_with(live_api, credentials))
            for name, credentials in bad_credentials.items()
        }
        scheme_clients = {
            name: stack.enter_context(anonymous_with(live_api, credentials))
            for name, credentials in other_schemes.items()
        }
        for op in OPERATIONS:
            label = f"{op.method} {op.route}"
            response = send(live_api.anonymous, op, run_id)
            found.problem(f"{label} without a token", response, 401, "unauthenticated")
            found.check(
                f"{label} without a token: WWW-Authenticate",
                response.headers.get("www-authenticate") == REALM,
                response.headers.get("www-authenticate"),
            )
            for name, client in bad_clients.items():
                response = send(client, op, run_id)
                found.problem(f"{label} with a {name}", response, 401, "unauthenticated")
                challenge = response.headers.get("www-authenticate", "")
                found.check(
                    f"{label} with a {name}: WWW-Authenticate",
                    challenge.startswith(REALM) and 'error="invalid_token"' in challenge,
                    challenge,
                )
            for name, client in scheme_clients.items():
                response = send(client, op, run_id)
                found.problem(f"{label} with {name}", response, 401, "unauthenticated")
                challenge = response.headers.get("www-authenticate", "")
                found.check(
                    f"{label} with {name}: WWW-Authenticate", challenge.startswith(REALM), challenge
                )
            if op.method == "GET":
                response = live_api.anonymous.head(op.path(run_id))
                found.check(f"HEAD {op.route} without a token", response.status_code == 401)
                found.check(
                    f"HEAD {op.route} without a token: WWW-Authenticate",
                    response.headers.get("www-authenticate") == REALM,
                    response.headers,
                )
            else:
                # Authentication comes before anything else: the body, its type, the key.
                for who, client, status, code in (
                    ("anonymous", live_api.anonymous, 401, "unauthenticated"),
                    ("a wrong token", bad_clients["wrong token"], 401, "unauthenticated"),
                    ("the viewer", live_api.viewer, 403, "forbidden"),
                ):
                    for what, body, content_type in (
                        ("malformed JSON", b"{", "application/json"),
                        ("text/plain", b"hello", "text/plain"),
                        ("a 2 MiB body", b" " * (2 * 1024 * 1024), "application/json"),
                    ):
                        response = client.post(
                            op.path(run_id), content=body, headers={"Content-Type": content_type}
                        )
                        found.problem(f"{label} by {who} with {what}", response, status, code)

    found.check("nothing written", snapshot(live_api) == before, "the listings changed")

    # The scheme is case-insensitive (RFC 9110 §11.1), the token is not.
    for scheme in ("bearer", "BEARER"):
        with anonymous_with(live_api, f"{scheme} {VIEWER_TOKEN}") as client:
            found.status(f"scheme {scheme!r}", client.get(f"{V1}/workflows"), 200)
    found.done()


def test_other_methods_are_405_problems(live_api: LiveApi) -> None:
    run_id = seed(live_api)
    found = Findings()
    allowed: dict[str, set[str]] = {}
    for op in OPERATIONS:
        allowed.setdefault(op.path(run_id), set()).add(op.method)
    for path, methods in allowed.items():
        expected_allow = methods | ({"HEAD"} if "GET" in methods else set())
        for method in METHODS:
            if method in expected_allow:
                continue
            anonymous = live_api.anonymous.request(method, path)
            found.problem(f"{method} {path} as anonymous", anonymous, 405, "method_not_allowed")
            response = live_api.operator.request(method, path, headers=idem())
            label = f"{method} {path}"
            found.problem(label, response, 405, "method_not_allowed")
            allow = {m.strip() for m in response.headers.get("allow", "").split(",") if m.strip()}
            found.check(
                f"{label}: Allow lists every allowed method",
                expected_allow <= allow <= expected_allow | {"OPTIONS"},
                f"Allow: {response.headers.get('allow')!r}, expected {sorted(expected_allow)}",
            )
    for path in ("/livez", "/readyz", f"{V1}/openapi.json"):
        for method in ("POST", "PUT", "DELETE"):
            response = live_api.anonymous.request(method, path)
            found.problem(f"{method} {path}", response, 405, "method_not_allowed")
    found.done()


def test_unknown_routes_are_404_problems(live_api: LiveApi) -> None:
    run_id = seed(live_api)
    found = Findings()
    unknown = [
        "/",
        "/api",
        "/api/v1",
        "/api/v2/workflows",
        "/api/v1/nope",
        "/API/V1/WORKFLOWS",
        "/api/v1/workflows/seed/extra",
        "/api/v1/workflows/seed/versions/1/runs/extra",
        f"/api/v1/runs/{run_id}/tasks/a/attempts/1",
        f"/api/v1/runs/{run_id}/cancel/now",
        "/livez/x",
        "/api/v1/openapi.yaml",
        "/.env",
        "/api/v1/workflows/",
        "/api/v1/runs/",
        f"/api/v1/runs/{run_id}/",
        "/api/v1/../../etc/passwd".replace("..", "%2E%2E"),
    ]
    # A trailing slash is an unknown route too, not a redirect built from the Host header.
    response = live_api.anonymous.get(f"{V1}/workflows/", headers={"Host": "evil.example"})
    found.problem("trailing slash with a foreign Host", response, 404, "not_found")
    found.check(
        "no redirect to a foreign Host",
        "evil.example" not in response.headers.get("location", ""),
        response.headers.get("location"),
    )
    for path in unknown:
        for method in ("GET", "POST"):
            for who, client in (("operator", live_api.operator), ("anonymous", live_api.anonymous)):
                response = client.request(method, path, headers=idem())
                found.problem(f"{method} {path} as {who}", response, 404, "not_found")
    found.done()


def test_viewer_cannot_write_and_writes_nothing(live_api: LiveApi) -> None:
    run_id = seed(live_api)
    before = snapshot(live_api)
    found = Findings()
    for op in WRITES:
        response = send(live_api.viewer, op, run_id)
        found.problem(f"viewer {op.method} {op.route}", response, 403, "forbidden")
        found.check(f"viewer {op.route}: no challenge", "www-authenticate" not in response.headers)
        response = live_api.viewer.post(op.path(run_id), json=op.body)
        found.problem(f"viewer {op.route} without a key", response, 403, "forbidden")
    found.check("nothing written", snapshot(live_api) == before, "the listings changed")
    run = live_api.viewer.get(f"{V1}/runs/{run_id}").json()
    found.check(
        "the run is not canceled", not run["cancel_requested"] and run["status"] != "canceled", run
    )

    # A refused request saved no idempotency outcome: the operator's identical request is fresh.
    key = {"Idempotency-Key": "viewer-then-operator"}
    body = definition("after-viewer")
    refused = live_api.viewer.post(f"{V1}/workflows", json=body, headers=key)
    found.problem("viewer create", refused, 403, "forbidden")
    created = live_api.operator.post(f"{V1}/workflows", json=body, headers=key)
    found.status("operator create with the viewer's key", created, 201)
    found.check("not a replay", "idempotent-replayed" not in created.headers, created.headers)
    again = live_api.viewer.post(f"{V1}/workflows", json=body, headers=key)
    found.problem("viewer replaying the operator's key", again, 403, "forbidden")
    found.done()


def test_both_operator_tokens_work(live_api: LiveApi) -> None:
    found = Findings()
    rotated = httpx.Client(
        base_url=live_api.base_url,
        headers={"Authorization": f"Bearer {ROTATED_OPERATOR_TOKEN}"},
        timeout=30,
    )
    with rotated:
        for name, client in (("first", live_api.operator), ("rotated", rotated)):
            wf = f"by-{name}"
            created = client.post(f"{V1}/workflows", json=definition(wf), headers=idem())
            found.status(f"{name}: create workflow", created, 201)
            version = client.post(
                f"{V1}/workflows/{wf}/versions",
                json={"tasks": [{"key": "a", "action": "mock", "input": {"sleep_ms": 60_000}}]},
                headers=idem(),
            )
            found.status(f"{name}: create version", version, 201)
            started = client.post(f"{V1}/workflows/{wf}/versions/2/runs", headers=idem())
            found.status(f"{name}: start run", started, 202)
            if started.status_code != 202:
                continue
            run_id = started.json()["run_id"]
            canceled = client.post(f"{V1}/runs/{run_id}/cancel", headers=idem())
            found.status(f"{name}: cancel", canceled, 202)
            final = live_api.wait_for_run(run_id)
            found.check(f"{name}: run canceled", final["status"] == "canceled", final)
            for path in (
                f"{V1}/workflows",
                f"{V1}/workflows/{wf}",
                f"{V1}/workflows/{wf}/versions",
                f"{V1}/workflows/{wf}/versions/2",
                f"{V1}/runs",
                f"{V1}/runs/{run_id}",
                f"{V1}/runs/{run_id}/tasks",
                f"{V1}/runs/{run_id}/tasks/a",
                f"{V1}/runs/{run_id}/tasks/a/attempts",
                f"{V1}/runs/{run_id}/events",
            ):
                found.status(f"{name}: GET {path}", client.get(path), 200)
                found.status(f"viewer: GET {path}", live_api.viewer.get(path), 200)

        # Idempotency keys belong to a principal: the other token does not see the replay.
        key = {"Idempotency-Key": "shared-between-tokens"}
        first = live_api.operator.post(f"{V1}/workflows", json=definition("shared"), headers=key)
        found.status("first token with a key", first, 201)
        other = rotated.post(f"{V1}/workflows", json=definition("shared"), headers=key)
        found.check(
            "rotated token, same key: no replay", "idempotent-replayed" not in other.headers
        )
        found.problem("rotated token, same key", other, 409, "workflow_exists")
        replay = live_api.operator.post(f"{V1}/workflows", json=definition("shared"), headers=key)
        found.status("first token replays its own key", replay, 201)
        found.check("a replay", replay.headers.get("idempotent-replayed") == "true", replay.headers)
    found.done()


def test_public_endpoints_need_no_token(live_api: LiveApi) -> None:
    found = Findings()
    clients = {
        "anonymous": live_api.anonymous,
        "wrong token": anonymous_with(live_api, f"Bearer {WRONG_TOKEN}"),
        "Basic": anonymous_with(live_api, "Basic Zm9vOmJhcg=="),
    }
    try:
        for who, client in clients.items():
            livez = client.get("/livez")
            found.status(f"/livez as {who}", livez, 200)
            found.check(f"/livez as {who}: body", livez.json() == {"status": "ok"}, livez.text)
            readyz = client.get("/readyz")
            found.status(f"/readyz as {who}", readyz, 200)
            found.check(
                f"/readyz as {who}: body", readyz.json().get("status") == "ready", readyz.text
            )
            document = client.get(f"{V1}/openapi.json")
            found.status(f"openapi as {who}", document, 200)
            if document.status_code == 200:
                found.check(
                    f"openapi as {who}: 3.1",
                    str(document.json().get("openapi", "")).startswith("3.1"),
                    document.json().get("openapi"),
                )
            for path in ("/livez", "/readyz", f"{V1}/openapi.json"):
                found.check(f"HEAD {path} as {who}", client.head(path).status_code == 200)
    finally:
        for name, client in clients.items():
            if name != "anonymous":
                client.close()
    found.done()


def test_request_ids(live_api: LiveApi) -> None:
    run_id = seed(live_api)
    found = Findings()
    requests: list[tuple[str, httpx.Client, str, str, Any]] = [
        ("200", live_api.viewer, "GET", f"{V1}/runs/{run_id}", None),
        ("201", live_api.operator, "POST", f"{V1}/workflows", definition("rid")),
        ("202", live_api.operator, "POST", f"{V1}/workflows/seed/versions/1/runs", {}),
        ("400", live_api.viewer, "GET", f"{V1}/runs?limit=0", None),
        ("401", live_api.anonymous, "GET", f"{V1}/runs", None),
        ("403", live_api.viewer, "POST", f"{V1}/workflows", definition("nope")),
        ("404", live_api.viewer, "GET", f"{V1}/workflows/missing", None),
        ("404 route", live_api.viewer, "GET", "/nowhere", None),
        ("405", live_api.viewer, "DELETE", f"{V1}/runs", None),
        ("409", live_api.operator, "POST", f"{V1}/workflows", definition("seed")),
        ("livez", live_api.anonymous, "GET", "/livez", None),
        ("readyz", live_api.anonymous, "GET", "/readyz", None),
        ("openapi", live_api.anonymous, "GET", f"{V1}/openapi.json", None),
    ]

    def call(
        client: httpx.Client, method: str, path: str, body: Any, rid: bytes | None
    ) -> httpx.Response:
        headers: dict[bytes, bytes] = {b"Idempotency-Key": f"rid-{next(_keys)}".encode()}
        if rid is not None:
            headers[b"X-Request-ID"] = rid
        return client.request(method, path, json=body, headers=headers)

    def body_request_id(response: httpx.Response) -> object:
        if not response.headers.get("content-type", "").startswith("application/problem+json"):
            return None
        return response.json().get("request_id")

    valid = ["abc", "A.b_c-1", "0", "x" * 128, "req-" + "9" * 60]
    invalid: list[bytes] = [
        b"x" * 129,
        b"has space",
        b"a/b",
        b"a;b",
        b"<script>",
        b"caf\xc3\xa9",
        b"\xff",
        b"",
        b"a\tb",
        b"id,other",
    ]
    generated: list[str] = []
    for label, client, method, path, body in requests:
        for rid in valid:
            response = call(client, method, path, body, rid.encode())
            found.check(
                f"{label} echoes {rid[:20]!r}",
                response.headers.get("x-request-id") == rid,
                response.headers.get("x-request-id"),
            )
            in_body = body_request_id(response)
            found.check(f"{label} problem carries {rid[:20]!r}", in_body in (None, rid), in_body)
        for raw in invalid:
            response = call(client, method, path, body, raw)
            got = response.headers.get("x-request-id", "")
            found.check(
                f"{label} replaces {raw[:20]!r}",
                bool(REQUEST_ID.match(got)) and got.encode() != raw,
                got,
            )
            in_body = body_request_id(response)
            found.check(f"{label} problem carries the new id", in_body in (None, got), in_body)
            generated.append(got)
        response = call(client, method, path, body, None)
        got = response.headers.get("x-request-id", "")
        found.check(f"{label} without an id gets one", bool(REQUEST_ID.match(got)), got)
        generated.append(got)
    found.check("generated ids are unique", len(set(generated)) == len(generated), generated)
    found.done()


# -- logs --------------------------------------------------------------------------------------


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with self._guard:
            self.records.append(record)

    def snapshot(self) -> list[logging.LogRecord]:
        with self._guard:
            return list(self.records)


@dataclass(frozen=True)
class Sent:
    request_id: str
    method: str
    route: str | None  # None: no route matched
    path: str
    response: httpx.Response


class Recorder:
    """Sends requests with known request ids and remembers what the access log must say."""

    def __init__(self, live: LiveApi) -> None:
        self.live = live
        self.sent: list[Sent] = []

    def __call__(
        self,
        client: httpx.Client,
        method: str,
        route: str | None,
        path: str,
        *,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        request_id = f"log-{len(self.sent)}"
        all_headers = {"X-Request-ID": request_id, **(headers or {})}
        response = client.request(method, path, content=body, headers=all_headers)
        self.sent.append(Sent(request_id, method, route, path, response))
        return response

    def json(self, client: httpx.Client, route: str, path: str, value: Any) -> httpx.Response:
        return self(
            client,
            "POST",
            route,
            path,
            body=json.dumps(value).encode(),
            headers={"Content-Type": "application/json", **idem()},
        )

    def wait_for_run(self, run_id: str, timeout: float = 20) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            response = self(self.live.viewer, "GET", f"{V1}/runs/{{run_id}}", f"{V1}/runs/{run_id}")
            body: dict[str, Any] = response.json()
            if body["status"] in TERMINAL:
                return body
            assert time.monotonic() < deadline, f"run {run_id} still {body['status']}"
            time.sleep(0.02)


def _record_text(record: logging.LogRecord) -> str:
    """Everything a record holds, as text: message, formatted form and every attribute."""
    parts = [record.getMessage(), logging.Formatter("%(message)s").format(record)]
    parts += [f"{name}={value!r}" for name, value in vars(record).items()]
    parts += [str(value) for value in vars(record).values()]
    return "\n".join(parts)


def test_logs_hold_no_secrets_and_one_access_line_per_request(
    live_api: LiveApi, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whatever configured logging before (the service's own set-up stops propagation), every
    # record of the service must reach the capture here.
    monkeypatch.setattr(logging.getLogger("workload"), "propagate", True)
    caplog.set_level(logging.DEBUG)
    for name in ("workload", "uvicorn", "uvicorn.error", "uvicorn.access", "starlette"):
        caplog.set_level(logging.DEBUG, logger=name)
    collector = _Collector()
    root = logging.getLogger()
    root.addHandler(collector)
    try:
        sent = _exercise_everything(live_api)
        expected_ids = {s.request_id for s in sent}
        access = _wait_for_access_records(collector, expected_ids)
    finally:
        root.removeHandler(collector)

    found = Findings()
    records = {id(r): r for r in [*collector.snapshot(), *caplog.records]}.values()
    # The test's own HTTP client logs too (httpx, httpcore): those are not the service's logs.
    service_records = [r for r in records if not r.name.startswith(("httpx", "httpcore"))]
    found.check("some service records were captured", len(service_records) >= len(sent))
    secrets = {
        "the operator token": OPERATOR_TOKEN,
        "the rotated operator token": ROTATED_OPERATOR_TOKEN,
        "the viewer token": VIEWER_TOKEN,
        "a wrong token": WRONG_TOKEN,
        "'Bearer '": "Bearer ",
        "the body marker": SECRET_MARKER,
    }
    for record in service_records:
        text = _record_text(record)
        for what, secret in secrets.items():
            found.check(
                f"{record.name} record {record.getMessage()[:60]!r} holds {what}",
                secret not in text,
                text[:300],
            )

    by_id: dict[str, list[dict[str, Any]]] = {}
    for record in access:
        fields = getattr(record, "fields", None)
        found.check("access record has fields", isinstance(fields, dict), vars(record))
        if isinstance(fields, dict):
            by_id.setdefault(str(fields.get("request_id")), []).append(fields)
    found.check(
        "one access record per request",
        len(access) == len(sent),
        f"{len(access)} access records for {len(sent)} requests",
    )
    for s in sent:
        entries = by_id.get(s.request_id, [])
        label = f"{s.method} {s.path[:70]} ({s.response.status_code})"
        found.check(f"{label}: exactly one access record", len(entries) == 1, entries)
        if len(entries) != 1:
            continue
        fields = entries[0]
        found.check(
            f"{label}: fields",
            {"request_id", "method", "route", "status", "duration_ms", "error_code"}
            <= fields.keys(),
            fields,
        )
        found.check(f"{label}: method", fields.get("method") == s.method, fields)
        found.check(f"{label}: status", fields.get("status") == s.response.status_code, fields)
        duration = fields.get("duration_ms")
        found.check(
            f"{label}: duration_ms",
            isinstance(duration, int | float) and not isinstance(duration, bool) and duration >= 0,
            fields,
        )
        is_problem = s.response.headers.get("content-type", "").startswith(
            "application/problem+json"
        )
        code = s.response.json().get("code") if is_problem and s.method != "HEAD" else None
        found.check(f"{label}: error_code", fields.get("error_code") == code, (fields, code))
        route = fields.get("route")
        if s.route is not None:
            found.check(f"{label}: route template", route == s.route, fields)
        else:
            found.check(f"{label}: no concrete path as route", route != s.path, fields)
        found.check(
            f"{label}: request id header", s.response.headers.get("x-request-id") == s.request_id
        )
    found.done()


def _wait_for_access_records(
    collector: _Collector, expected_ids: set[str], timeout: float = 10
) -> list[logging.LogRecord]:
    """The access records, once every expected request has one (the line follows the response)."""
    deadline = time.monotonic() + timeout
    while True:
        access = [r for r in collector.snapshot() if r.name == "workload.access"]
        seen = {getattr(r, "fields", {}).get("request_id") for r in access}
        if expected_ids <= seen or time.monotonic() > deadline:
            return access
        time.sleep(0.01)


def _exercise_everything(live: LiveApi) -> list[Sent]:
    rec = Recorder(live)
    op, viewer, anon = live.operator, live.viewer, live.anonymous
    rotated = httpx.Client(
        base_url=live.base_url,
        headers={"Authorization": f"Bearer {ROTATED_OPERATOR_TOKEN}"},
        timeout=30,
    )
    wrong = httpx.Client(
        base_url=live.base_url, headers={"Authorization": f"Bearer {WRONG_TOKEN}"}, timeout=30
    )
    wf = f"{V1}/workflows"
    with rotated, wrong:
        # Writes whose bodies carry the marker, accepted and refused.
        secret_definition = {
            "id": "logged",
            "description": f"desc {SECRET_MARKER}",
            "tasks": [
                {"key": "a", "action": "mock", "input": {"output": {"note": SECRET_MARKER}}},
                {"key": "b", "action": "mock", "depends_on": ["a"], "input": {"fail_first": 1}},
                {"key": "c", "action": "nope", "input": {"why": SECRET_MARKER}},
            ],
        }
        rec.json(op, wf, wf, secret_definition)
        rec.json(
            rotated,
            f"{wf}/{{workflow_id}}/versions",
            f"{wf}/logged/versions",
            {
                "description": SECRET_MARKER,
                "tasks": [
                    {
                        "key": "a",
                        "action": "mock",
                        "input": {"sleep_ms": 60_000, "m": SECRET_MARKER},
                    }
                ],
            },
        )
        runs_route = f"{wf}/{{workflow_id}}/versions/{{version}}/runs"
        first = rec.json(
            op, runs_route, f"{wf}/logged/versions/1/runs", {"input": {"m": SECRET_MARKER}}
        )
        slow = rec.json(
            rotated, runs_route, f"{wf}/logged/versions/2/runs", {"input": {"m": SECRET_MARKER}}
        )
        rec.json(viewer, wf, wf, {**secret_definition, "id": "refused"})
        rec.json(anon, wf, wf, {**secret_definition, "id": "refused"})
        rec.json(wrong, wf, wf, {**secret_definition, "id": "refused"})
        rec.json(op, wf, wf, {**secret_definition, SECRET_MARKER: 1})
        rec.json(op, wf, wf, {**secret_definition, "id": f"bad {SECRET_MARKER}"})
        rec.json(op, runs_route, f"{wf}/logged/versions/1/runs", {"input": [SECRET_MARKER]})
        rec.json(op, runs_route, f"{wf}/logged/versions/1/runs", {SECRET_MARKER: {}})
        rec(
            op,
            "POST",
            wf,
            wf,
            body=f'{{"id": "{SECRET_MARKER}",'.encode(),
            headers={"Content-Type": "application/json", **idem()},
        )
        rec(
            op,
            "POST",
            wf,
            wf,
            body=f'{{"a": "{SECRET_MARKER}", "a": 1}}'.encode(),
            headers={"Content-Type": "application/json", **idem()},
        )
        rec(
            op,
            "POST",
            wf,
            wf,
            body=SECRET_MARKER.encode(),
            headers={"Content-Type": "text/plain", **idem()},
        )
        rec(
            op,
            "POST",
            wf,
            wf,
            body=(SECRET_MARKER * 80_000).encode(),
            headers={"Content-Type": "application/json", **idem()},
        )
        rec(op, "POST", wf, wf, body=b"{}", headers={"Content-Type": "application/json"})

        run_ids = [r.json()["run_id"] for r in (first, slow) if r.status_code == 202]
        if run_ids:
            rec.wait_for_run(run_ids[0])
        # Every read, by every role and token, and refused ones.
        for run_id in run_ids:
            for client in (op, rotated, viewer, anon, wrong):
                for route in (
                    f"{V1}/runs/{{run_id}}",
                    f"{V1}/runs/{{run_id}}/tasks",
                    f"{V1}/runs/{{run_id}}/tasks/{{task_key}}",
                    f"{V1}/runs/{{run_id}}/tasks/{{task_key}}/attempts",
                    f"{V1}/runs/{{run_id}}/events",
                ):
                    path = route.replace("{run_id}", run_id).replace("{task_key}", "a")
                    rec(client, "GET", route, path)
        for client in (op, viewer, anon, wrong):
            for route, path in (
                (wf, wf),
                (f"{wf}/{{workflow_id}}", f"{wf}/logged"),
                (f"{wf}/{{workflow_id}}/versions", f"{wf}/logged/versions"),
                (f"{wf}/{{workflow_id}}/versions/{{version}}", f"{wf}/logged/versions/2"),
                (f"{V1}/runs", f"{V1}/runs"),
            ):
                rec(client, "GET", route, path)
        rec(viewer, "GET", f"{wf}/{{workflow_id}}", f"{wf}/missing-wf")
        rec(viewer, "GET", f"{V1}/runs/{{run_id}}", f"{V1}/runs/not-a-run")
        rec(viewer, "GET", f"{V1}/runs", f"{V1}/runs?limit=0")
        rec(viewer, "GET", f"{V1}/runs", f"{V1}/runs?cursor=garbage")
        rec(viewer, "GET", None, f"{V1}/no-such-route/{SECRET_MARKER[:6]}")
        rec(viewer, "DELETE", None, f"{wf}/logged")
        for route in ("/livez", "/readyz", f"{V1}/openapi.json"):
            rec(anon, "GET", route, route)
            rec(wrong, "GET", route, route)
        # Cancels: by a viewer (refused), by the rotated operator, then again (no-op).
        if len(run_ids) == 2:
            cancel_route = f"{V1}/runs/{{run_id}}/cancel"
            cancel_path = f"{V1}/runs/{run_ids[1]}/cancel"
            rec(viewer, "POST", cancel_route, cancel_path, headers=idem())
            rec(rotated, "POST", cancel_route, cancel_path, headers=idem())
            rec.wait_for_run(run_ids[1])
            rec(op, "POST", cancel_route, cancel_path, headers=idem())
            rec(op, "POST", cancel_route, f"{V1}/runs/{run_ids[0]}/cancel", headers=idem())
    return rec.sent
