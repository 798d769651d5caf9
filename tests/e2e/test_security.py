"""Security of the live API (SPEC §6): bearer auth with two roles and rotation, public endpoints,
problems for unknown routes and methods, request ids, and logs that never hold secrets.

Each input (an operation with a credential, a method on a path, a request id, a request whose log
lines are read, ...) is one parametrized case with a short id, so ``pytest -k`` selects it and a
failure names it. A refused request is checked to have written nothing by listing workflows,
versions and runs before and after it; what only many requests together can show (that generated
request ids are unique) is a test of its own.
"""

from __future__ import annotations

import base64
import itertools
import json
import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from _pytest.mark import ParameterSet

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


def table(*params: ParameterSet) -> list[ParameterSet]:
    """The cases of one parametrized test; every case has its own id."""
    ids = Counter(param.id for param in params)
    assert None not in ids, "a case without an id"
    duplicates = sorted(str(case_id) for case_id, count in ids.items() if count > 1)
    assert not duplicates, f"duplicate case ids: {duplicates}"
    return list(params)


# -- assertions --------------------------------------------------------------------------------


def problem_failures(response: httpx.Response, status: int, code: str) -> list[str]:
    """Why ``response`` is not the expected problem (empty when it is); a HEAD has no body."""
    if response.status_code != status:
        return [f"status {response.status_code} != {status}: {response.text[:300]!r}"]
    wrong: list[str] = []
    media = response.headers.get("content-type", "").split(";")[0].strip()
    if media != "application/problem+json":
        wrong.append(f"content type {media!r}")
    if response.request.method == "HEAD":
        return wrong
    try:
        body = response.json()
    except ValueError:
        return [*wrong, f"body is not JSON: {response.text[:300]!r}"]
    if not body.keys() >= PROBLEM_FIELDS:
        wrong.append(f"fields: {body}")
    if body.get("code") != code:
        wrong.append(f"code {body.get('code')!r} != {code!r}")
    if body.get("status") != status:
        wrong.append(f"body status: {body}")
    rid = response.headers.get("x-request-id")
    if not (bool(rid) and body.get("request_id") == rid):
        wrong.append(f"request_id: {(rid, body)}")
    return wrong


def assert_problem(response: httpx.Response, status: int, code: str) -> None:
    wrong = problem_failures(response, status, code)
    assert not wrong, "; ".join(w if len(w) < 400 else w[:400] + "…" for w in wrong)


def assert_status(response: httpx.Response, status: int) -> None:
    """``response`` has ``status`` and a request id."""
    assert response.status_code == status, (
        f"status {response.status_code} != {status}: {response.text[:300]!r}"
    )
    assert response.headers.get("x-request-id"), "no X-Request-ID"


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


OPERATIONS = {
    "create-workflow": Op("POST", f"{V1}/workflows", definition("created-here")),
    "list-workflows": Op("GET", f"{V1}/workflows"),
    "get-workflow": Op("GET", f"{V1}/workflows/{{workflow_id}}"),
    # SPEC §6 (amended 2026-12-01): apply by content; it would change ``seed`` (a new task).
    "apply-workflow": Op(
        "PUT", f"{V1}/workflows/{{workflow_id}}", {"tasks": [{"key": "z", "action": "mock"}]}
    ),
    "create-version": Op(
        "POST",
        f"{V1}/workflows/{{workflow_id}}/versions",
        {"tasks": [{"key": "v", "action": "mock"}]},
    ),
    "list-versions": Op("GET", f"{V1}/workflows/{{workflow_id}}/versions"),
    "get-version": Op("GET", f"{V1}/workflows/{{workflow_id}}/versions/{{version}}"),
    "start-run": Op(
        "POST", f"{V1}/workflows/{{workflow_id}}/versions/{{version}}/runs", {"input": {}}
    ),
    "list-runs": Op("GET", f"{V1}/runs"),
    "get-run": Op("GET", f"{V1}/runs/{{run_id}}"),
    "cancel-run": Op("POST", f"{V1}/runs/{{run_id}}/cancel"),
    "list-tasks": Op("GET", f"{V1}/runs/{{run_id}}/tasks"),
    "get-task": Op("GET", f"{V1}/runs/{{run_id}}/tasks/{{task_key}}"),
    "list-attempts": Op("GET", f"{V1}/runs/{{run_id}}/tasks/{{task_key}}/attempts"),
    "list-events": Op("GET", f"{V1}/runs/{{run_id}}/events"),
}
assert len(OPERATIONS) == 15
WRITES = {name: op for name, op in OPERATIONS.items() if op.method in ("POST", "PUT")}
READS = {name: op for name, op in OPERATIONS.items() if op.method == "GET"}
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def send(client: httpx.Client, op: Op, run_id: str, **headers: str) -> httpx.Response:
    path = op.path(run_id)
    if op.method in ("POST", "PUT"):
        return client.request(op.method, path, json=op.body, headers={**idem(), **headers})
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
    return live.client(None, headers={b"Authorization": value})


# -- bearer tokens -----------------------------------------------------------------------------

