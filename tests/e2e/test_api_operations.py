"""Every operation of SPEC §6, with its success and error statuses.

In-process on the in-memory store, and again through real HTTP on PostgreSQL (``real_http``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.plugins.live_api import OPERATOR_TOKEN, ROTATED_OPERATOR_TOKEN, LiveApi
from tests.waiting import wait_until

pytestmark = pytest.mark.real_http

_keys = itertools.count(1)

DIAMOND: dict[str, Any] = {
    "id": "diamond",
    "description": "fan-out, fan-in",
    "tasks": [
        {"key": "a", "action": "mock", "input": {"sleep_ms": 20}},
        {
            "key": "b",
            "action": "mock",
            "depends_on": ["a"],
            "input": {"fail_first": 2},
            "retry": {"max_attempts": 3, "initial_backoff_seconds": 0.05},
        },
        {
            "key": "c",
            "action": "mock",
            "depends_on": ["a"],
            "input": {"sleep_ms": 5000},
            "timeout_seconds": 0.2,
            "retry": {"max_attempts": 2, "initial_backoff_seconds": 0},
        },
        {"key": "d", "action": "mock", "depends_on": ["b"], "input": {"output": {"ok": True}}},
    ],
}


def post(
    client: httpx.Client, path: str, body: Any = None, *, key: str | None = None, **headers: str
) -> httpx.Response:
    sent = {"Idempotency-Key": key or f"key-{next(_keys)}", **headers}
    if body is None:
        return client.post(path, headers=sent)
    return client.post(path, json=body, headers=sent)


def problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["code"] == code
    assert body["type"] == f"urn:workload:problem:{code}"
    assert body["request_id"] == response.headers["x-request-id"]
    assert body["title"]
    assert body["detail"]
    return body


def test_health_and_document(live_api: LiveApi) -> None:
    assert live_api.anonymous.get("/livez").json() == {"status": "ok"}
    ready = live_api.anonymous.get("/readyz")
    # SPEC §12, §14: the role of this process, and its coordinator epoch (a database's: the
    # in-memory store has none).
    body = ready.json()
    assert (ready.status_code, body["status"], body["role"]) == (200, "ready", "leader")
    if live_api.backend == "memory":
        assert body["epoch"] is None
    else:
        assert isinstance(body["epoch"], int)
        assert body["epoch"] >= 1
    document = live_api.anonymous.get("/api/v1/openapi.json")
    assert document.status_code == 200
    assert document.json()["openapi"] == "3.1.0"


def test_workflows_and_versions(live_api: LiveApi) -> None:
    op, viewer = live_api.operator, live_api.viewer
    created = post(op, "/api/v1/workflows", DIAMOND)
    assert created.status_code == 201, created.text
    v1 = created.json()
    assert (v1["workflow_id"], v1["version"], v1["task_count"]) == ("diamond", 1, 4)
    assert v1["definition_hash"].startswith("sha256:")
    assert v1["definition"]["tasks"][0]["retry"] == {
        "max_attempts": 1,
        "initial_backoff_seconds": 1,
        "backoff_multiplier": 2,
        "max_backoff_seconds": 60,
    }
    assert v1["definition"]["tasks"][0]["timeout_seconds"] == 300
    problem(post(op, "/api/v1/workflows", DIAMOND), 409, "workflow_exists")

    workflow = viewer.get("/api/v1/workflows/diamond").json()
    assert workflow["latest_version"] == 1
    assert workflow["description"] == "fan-out, fan-in"
    problem(viewer.get("/api/v1/workflows/nope"), 404, "workflow_not_found")

    second = {key: value for key, value in DIAMOND.items() if key != "id"}
    second["description"] = "v2"
    second["tasks"] = [{"key": "only", "action": "mock"}]
    v2 = post(op, "/api/v1/workflows/diamond/versions", second)
    assert v2.status_code == 201, v2.text
    assert v2.json()["version"] == 2
    problem(
        post(op, "/api/v1/workflows/diamond/versions", {**second, "id": "other"}),
        400,
        "workflow_id_mismatch",
    )
    problem(post(op, "/api/v1/workflows/nope/versions", second), 404, "workflow_not_found")
    assert viewer.get("/api/v1/workflows/diamond").json()["latest_version"] == 2

    versions = viewer.get("/api/v1/workflows/diamond/versions").json()
    assert [v["version"] for v in versions["items"]] == [1, 2]
    assert "definition" not in versions["items"][0]
    assert versions["next_cursor"] is None
    page = viewer.get("/api/v1/workflows/diamond/versions", params={"limit": 1}).json()
    assert [v["version"] for v in page["items"]] == [1]
    rest = viewer.get(
        "/api/v1/workflows/diamond/versions", params={"limit": 1, "cursor": page["next_cursor"]}
    ).json()
    assert ([v["version"] for v in rest["items"]], rest["next_cursor"]) == ([2], None)
    problem(viewer.get("/api/v1/workflows/nope/versions"), 404, "workflow_not_found")

    assert viewer.get("/api/v1/workflows/diamond/versions/1").json() == v1
    problem(viewer.get("/api/v1/workflows/diamond/versions/3"), 404, "version_not_found")
    problem(viewer.get("/api/v1/workflows/diamond/versions/x"), 404, "version_not_found")
    problem(viewer.get("/api/v1/workflows/nope/versions/1"), 404, "workflow_not_found")

    listed = viewer.get("/api/v1/workflows").json()
    assert [w["workflow_id"] for w in listed["items"]] == ["diamond"]


def test_a_run_with_a_diamond_retries_and_a_timeout(live_api: LiveApi) -> None:
    assert post(live_api.operator, "/api/v1/workflows", DIAMOND).status_code == 201
    started = post(
        live_api.operator, "/api/v1/workflows/diamond/versions/1/runs", {"input": {"doc": 1}}
    )
    assert started.status_code == 202, started.text
    run = started.json()
    assert started.headers["location"] == f"/api/v1/runs/{run['run_id']}"
    assert (run["status"], run["revision"], run["input"]) == ("pending", 1, {"doc": 1})
    assert run["task_counts"]["pending"] == 4

    final = live_api.wait_for_run(run["run_id"])
    assert final["status"] == "failed"
    assert final["finished_at"] is not None
    tasks = {
        t["task_key"]: t
        for t in live_api.viewer.get(f"/api/v1/runs/{run['run_id']}/tasks").json()["items"]
    }
    assert {k: t["status"] for k, t in tasks.items()} == {
        "a": "succeeded",
        "b": "succeeded",
        "c": "failed",
        "d": "succeeded",
    }
    assert final["task_counts"]["succeeded"] == 3
    assert final["task_counts"]["failed"] == 1
    assert tasks["d"]["output"] == {"ok": True}
    assert tasks["c"]["error"]["code"] == "attempt_timed_out"
    attempts = live_api.viewer.get(f"/api/v1/runs/{run['run_id']}/tasks/b/attempts").json()["items"]
    assert [a["status"] for a in attempts] == ["failed", "failed", "succeeded"]
    assert [a["attempt"] for a in attempts] == [1, 2, 3]
    timed = live_api.viewer.get(f"/api/v1/runs/{run['run_id']}/tasks/c/attempts").json()["items"]
    assert [a["status"] for a in timed] == ["timed_out", "timed_out"]
    task = live_api.viewer.get(f"/api/v1/runs/{run['run_id']}/tasks/b").json()
    assert (task["attempt_count"], task["max_attempts"], task["depends_on"]) == (3, 3, ["a"])
    problem(live_api.viewer.get(f"/api/v1/runs/{run['run_id']}/tasks/zz"), 404, "task_not_found")
    problem(
        live_api.viewer.get(f"/api/v1/runs/{run['run_id']}/tasks/zz/attempts"),
        404,
        "task_not_found",
    )

    # Events, paginated in order.
    events: list[dict[str, Any]] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 5}
        if cursor:
            params["cursor"] = cursor
        page = live_api.viewer.get(f"/api/v1/runs/{run['run_id']}/events", params=params).json()
        events.extend(page["items"])
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages >= 3
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "run.created"
    assert events[-1]["type"] == "run.failed"
    assert final["revision"] >= 2


def test_concurrent_new_versions_all_succeed_with_consecutive_numbers(live_api: LiveApi) -> None:
    """SPEC §6: each new version is 201 with the next number, however many arrive at once.

    Concurrent creators queue on the workflow (no ``revision_conflict``, no retries to run out
    of): 30 at once get 30 distinct, consecutive versions, each stored as answered.
    """
    op, viewer = live_api.operator, live_api.viewer
    created = post(
        op, "/api/v1/workflows", {"id": "busy", "tasks": [{"key": "a", "action": "mock"}]}
    )
    assert created.status_code == 201, created.text
    n = 30
    clients = [live_api.client(OPERATOR_TOKEN) for _ in range(n)]
    start = threading.Barrier(n)

    def new_version(i: int) -> httpx.Response:
        body = {"description": f"v-{i}", "tasks": [{"key": f"t{i}", "action": "mock"}]}
        start.wait(timeout=30)
        return post(clients[i], "/api/v1/workflows/busy/versions", body)

    with ThreadPoolExecutor(max_workers=n) as pool:
        answers = list(pool.map(new_version, range(n)))
    assert [a.status_code for a in answers] == [201] * n, [a.text for a in answers]
    numbers = sorted(a.json()["version"] for a in answers)
    assert numbers == list(range(2, n + 2))
    for i, answer in enumerate(answers):  # each answer is the version stored under its number
        body = answer.json()
        assert body["definition"]["tasks"][0]["key"] == f"t{i}"
        assert viewer.get(f"/api/v1/workflows/busy/versions/{body['version']}").json() == body
    assert viewer.get("/api/v1/workflows/busy").json()["latest_version"] == n + 1


AWKWARD_NUMBERS = (
    '{"big": 1e20, "exact": 1.2345678901234568E+20, "max": 1.7976931348623157e308,'
    ' "neg_big": -1e16, "below": 9007199254740993.0, "small": 1e-7, "tiny": 5e-324,'
    ' "neg_zero": -0.0, "zero": 0.0, "five": 5.0, "third": 0.30000000000000004,'
    ' "wide": 18446744073709551617, "neg_wide": -1180591620717411303424,'
    ' "nested": [1e300, {"x": -0.0, "y": [1E22, -1e-300]}]}'
)
"""A JSON object of numbers PostgreSQL's JSONB does not give back as Python parsed them."""