# A token that is not one of ours: the challenge says invalid_token.
BAD_CREDENTIALS: dict[str, str | bytes] = {
    "token-wrong": f"Bearer {WRONG_TOKEN}",
    "token-with-suffix": f"Bearer {OPERATOR_TOKEN}x",
    "token-prefix": f"Bearer {OPERATOR_TOKEN[:-1]}",
    "token-upper-case": f"Bearer {OPERATOR_TOKEN.upper()}",
    "token-two-joined": f"Bearer {VIEWER_TOKEN}{OPERATOR_TOKEN}",
    "token-two-comma-joined": f"Bearer {VIEWER_TOKEN},{OPERATOR_TOKEN}",
    "token-4000-chars": "Bearer " + "t" * 4000,
    "token-non-ascii": f"Bearer {OPERATOR_TOKEN}é".encode(),
}
# Not a bearer token at all: the challenge names the realm.
OTHER_SCHEMES: dict[str, str | bytes] = {
    "scheme-basic": "Basic " + base64.b64encode(f"operator:{OPERATOR_TOKEN}".encode()).decode(),
    "scheme-basic-with-token": f"Basic {OPERATOR_TOKEN}",
    "scheme-token": f"Token {OPERATOR_TOKEN}",
    "scheme-digest": f'Digest username="x", response="{OPERATOR_TOKEN}"',
    "scheme-missing": OPERATOR_TOKEN,
    "scheme-glued-to-token": f"Bearer{OPERATOR_TOKEN}",
    "bearer-alone": "Bearer",
    "header-empty": "",
}


def challenge_failures(kind: str, challenge: str | None) -> list[str]:
    """Why a 401's WWW-Authenticate is wrong: ``exact`` (no credentials: the bare realm),
    ``invalid-token`` (a wrong bearer token) or ``realm`` (another scheme)."""
    if kind == "exact":
        ok = challenge == REALM
    elif kind == "invalid-token":
        ok = (challenge or "").startswith(REALM) and 'error="invalid_token"' in (challenge or "")
    else:
        ok = (challenge or "").startswith(REALM)
    return [] if ok else [f"WWW-Authenticate: {challenge!r}"]


CREDENTIAL_CASES = table(
    *(
        case
        for op_name in OPERATIONS
        for case in (
            pytest.param(op_name, None, "exact", id=f"{op_name}-no-token"),
            *(
                pytest.param(op_name, credentials, "invalid-token", id=f"{op_name}-{name}")
                for name, credentials in BAD_CREDENTIALS.items()
            ),
            *(
                pytest.param(op_name, credentials, "realm", id=f"{op_name}-{name}")
                for name, credentials in OTHER_SCHEMES.items()
            ),
        )
    ),
)


@pytest.mark.parametrize(("op_name", "authorization", "challenge"), CREDENTIAL_CASES)
def test_operation_needs_a_valid_bearer_token(
    live_api: LiveApi, op_name: str, authorization: str | bytes | None, challenge: str
) -> None:
    run_id = seed(live_api)
    before = snapshot(live_api)
    op = OPERATIONS[op_name]
    if authorization is None:
        response = send(live_api.anonymous, op, run_id)
    else:
        with anonymous_with(live_api, authorization) as client:
            response = send(client, op, run_id)
    wrong = problem_failures(response, 401, "unauthenticated")
    wrong += challenge_failures(challenge, response.headers.get("www-authenticate"))
    assert not wrong, "; ".join(wrong)
    assert snapshot(live_api) == before, "the listings changed"


@pytest.mark.parametrize("op_name", table(*(pytest.param(n, id=f"head-{n}") for n in READS)))
def test_head_needs_a_bearer_token(live_api: LiveApi, op_name: str) -> None:
    run_id = seed(live_api)
    before = snapshot(live_api)
    response = live_api.anonymous.head(OPERATIONS[op_name].path(run_id))
    assert response.status_code == 401, response.status_code
    assert response.headers.get("www-authenticate") == REALM, response.headers
    assert snapshot(live_api) == before, "the listings changed"


REFUSED_WHO = {
    "anonymous": (401, "unauthenticated"),
    "token-wrong": (401, "unauthenticated"),
    "viewer": (403, "forbidden"),
}
UNREAD_BODIES = {
    "malformed-json": (b"{", "application/json"),
    "text-plain": (b"hello", "text/plain"),
    "2-mib": (b" " * (2 * 1024 * 1024), "application/json"),
}


@pytest.mark.parametrize(
    ("op_name", "who", "what"),
    table(
        *(
            pytest.param(op_name, who, what, id=f"{op_name}-{who}-{what}")
            for op_name in WRITES
            for who in REFUSED_WHO
            for what in UNREAD_BODIES
        )
    ),
)
def test_authentication_comes_before_the_body(
    live_api: LiveApi, op_name: str, who: str, what: str
) -> None:
    """Before anything else: the body, its type, the key."""
    run_id = seed(live_api)
    before = snapshot(live_api)
    status, code = REFUSED_WHO[who]
    body, content_type = UNREAD_BODIES[what]
    path = OPERATIONS[op_name].path(run_id)
    headers = {"Content-Type": content_type}
    method = OPERATIONS[op_name].method
    if who == "anonymous":
        response = live_api.anonymous.request(method, path, content=body, headers=headers)
    elif who == "viewer":
        response = live_api.viewer.request(method, path, content=body, headers=headers)
    else:
        with anonymous_with(live_api, f"Bearer {WRONG_TOKEN}") as client:
            response = client.request(method, path, content=body, headers=headers)
    assert_problem(response, status, code)
    assert snapshot(live_api) == before, "the listings changed"


@pytest.mark.parametrize(
    "scheme",
    table(
        pytest.param("bearer", id="scheme-lower-case"),
        pytest.param("BEARER", id="scheme-upper-case"),
    ),
)
def test_the_scheme_is_case_insensitive(live_api: LiveApi, scheme: str) -> None:
    """RFC 9110 §11.1: the scheme is case-insensitive, the token is not."""
    with anonymous_with(live_api, f"{scheme} {VIEWER_TOKEN}") as client:
        assert_status(client.get(f"{V1}/workflows"), 200)


# -- unknown methods and routes ----------------------------------------------------------------

# The routes of OPERATIONS, with the methods each allows.
ROUTE_NAMES = {
    f"{V1}/workflows": "workflows",
    f"{V1}/workflows/{{workflow_id}}": "workflow",
    f"{V1}/workflows/{{workflow_id}}/versions": "versions",
    f"{V1}/workflows/{{workflow_id}}/versions/{{version}}": "version",
    f"{V1}/workflows/{{workflow_id}}/versions/{{version}}/runs": "version-runs",
    f"{V1}/runs": "runs",
    f"{V1}/runs/{{run_id}}": "run",
    f"{V1}/runs/{{run_id}}/cancel": "cancel",
    f"{V1}/runs/{{run_id}}/tasks": "tasks",
    f"{V1}/runs/{{run_id}}/tasks/{{task_key}}": "task",
    f"{V1}/runs/{{run_id}}/tasks/{{task_key}}/attempts": "attempts",
    f"{V1}/runs/{{run_id}}/events": "events",
}


def allowed_methods() -> dict[str, set[str]]:
    """Each route, with the methods it answers (HEAD wherever GET)."""
    allowed: dict[str, set[str]] = {}
    for op in OPERATIONS.values():
        allowed.setdefault(op.route, set()).add(op.method)
    assert allowed.keys() == ROUTE_NAMES.keys()
    return {
        route: methods | ({"HEAD"} if "GET" in methods else set())
        for route, methods in allowed.items()
    }


ALLOWED = allowed_methods()


@pytest.mark.parametrize(
    ("route", "method", "who"),
    table(
        *(
            pytest.param(route, method, who, id=f"{method.lower()}-{ROUTE_NAMES[route]}-{who}")
            for route, methods in ALLOWED.items()
            for method in METHODS
            if method not in methods
            for who in ("anonymous", "operator")
        )
    ),
)
def test_other_methods_are_405_problems(
    live_api: LiveApi, route: str, method: str, who: str
) -> None:
    run_id = seed(live_api) if "{" in route else "no-run"
    path = Op(method, route).path(run_id)
    if who == "anonymous":
        assert_problem(live_api.anonymous.request(method, path), 405, "method_not_allowed")
        return
    response = live_api.operator.request(method, path, headers=idem())
    wrong = problem_failures(response, 405, "method_not_allowed")
    expected_allow = ALLOWED[route]
    allow = {m.strip() for m in response.headers.get("allow", "").split(",") if m.strip()}
    if not expected_allow <= allow <= expected_allow | {"OPTIONS"}:
        wrong.append(f"Allow: {response.headers.get('allow')!r}, expected {sorted(expected_allow)}")
    assert not wrong, "; ".join(wrong)


PUBLIC_PATHS = {"livez": "/livez", "readyz": "/readyz", "openapi": f"{V1}/openapi.json"}


@pytest.mark.parametrize(
    ("path", "method"),
    table(
        *(
            pytest.param(path, method, id=f"{method.lower()}-{name}")
            for name, path in PUBLIC_PATHS.items()
            for method in ("POST", "PUT", "DELETE")
        )
    ),
)
def test_public_endpoints_refuse_other_methods(live_api: LiveApi, path: str, method: str) -> None:
    assert_problem(live_api.anonymous.request(method, path), 405, "method_not_allowed")


UNKNOWN_ROUTES = {
    "root": "/",
    "api": "/api",
    "api-v1": "/api/v1",
    "api-v2": "/api/v2/workflows",
    "unknown-collection": "/api/v1/nope",
    "upper-case": "/API/V1/WORKFLOWS",
    "workflow-extra": "/api/v1/workflows/seed/extra",
    "version-runs-extra": "/api/v1/workflows/seed/versions/1/runs/extra",
    "attempt-number": "/api/v1/runs/{run_id}/tasks/a/attempts/1",
    "cancel-extra": "/api/v1/runs/{run_id}/cancel/now",
    "livez-extra": "/livez/x",
    "openapi-yaml": "/api/v1/openapi.yaml",
    "dotenv": "/.env",
    "workflows-trailing-slash": "/api/v1/workflows/",
    "runs-trailing-slash": "/api/v1/runs/",
    "run-trailing-slash": "/api/v1/runs/{run_id}/",
    "encoded-traversal": "/api/v1/../../etc/passwd".replace("..", "%2E%2E"),
}


@pytest.mark.parametrize(
    ("path", "method", "who"),
    table(
        *(
            pytest.param(path, method, who, id=f"{method.lower()}-{name}-{who}")
            for name, path in UNKNOWN_ROUTES.items()
            for method in ("GET", "POST")
            for who in ("operator", "anonymous")
        )
    ),
)
def test_unknown_routes_are_404_problems(
    live_api: LiveApi, path: str, method: str, who: str
) -> None:
    if "{run_id}" in path or "/seed/" in path:
        path = path.replace("{run_id}", seed(live_api))
    client = live_api.operator if who == "operator" else live_api.anonymous
    assert_problem(client.request(method, path, headers=idem()), 404, "not_found")