def canonical(value: Any) -> str:
    """SPEC §3's canonical JSON: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def as_floats(value: Any) -> Any:
    """``value`` with every number read as a float: ``1e20`` and ``100000000000000000000`` agree."""
    return json.loads(canonical(value), parse_int=float)


def test_hashes_and_inputs_survive_storage_for_awkward_numbers(live_api: LiveApi) -> None:
    """SPEC §3: ``definition_hash`` is the hash of the definition every later GET returns.

    Numbers that JSONB stores differently from how Python parsed them (``1e20`` comes back as
    an integer, ``-0.0`` as ``0.0``) are normalized to that form before hashing, so the 201
    body, its replay, each GET and the hash agree; a run's input likewise (202 body and GETs).
    """
    op, viewer = live_api.operator, live_api.viewer
    numbers = json.loads(AWKWARD_NUMBERS)

    def send(path: str, text: str, key: str) -> httpx.Response:
        headers = {"Idempotency-Key": key, "Content-Type": "application/json"}
        return op.post(path, content=text.encode(), headers=headers)

    definition = (
        '{"id": "numbers", "tasks": [{"key": "a", "action": "mock", "input": '
        f'{{"output": {AWKWARD_NUMBERS}}}}}]}}'
    )
    created = send("/api/v1/workflows", definition, "awkward-1")
    assert created.status_code == 201, created.text
    body = created.json()
    digest = "sha256:" + hashlib.sha256(canonical(body["definition"]).encode()).hexdigest()
    assert body["definition_hash"] == digest
    task_input = body["definition"]["tasks"][0]["input"]["output"]
    assert as_floats(task_input) == as_floats(numbers)  # the same numbers, written out
    assert canonical(task_input["big"]) == "100000000000000000000"
    assert canonical(task_input["neg_zero"]) == "0.0"
    replay = send("/api/v1/workflows", definition, "awkward-1")
    assert replay.headers["idempotent-replayed"] == "true"
    assert canonical(replay.json()) == canonical(body)
    got = viewer.get("/api/v1/workflows/numbers/versions/1").json()
    assert canonical(got) == canonical(body)
    assert canonical(got["definition"]) == canonical(body["definition"])

    unnamed = definition.replace('"id": "numbers", ', "")
    v2 = send("/api/v1/workflows/numbers/versions", unnamed, "v2")
    assert v2.status_code == 201, v2.text
    assert v2.json()["definition_hash"] == digest  # the same normalized definition
    got2 = viewer.get("/api/v1/workflows/numbers/versions/2").json()
    assert canonical(got2) == canonical(v2.json())

    started = send(
        "/api/v1/workflows/numbers/versions/1/runs", f'{{"input": {AWKWARD_NUMBERS}}}', "run"
    )
    assert started.status_code == 202, started.text
    run = started.json()
    assert as_floats(run["input"]) == as_floats(numbers)
    again = send(
        "/api/v1/workflows/numbers/versions/1/runs", f'{{"input": {AWKWARD_NUMBERS}}}', "run"
    )
    assert canonical(again.json()) == canonical(run)
    fetched = viewer.get(f"/api/v1/runs/{run['run_id']}").json()
    assert canonical(fetched["input"]) == canonical(run["input"])
    finished = live_api.wait_for_run(run["run_id"])
    assert finished["status"] == "succeeded"
    assert canonical(finished["input"]) == canonical(run["input"])
    tasks = viewer.get(f"/api/v1/runs/{run['run_id']}/tasks").json()["items"]
    assert canonical(tasks[0]["output"]) == canonical(task_input)  # the mock's output, stored


def test_versions_are_immutable_for_runs(live_api: LiveApi) -> None:
    op, viewer = live_api.operator, live_api.viewer
    post(op, "/api/v1/workflows", {"id": "ver", "tasks": [{"key": "a", "action": "mock"}]})
    v1 = viewer.get("/api/v1/workflows/ver/versions/1").json()
    run = post(op, "/api/v1/workflows/ver/versions/1/runs").json()
    post(op, "/api/v1/workflows/ver/versions", {"tasks": [{"key": "z", "action": "mock"}]})
    finished = live_api.wait_for_run(run["run_id"])
    assert finished["version"] == 1
    assert finished["status"] == "succeeded"
    tasks = viewer.get(f"/api/v1/runs/{run['run_id']}/tasks").json()["items"]
    assert [t["task_key"] for t in tasks] == ["a"]
    assert viewer.get("/api/v1/workflows/ver/versions/1").json() == v1
    run2 = post(op, "/api/v1/workflows/ver/versions/2/runs").json()
    assert run2["version"] == 2
    problem(post(op, "/api/v1/workflows/ver/versions/3/runs"), 404, "version_not_found")
    problem(post(op, "/api/v1/workflows/nope/versions/1/runs"), 404, "workflow_not_found")


def test_cancel_running_converges_and_revisions_guard_cancel(live_api: LiveApi) -> None:
    op, viewer = live_api.operator, live_api.viewer
    slow = {
        "id": "slow",
        "tasks": [
            {"key": "long", "action": "mock", "input": {"sleep_ms": 60000}},
            {"key": "other", "action": "mock", "input": {"sleep_ms": 60000}},
            {"key": "after", "action": "mock", "depends_on": ["long"]},
        ],
    }
    post(op, "/api/v1/workflows", slow)
    run_id = post(op, "/api/v1/workflows/slow/versions/1/runs").json()["run_id"]
    # Both sleeping tasks started: nothing commits again until the cancel (each start may be a
    # commit of its own, so "running" alone would leave the revision moving).
    wait_until(lambda: viewer.get(f"/api/v1/runs/{run_id}").json()["task_counts"]["running"] == 2)
    current = viewer.get(f"/api/v1/runs/{run_id}")
    etag = current.headers["etag"]
    assert etag == f'"{current.json()["revision"]}"'

    stale = f'"{current.json()["revision"] - 1}"'
    problem(
        post(op, f"/api/v1/runs/{run_id}/cancel", **{"If-Match": stale}), 412, "precondition_failed"
    )
    # Preconditions apply to a run that exists: a missing one is 404 whatever If-Match says.
    missing = "018f0000-0000-7000-8000-000000000000"
    for garbage in ("garbage", "", stale, "W/x"):
        problem(
            post(op, f"/api/v1/runs/{missing}/cancel", **{"If-Match": garbage}),
            404,
            "run_not_found",
        )
    # A list (RFC 9110 §13.1.1) matches if one of its strong tags does: a weak one never does.
    for listed in (f"{stale}, W/{etag}", f'W/{etag}, "x", {stale}', f", {stale} ,,"):
        problem(
            post(op, f"/api/v1/runs/{run_id}/cancel", **{"If-Match": listed}),
            412,
            "precondition_failed",
        )
    assert viewer.get(f"/api/v1/runs/{run_id}").json()["revision"] == current.json()["revision"]

    accepted = post(op, f"/api/v1/runs/{run_id}/cancel", **{"If-Match": f'{stale}, "x",{etag}'})
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["cancel_requested"] is True
    final = live_api.wait_for_run(run_id)
    assert final["status"] == "canceled"
    tasks = viewer.get(f"/api/v1/runs/{run_id}/tasks").json()["items"]
    assert {t["status"] for t in tasks} == {"canceled"}
    for key in ("long", "other"):
        attempts = viewer.get(f"/api/v1/runs/{run_id}/tasks/{key}/attempts").json()["items"]
        assert [a["status"] for a in attempts] == ["canceled"]
    again = post(op, f"/api/v1/runs/{run_id}/cancel")
    assert again.status_code == 200
    assert again.json()["status"] == "canceled"
    problem(
        post(op, "/api/v1/runs/00000000-0000-7000-8000-000000000000/cancel"), 404, "run_not_found"
    )


def test_cancel_pending_and_finished_runs(live_api: LiveApi) -> None:
    op = live_api.operator
    post(op, "/api/v1/workflows", {"id": "quick", "tasks": [{"key": "a", "action": "mock"}]})
    run_id = post(op, "/api/v1/workflows/quick/versions/1/runs").json()["run_id"]
    final = live_api.wait_for_run(run_id)
    assert final["status"] == "succeeded"
    problem(post(op, f"/api/v1/runs/{run_id}/cancel"), 409, "run_finished")


def test_runs_filtered_by_workflow_and_status_with_bound_cursors(live_api: LiveApi) -> None:
    op, viewer = live_api.operator, live_api.viewer
    post(op, "/api/v1/workflows", {"id": "ok", "tasks": [{"key": "a", "action": "mock"}]})
    failing = {"key": "a", "action": "mock", "input": {"fail_always": True}}
    post(op, "/api/v1/workflows", {"id": "bad", "tasks": [failing]})
    ok_runs = [post(op, "/api/v1/workflows/ok/versions/1/runs").json()["run_id"] for _ in range(5)]
    bad_runs = [
        post(op, "/api/v1/workflows/bad/versions/1/runs").json()["run_id"] for _ in range(2)
    ]
    for run_id in ok_runs + bad_runs:
        live_api.wait_for_run(run_id)

    # Newest first by default (SPEC §6, amended 2026-12-01); oldest first with order=asc.
    everything = viewer.get("/api/v1/runs", params={"limit": 200}).json()["items"]
    assert [r["run_id"] for r in everything] == [*reversed(ok_runs + bad_runs)]
    oldest = viewer.get("/api/v1/runs", params={"limit": 200, "order": "asc"}).json()["items"]
    assert [r["run_id"] for r in oldest] == ok_runs + bad_runs
    seen: list[str] = []
    params: dict[str, Any] = {"workflow_id": "ok", "status": "succeeded", "limit": 2}
    while True:
        page = viewer.get("/api/v1/runs", params=params).json()
        seen.extend(r["run_id"] for r in page["items"])
        if page["next_cursor"] is None:
            break
        cursor = page["next_cursor"]
        params = {**params, "cursor": cursor}
    assert seen == [*reversed(ok_runs)]
    failed = viewer.get("/api/v1/runs", params={"status": "failed"}).json()["items"]
    assert [r["run_id"] for r in failed] == [*reversed(bad_runs)]
    assert (
        viewer.get("/api/v1/runs", params={"workflow_id": "bad", "status": "succeeded"}).json()[
            "items"
        ]
        == []
    )
    problem(
        viewer.get(
            "/api/v1/runs", params={"workflow_id": "bad", "status": "succeeded", "cursor": cursor}
        ),
        400,
        "invalid_cursor",
    )
    problem(viewer.get("/api/v1/runs", params={"status": "paused"}), 400, "invalid_argument")
    problem(viewer.get("/api/v1/runs/not-a-run"), 404, "run_not_found")


def test_idempotent_writes_replay_and_refuse_reuse(live_api: LiveApi) -> None:
    op = live_api.operator
    first = post(op, "/api/v1/workflows", DIAMOND, key="same")
    replay = post(op, "/api/v1/workflows", DIAMOND, key="same")
    assert replay.status_code == 201
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.json() == first.json()
    assert "idempotent-replayed" not in first.headers
    problem(
        post(op, "/api/v1/workflows", {**DIAMOND, "description": "x"}, key="same"),
        409,
        "idempotency_key_reused",
    )

    started = post(op, "/api/v1/workflows/diamond/versions/1/runs", {"input": {"n": 1}}, key="run")
    again = post(op, "/api/v1/workflows/diamond/versions/1/runs", {"input": {"n": 1}}, key="run")
    assert again.status_code == 202
    assert again.json() == started.json()
    assert again.headers["location"] == started.headers["location"]
    assert again.headers["idempotent-replayed"] == "true"
    problem(
        post(op, "/api/v1/workflows/diamond/versions/1/runs", {"input": {"n": 2}}, key="run"),
        409,
        "idempotency_key_reused",
    )
    runs = live_api.viewer.get("/api/v1/runs").json()["items"]
    assert [r["run_id"] for r in runs] == [started.json()["run_id"]]
    # The key is scoped to the principal: the rotated operator token is another caller.
    other = post(
        op,
        "/api/v1/workflows/diamond/versions/1/runs",
        {"input": {"n": 1}},
        key="run",
        Authorization=f"Bearer {ROTATED_OPERATOR_TOKEN}",
    )
    assert other.status_code == 202
    assert other.json()["run_id"] != started.json()["run_id"]
    problem(op.post("/api/v1/workflows", json=DIAMOND), 400, "idempotency_key_required")