def test_trailing_slash_is_not_redirected_to_a_foreign_host(live_api: LiveApi) -> None:
    """A trailing slash is an unknown route too, not a redirect built from the Host header."""
    response = live_api.anonymous.get(f"{V1}/workflows/", headers={"Host": "evil.example"})
    assert_problem(response, 404, "not_found")
    location = response.headers.get("location", "")
    assert "evil.example" not in location, location


# -- roles -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op_name", "with_key"),
    table(
        *(
            case
            for op_name in WRITES
            for case in (
                pytest.param(op_name, True, id=f"{op_name}-with-key"),
                pytest.param(op_name, False, id=f"{op_name}-without-key"),
            )
        )
    ),
)
def test_viewer_cannot_write_and_writes_nothing(
    live_api: LiveApi, op_name: str, with_key: bool
) -> None:
    run_id = seed(live_api)
    before = snapshot(live_api)
    op = OPERATIONS[op_name]
    if with_key:
        response = send(live_api.viewer, op, run_id)
        assert_problem(response, 403, "forbidden")
        assert "www-authenticate" not in response.headers, "a challenge for a known token"
    else:
        unkeyed = live_api.viewer.request(op.method, op.path(run_id), json=op.body)
        assert_problem(unkeyed, 403, "forbidden")
    assert snapshot(live_api) == before, "the listings changed"
    run = live_api.viewer.get(f"{V1}/runs/{run_id}").json()
    assert not run["cancel_requested"], f"the run is to be canceled: {run}"
    assert run["status"] != "canceled", f"the run is canceled: {run}"


def test_refused_write_saves_no_idempotency_outcome(live_api: LiveApi) -> None:
    """The operator's request with the key of the viewer's refused one is fresh."""
    key = {"Idempotency-Key": "viewer-then-operator"}
    body = definition("after-viewer")
    refused = live_api.viewer.post(f"{V1}/workflows", json=body, headers=key)
    assert_problem(refused, 403, "forbidden")
    created = live_api.operator.post(f"{V1}/workflows", json=body, headers=key)
    assert_status(created, 201)
    assert "idempotent-replayed" not in created.headers, created.headers
    again = live_api.viewer.post(f"{V1}/workflows", json=body, headers=key)
    assert_problem(again, 403, "forbidden")


# -- both operator tokens ----------------------------------------------------------------------


def rotated_client(live: LiveApi) -> httpx.Client:
    return live.client(ROTATED_OPERATOR_TOKEN)


def write_with(live: LiveApi, client: httpx.Client, token: str) -> str:
    """With ``client``: a workflow ``by-<token>``, its version 2, a run of it canceled; the run."""
    wf = f"by-{token}"
    created = client.post(f"{V1}/workflows", json=definition(wf), headers=idem())
    assert_status(created, 201)
    version = client.post(
        f"{V1}/workflows/{wf}/versions",
        json={"tasks": [{"key": "a", "action": "mock", "input": {"sleep_ms": 60_000}}]},
        headers=idem(),
    )
    assert_status(version, 201)
    started = client.post(f"{V1}/workflows/{wf}/versions/2/runs", headers=idem())
    assert_status(started, 202)
    run_id: str = started.json()["run_id"]
    canceled = client.post(f"{V1}/runs/{run_id}/cancel", headers=idem())
    assert_status(canceled, 202)
    final = live.wait_for_run(run_id)
    assert final["status"] == "canceled", final
    return run_id


TOKENS = ("first", "rotated")
READ_PATHS = {
    "workflows": f"{V1}/workflows",
    "workflow": f"{V1}/workflows/{{wf}}",
    "versions": f"{V1}/workflows/{{wf}}/versions",
    "version": f"{V1}/workflows/{{wf}}/versions/2",
    "runs": f"{V1}/runs",
    "run": f"{V1}/runs/{{run_id}}",
    "tasks": f"{V1}/runs/{{run_id}}/tasks",
    "task": f"{V1}/runs/{{run_id}}/tasks/a",
    "attempts": f"{V1}/runs/{{run_id}}/tasks/a/attempts",
    "events": f"{V1}/runs/{{run_id}}/events",
}


@pytest.mark.parametrize("token", table(*(pytest.param(t, id=f"{t}-writes") for t in TOKENS)))
def test_operator_token_writes(live_api: LiveApi, token: str) -> None:
    with rotated_client(live_api) as rotated:
        write_with(live_api, live_api.operator if token == "first" else rotated, token)


@pytest.mark.parametrize(
    ("token", "reader", "path"),
    table(
        *(
            pytest.param(token, reader, path, id=f"{token}-{name}-by-{reader}")
            for token in TOKENS
            for name, path in READ_PATHS.items()
            for reader in ("token", "viewer")
        )
    ),
)
def test_operator_token_reads_what_it_wrote(
    live_api: LiveApi, token: str, reader: str, path: str
) -> None:
    """What either operator token wrote, it (and the viewer) reads."""
    with rotated_client(live_api) as rotated:
        client = live_api.operator if token == "first" else rotated
        run_id = write_with(live_api, client, token)
        path = path.replace("{wf}", f"by-{token}").replace("{run_id}", run_id)
        assert_status((client if reader == "token" else live_api.viewer).get(path), 200)


def test_idempotency_keys_belong_to_their_token(live_api: LiveApi) -> None:
    """The other operator token does not see a replay of the first's key; the first does."""
    key = {"Idempotency-Key": "shared-between-tokens"}
    with rotated_client(live_api) as rotated:
        first = live_api.operator.post(f"{V1}/workflows", json=definition("shared"), headers=key)
        assert_status(first, 201)
        other = rotated.post(f"{V1}/workflows", json=definition("shared"), headers=key)
        assert "idempotent-replayed" not in other.headers, "the rotated token got a replay"
        assert_problem(other, 409, "workflow_exists")
        replay = live_api.operator.post(f"{V1}/workflows", json=definition("shared"), headers=key)
        assert_status(replay, 201)
        assert replay.headers.get("idempotent-replayed") == "true", replay.headers


# -- public endpoints --------------------------------------------------------------------------

PUBLIC_CLIENTS: dict[str, str | None] = {
    "anonymous": None,
    "token-wrong": f"Bearer {WRONG_TOKEN}",
    "scheme-basic": "Basic Zm9vOmJhcg==",
}


def check_livez(response: httpx.Response) -> None:
    assert_status(response, 200)
    assert response.json() == {"status": "ok"}, response.text


def check_readyz(response: httpx.Response) -> None:
    assert_status(response, 200)
    assert response.json().get("status") == "ready", response.text


def check_openapi(response: httpx.Response) -> None:
    assert_status(response, 200)
    version = response.json().get("openapi")
    assert str(version or "").startswith("3.1"), version


def check_head(response: httpx.Response) -> None:
    assert response.status_code == 200, response.status_code


PUBLIC_READS: dict[str, tuple[str, str, Callable[[httpx.Response], None]]] = {
    "livez": ("GET", "/livez", check_livez),
    "readyz": ("GET", "/readyz", check_readyz),
    "openapi": ("GET", f"{V1}/openapi.json", check_openapi),
    "head-livez": ("HEAD", "/livez", check_head),
    "head-readyz": ("HEAD", "/readyz", check_head),
    "head-openapi": ("HEAD", f"{V1}/openapi.json", check_head),
}


@pytest.mark.parametrize(
    ("what", "who"),
    table(
        *(
            pytest.param(what, who, id=f"{what}-{who}")
            for who in PUBLIC_CLIENTS
            for what in PUBLIC_READS
        )
    ),
)
def test_public_endpoints_need_no_token(live_api: LiveApi, what: str, who: str) -> None:
    method, path, check = PUBLIC_READS[what]
    authorization = PUBLIC_CLIENTS[who]
    if authorization is None:
        check(live_api.anonymous.request(method, path))
    else:
        with anonymous_with(live_api, authorization) as client:
            check(client.request(method, path))


# -- request ids -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """A request by ``role``; ``{run_id}`` in ``path`` is the seeded run."""

    role: str  # operator, viewer or anonymous
    method: str
    path: str
    body: Any = None
    needs_seed: bool = False

    def send(self, live: LiveApi, run_id: str | None, request_id: bytes | None) -> httpx.Response:
        client: httpx.Client = getattr(live, self.role)
        headers: dict[bytes, bytes] = {b"Idempotency-Key": f"rid-{next(_keys)}".encode()}
        if request_id is not None:
            headers[b"X-Request-ID"] = request_id
        path = self.path if run_id is None else self.path.replace("{run_id}", run_id)
        return client.request(self.method, path, json=self.body, headers=headers)


CALLS = {
    "200": Call("viewer", "GET", f"{V1}/runs/{{run_id}}", needs_seed=True),
    "201": Call("operator", "POST", f"{V1}/workflows", definition("rid")),
    "202": Call("operator", "POST", f"{V1}/workflows/seed/versions/1/runs", {}, needs_seed=True),
    "400": Call("viewer", "GET", f"{V1}/runs?limit=0"),
    "401": Call("anonymous", "GET", f"{V1}/runs"),
    "403": Call("viewer", "POST", f"{V1}/workflows", definition("nope")),
    "404": Call("viewer", "GET", f"{V1}/workflows/missing"),
    "404-route": Call("viewer", "GET", "/nowhere"),
    "405": Call("viewer", "DELETE", f"{V1}/runs"),
    "409": Call("operator", "POST", f"{V1}/workflows", definition("seed"), needs_seed=True),
    "livez": Call("anonymous", "GET", "/livez"),
    "readyz": Call("anonymous", "GET", "/readyz"),
    "openapi": Call("anonymous", "GET", f"{V1}/openapi.json"),
}
VALID_REQUEST_IDS = {
    "letters": "abc",
    "punctuation": "A.b_c-1",
    "zero": "0",
    "128-chars": "x" * 128,
    "prefixed": "req-" + "9" * 60,
}
INVALID_REQUEST_IDS: dict[str, bytes] = {
    "129-chars": b"x" * 129,
    "space": b"has space",
    "slash": b"a/b",
    "semicolon": b"a;b",
    "script": b"<script>",
    "non-ascii": b"caf\xc3\xa9",
    "ff-byte": b"\xff",
    "empty": b"",
    "tab": b"a\tb",
    "comma": b"id,other",
}


def body_request_id(response: httpx.Response) -> object:
    if not response.headers.get("content-type", "").startswith("application/problem+json"):
        return None
    return response.json().get("request_id")


def call_with_request_id(live: LiveApi, call_name: str, request_id: bytes | None) -> httpx.Response:
    call = CALLS[call_name]
    run_id = seed(live) if call.needs_seed else None
    return call.send(live, run_id, request_id)


@pytest.mark.parametrize(
    ("call_name", "request_id"),
    table(
        *(
            pytest.param(call_name, rid, id=f"{call_name}-echo-{name}")
            for call_name in CALLS
            for name, rid in VALID_REQUEST_IDS.items()
        )
    ),
)
def test_a_valid_request_id_is_echoed(live_api: LiveApi, call_name: str, request_id: str) -> None:
    response = call_with_request_id(live_api, call_name, request_id.encode())
    got = response.headers.get("x-request-id")
    assert got == request_id, f"X-Request-ID {got!r}"
    in_body = body_request_id(response)
    assert in_body in (None, request_id), f"the problem carries {in_body!r}"


@pytest.mark.parametrize(
    ("call_name", "request_id"),
    table(
        *(
            pytest.param(call_name, rid, id=f"{call_name}-replace-{name}")
            for call_name in CALLS
            for name, rid in INVALID_REQUEST_IDS.items()
        )
    ),
)
def test_an_invalid_request_id_is_replaced(
    live_api: LiveApi, call_name: str, request_id: bytes
) -> None:
    response = call_with_request_id(live_api, call_name, request_id)
    got = response.headers.get("x-request-id", "")
    assert REQUEST_ID.match(got), f"X-Request-ID {got!r}"
    assert got.encode() != request_id, f"X-Request-ID {got!r} is the one sent"
    in_body = body_request_id(response)
    assert in_body in (None, got), f"the problem carries {in_body!r}, not the new id"


@pytest.mark.parametrize(
    "call_name", table(*(pytest.param(name, id=f"{name}-generated") for name in CALLS))
)
def test_a_request_without_an_id_gets_one(live_api: LiveApi, call_name: str) -> None:
    response = call_with_request_id(live_api, call_name, None)
    got = response.headers.get("x-request-id", "")
    assert REQUEST_ID.match(got), f"X-Request-ID {got!r}"


def test_generated_request_ids_are_unique(live_api: LiveApi) -> None:
    """Every request of the cases above that gets a new id (an invalid one, or none) on one API:
    no two ids alike."""
    run_id = seed(live_api)
    generated: list[str] = []
    for call in CALLS.values():
        for request_id in [*INVALID_REQUEST_IDS.values(), None]:
            response = call.send(live_api, run_id, request_id)
            generated.append(response.headers.get("x-request-id", ""))
    duplicates = sorted(rid for rid, count in Counter(generated).items() if count > 1)
    assert not duplicates, f"generated more than once: {duplicates}"


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


WF = f"{V1}/workflows"
RUNS_ROUTE = f"{WF}/{{workflow_id}}/versions/{{version}}/runs"
CANCEL_ROUTE = f"{V1}/runs/{{run_id}}/cancel"
SECRET_DEFINITION = {
    "id": "logged",
    "description": f"desc {SECRET_MARKER}",
    "tasks": [
        {"key": "a", "action": "mock", "input": {"output": {"note": SECRET_MARKER}}},
        {"key": "b", "action": "mock", "depends_on": ["a"], "input": {"fail_first": 1}},
        {
            "key": "c",
            "action": "mock",
            "input": {"fail_always": True, "output": {"why": SECRET_MARKER}},
        },
    ],
}


@dataclass
class Logged:
    """Clients of every role and token, the recorder, and the runs the requests made."""

    rec: Recorder
    clients: dict[str, httpx.Client]
    runs: dict[str, str] = field(default_factory=dict)

    def get(self, who: str, route: str | None, path: str) -> httpx.Response:
        return self.rec(self.clients[who], "GET", route, path)

    def post_json(self, who: str, route: str, path: str, value: Any) -> httpx.Response:
        return self.rec.json(self.clients[who], route, path, value)

    def post_raw(self, body: bytes, content_type: str, *, key: bool = True) -> httpx.Response:
        headers = {"Content-Type": content_type, **(idem() if key else {})}
        return self.rec(self.clients["operator"], "POST", WF, WF, body=body, headers=headers)

    def cancel(self, who: str, run: str) -> httpx.Response:
        path = f"{V1}/runs/{self.runs[run]}/cancel"
        return self.rec(self.clients[who], "POST", CANCEL_ROUTE, path, headers=idem())

    def start(self, who: str, run: str, version: int) -> None:
        started = self.post_json(
            who, RUNS_ROUTE, f"{WF}/logged/versions/{version}/runs", {"input": {"m": SECRET_MARKER}}
        )
        assert started.status_code == 202, started.text
        self.runs[run] = started.json()["run_id"]


# Writes whose bodies carry the marker, by both operator tokens; each step needs the ones before.
def create_logged(w: Logged) -> None:
    created = w.post_json("operator", WF, WF, SECRET_DEFINITION)
    assert created.status_code == 201, created.text


def version_by_rotated(w: Logged) -> None:
    version = w.post_json(
        "rotated",
        f"{WF}/{{workflow_id}}/versions",
        f"{WF}/logged/versions",
        {
            "description": SECRET_MARKER,
            "tasks": [
                {"key": "a", "action": "mock", "input": {"sleep_ms": 60_000, "m": SECRET_MARKER}}
            ],
        },
    )
    assert version.status_code == 201, version.text


def start_first(w: Logged) -> None:
    w.start("operator", "first", 1)


def start_slow(w: Logged) -> None:
    w.start("rotated", "slow", 2)


def wait_for_first(w: Logged) -> None:
    w.rec.wait_for_run(w.runs["first"])


def cancel_slow_and_wait(w: Logged) -> None:
    # Whatever the cancel answers (the run's task fails at once on its input's unknown field
    # ``m``, so the run may be finished already), its log lines are what the case checks.
    w.cancel("rotated", "slow")
    w.rec.wait_for_run(w.runs["slow"])


def cancel_again(w: Logged) -> None:
    cancel_slow_and_wait(w)
    w.cancel("operator", "slow")


SETUP = (create_logged, version_by_rotated, start_first, start_slow, wait_for_first)
READY = len(SETUP)  # a workflow ``logged`` of two versions, a run of each, the first finished
Action = Callable[[Logged], object]


def logged(case_id: str, action: Action, setup: int = READY) -> ParameterSet:
    return pytest.param(setup, action, id=case_id)


REFUSED_CREATES = {"viewer": "viewer", "anonymous": "anonymous", "token-wrong": "wrong"}
RUN_ROUTES = {
    "run": f"{V1}/runs/{{run_id}}",
    "tasks": f"{V1}/runs/{{run_id}}/tasks",
    "task": f"{V1}/runs/{{run_id}}/tasks/{{task_key}}",
    "attempts": f"{V1}/runs/{{run_id}}/tasks/{{task_key}}/attempts",
    "events": f"{V1}/runs/{{run_id}}/events",
}
WORKFLOW_ROUTES = {
    "workflows": (WF, WF),
    "workflow": (f"{WF}/{{workflow_id}}", f"{WF}/logged"),
    "versions": (f"{WF}/{{workflow_id}}/versions", f"{WF}/logged/versions"),
    "version": (f"{WF}/{{workflow_id}}/versions/{{version}}", f"{WF}/logged/versions/2"),
    "runs": (f"{V1}/runs", f"{V1}/runs"),
}
READERS = {
    "operator": "operator",
    "rotated": "rotated",
    "viewer": "viewer",
    "anonymous": "anonymous",
    "token-wrong": "wrong",
}


def read_run(run: str, route: str, who: str) -> Action:
    def action(w: Logged) -> None:
        path = route.replace("{run_id}", w.runs[run]).replace("{task_key}", "a")
        w.get(who, route, path)

    return action


def read(who: str, route: str | None, path: str) -> Action:
    return lambda w: w.get(who, route, path)


def post_json(who: str, route: str, path: str, value: Any) -> Action:
    return lambda w: w.post_json(who, route, path, value)


def post_raw(body: bytes, content_type: str, *, key: bool = True) -> Action:
    return lambda w: w.post_raw(body, content_type, key=key)


LOGGED_REQUESTS = table(
    # The writes that build the state of the reads below (what READY does).
    logged("create-with-secrets", create_logged, setup=0),
    logged("version-by-rotated", version_by_rotated, setup=1),
    logged("start-by-operator", start_first, setup=2),
    logged("start-by-rotated", start_slow, setup=3),
    logged("wait-for-run", wait_for_first, setup=4),
    # Refused writes whose bodies carry the marker.
    *(
        logged(f"create-by-{name}", post_json(who, WF, WF, {**SECRET_DEFINITION, "id": "refused"}))
        for name, who in REFUSED_CREATES.items()
    ),
    logged(
        "create-secret-field",
        post_json("operator", WF, WF, {**SECRET_DEFINITION, SECRET_MARKER: 1}),
    ),
    logged(
        "create-secret-in-bad-id",
        post_json("operator", WF, WF, {**SECRET_DEFINITION, "id": f"bad {SECRET_MARKER}"}),
    ),
    logged(
        "start-input-list",
        post_json(
            "operator", RUNS_ROUTE, f"{WF}/logged/versions/1/runs", {"input": [SECRET_MARKER]}
        ),
    ),
    logged(
        "start-secret-field",
        post_json("operator", RUNS_ROUTE, f"{WF}/logged/versions/1/runs", {SECRET_MARKER: {}}),
    ),
    logged(
        "create-malformed", post_raw(f'{{"id": "{SECRET_MARKER}",'.encode(), "application/json")
    ),
    logged(
        "create-duplicate-key",
        post_raw(f'{{"a": "{SECRET_MARKER}", "a": 1}}'.encode(), "application/json"),
    ),
    logged("create-text-plain", post_raw(SECRET_MARKER.encode(), "text/plain")),
    logged("create-2-mib", post_raw((SECRET_MARKER * 80_000).encode(), "application/json")),
    logged("create-without-key", post_raw(b"{}", "application/json", key=False)),
    # Every read, by every role and token, and refused ones.
    *(
        logged(f"read-{run}-{name}-by-{reader}", read_run(run, route, who))
        for run in ("first", "slow")
        for name, route in RUN_ROUTES.items()
        for reader, who in READERS.items()
    ),
    *(
        logged(f"read-{name}-by-{reader}", read(who, route, path))
        for name, (route, path) in WORKFLOW_ROUTES.items()
        for reader, who in READERS.items()
        if who != "rotated"
    ),
    logged("read-missing-workflow", read("viewer", f"{WF}/{{workflow_id}}", f"{WF}/missing-wf")),
    logged("read-bad-run-id", read("viewer", f"{V1}/runs/{{run_id}}", f"{V1}/runs/not-a-run")),
    logged("read-runs-limit-0", read("viewer", f"{V1}/runs", f"{V1}/runs?limit=0")),
    logged("read-runs-bad-cursor", read("viewer", f"{V1}/runs", f"{V1}/runs?cursor=garbage")),
    logged("read-unknown-route", read("viewer", None, f"{V1}/no-such-route/{SECRET_MARKER[:6]}")),
    logged("delete-workflow", lambda w: w.rec(w.clients["viewer"], "DELETE", None, f"{WF}/logged")),
    *(
        logged(f"{name}-by-{reader}", read(who, route, route))
        for name, route in {
            "livez": "/livez",
            "readyz": "/readyz",
            "openapi": f"{V1}/openapi.json",
        }.items()
        for reader, who in (("anonymous", "anonymous"), ("token-wrong", "wrong"))
    ),
    # Cancels: by a viewer (refused), by the rotated operator, then again (no-op), a finished run.
    logged("cancel-by-viewer", lambda w: w.cancel("viewer", "slow")),
    logged("cancel-by-rotated", cancel_slow_and_wait),
    logged("cancel-again", cancel_again),
    logged("cancel-finished-run", lambda w: w.cancel("operator", "first")),
)


def log_failures(
    records: list[logging.LogRecord], access: list[logging.LogRecord], sent: list[Sent]
) -> list[str]:
    """What is wrong with the service's log records of ``sent``: a secret in any record, or not
    exactly one well-formed access record for each request."""
    failures: list[str] = []

    def check(label: str, ok: bool, detail: object = "") -> None:
        if not ok:
            failures.append(f"{label}: {detail}")

    # The test's own HTTP client logs too (httpx, httpcore): those are not the service's logs.
    service_records = [r for r in records if not r.name.startswith(("httpx", "httpcore"))]
    check("some service records were captured", len(service_records) >= len(sent))
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
            check(
                f"{record.name} record {record.getMessage()[:60]!r} holds {what}",
                secret not in text,
                text[:300],
            )

    by_id: dict[str, list[dict[str, Any]]] = {}
    for record in access:
        fields = getattr(record, "fields", None)
        check("access record has fields", isinstance(fields, dict), vars(record))
        if isinstance(fields, dict):
            by_id.setdefault(str(fields.get("request_id")), []).append(fields)
    check(
        "one access record per request",
        len(access) == len(sent),
        f"{len(access)} access records for {len(sent)} requests",
    )
    for s in sent:
        entries = by_id.get(s.request_id, [])
        label = f"{s.method} {s.path[:70]} ({s.response.status_code})"
        check(f"{label}: exactly one access record", len(entries) == 1, entries)
        if len(entries) != 1:
            continue
        fields = entries[0]
        check(
            f"{label}: fields",
            {"request_id", "method", "route", "status", "duration_ms", "error_code"}
            <= fields.keys(),
            fields,
        )
        check(f"{label}: method", fields.get("method") == s.method, fields)
        check(f"{label}: status", fields.get("status") == s.response.status_code, fields)
        duration = fields.get("duration_ms")
        check(
            f"{label}: duration_ms",
            isinstance(duration, int | float) and not isinstance(duration, bool) and duration >= 0,
            fields,
        )
        is_problem = s.response.headers.get("content-type", "").startswith(
            "application/problem+json"
        )
        code = s.response.json().get("code") if is_problem and s.method != "HEAD" else None
        check(f"{label}: error_code", fields.get("error_code") == code, (fields, code))
        route = fields.get("route")
        if s.route is not None:
            check(f"{label}: route template", route == s.route, fields)
        else:
            check(f"{label}: no concrete path as route", route != s.path, fields)
        check(f"{label}: request id header", s.response.headers.get("x-request-id") == s.request_id)
    return failures


@pytest.mark.parametrize(("setup", "action"), LOGGED_REQUESTS)
def test_logs_hold_no_secrets_and_one_access_line_per_request(
    live_api: LiveApi,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    setup: int,
    action: Action,
) -> None:
    """The case's request, and the requests that build the state it needs, all recorded."""
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
        with (
            rotated_client(live_api) as rotated,
            live_api.client(WRONG_TOKEN) as wrong,
        ):
            world = Logged(
                Recorder(live_api),
                {
                    "operator": live_api.operator,
                    "rotated": rotated,
                    "viewer": live_api.viewer,
                    "anonymous": live_api.anonymous,
                    "wrong": wrong,
                },
            )
            for step in SETUP[:setup]:
                step(world)
            action(world)
        sent = world.rec.sent
        access = _wait_for_access_records(collector, {s.request_id for s in sent})
    finally:
        root.removeHandler(collector)

    records = list({id(r): r for r in [*collector.snapshot(), *caplog.records]}.values())
    failures = log_failures(records, access, sent)
    assert not failures, f"{len(failures)} failed checks:\n" + "\n".join(
        f if len(f) < 400 else f[:400] + "…" for f in failures
    )


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
