"""Apply by content and run results (SPEC §6, amended 2026-12-01).

``PUT /api/v1/workflows/{id}`` creates a version only when the normalized definition differs
from the latest; a succeeded run's ``output`` is ``{task_key: output}`` of its sink tasks.
In-process on the in-memory store, and again through real HTTP on PostgreSQL (``real_http``).
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.plugins.live_api import OPERATOR_TOKEN, LiveApi
from tests.waiting import wait_until

pytestmark = pytest.mark.real_http

_keys = itertools.count(1)
DEFINITION: dict[str, Any] = {
    "id": "etl",
    "description": "fetch, then clean",
    "tasks": [
        {"key": "fetch", "action": "mock"},
        {"key": "clean", "action": "mock", "depends_on": ["fetch"]},
    ],
}


def put(client: httpx.Client, workflow_id: str, body: Any, **headers: str) -> httpx.Response:
    return client.put(f"/api/v1/workflows/{workflow_id}", json=body, headers=headers)


def problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    return body


def test_apply_creates_then_answers_unchanged_then_creates_the_next(live_api: LiveApi) -> None:
    op, viewer = live_api.operator, live_api.viewer
    created = put(op, "etl", DEFINITION)
    assert created.status_code == 201, created.text
    first = created.json()
    assert (first["workflow_id"], first["version"]) == ("etl", 1)
    assert "Idempotent-Replayed" not in created.headers

    # The same definition, its id left out, its defaults spelled out, its keys in another
    # order: the same normalized definition, so nothing is written.
    same = {
        "tasks": [
            {"action": "mock", "key": "fetch", "depends_on": [], "input": {}},
            {"depends_on": ["fetch"], "key": "clean", "action": "mock", "queue": "default"},
        ],
        "description": "fetch, then clean",
    }
    unchanged = put(op, "etl", same)
    assert unchanged.status_code == 200, unchanged.text
    assert unchanged.json() == first
    assert viewer.get("/api/v1/workflows/etl").json()["latest_version"] == 1
    assert len(viewer.get("/api/v1/workflows/etl/versions").json()["items"]) == 1

    changed = {**DEFINITION, "description": "fetch, clean, again"}
    second = put(op, "etl", changed)
    assert second.status_code == 201, second.text
    assert second.json()["version"] == 2
    assert second.json()["definition_hash"] != first["definition_hash"]
    workflow = viewer.get("/api/v1/workflows/etl").json()
    assert (workflow["latest_version"], workflow["description"]) == (2, "fetch, clean, again")
    # Back to the first definition: it differs from the latest, so it is version 3.
    third = put(op, "etl", DEFINITION)
    assert (third.status_code, third.json()["version"]) == (201, 3)
    assert third.json()["definition_hash"] == first["definition_hash"]


def test_apply_refuses_a_mismatched_id_an_invalid_definition_and_a_viewer(
    live_api: LiveApi,
) -> None:
    op = live_api.operator
    problem(put(op, "other", DEFINITION), 400, "workflow_id_mismatch")
    bad = {"tasks": [{"key": "a", "action": "mock", "depends_on": ["ghost"]}, {"key": "a"}]}
    refused = problem(put(op, "broken", bad), 400, "invalid_definition")
    assert len(refused["errors"]) >= 2  # every problem, not the first one only
    problem(
        put(op, "bad id!", {"tasks": [{"key": "a", "action": "mock"}]}), 400, "invalid_definition"
    )
    problem(put(live_api.viewer, "etl", DEFINITION), 403, "forbidden")
    response = op.put(
        "/api/v1/workflows/etl", content=b"{", headers={"content-type": "application/json"}
    )
    problem(response, 400, "invalid_json")
    assert live_api.viewer.get("/api/v1/workflows/etl").status_code == 404  # nothing written
    assert live_api.viewer.get("/api/v1/workflows/broken").status_code == 404


def test_an_apply_with_a_key_replays_its_first_answer(live_api: LiveApi) -> None:
    op = live_api.operator
    first = put(
        op, "keyed", {"tasks": [{"key": "a", "action": "mock"}]}, **{"Idempotency-Key": "k1"}
    )
    assert first.status_code == 201
    again = put(
        op, "keyed", {"tasks": [{"key": "a", "action": "mock"}]}, **{"Idempotency-Key": "k1"}
    )
    assert again.status_code == 201  # the first outcome, replayed
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    other = put(
        op, "keyed", {"tasks": [{"key": "b", "action": "mock"}]}, **{"Idempotency-Key": "k1"}
    )
    problem(other, 409, "idempotency_key_reused")


def test_concurrent_identical_applies_create_one_version(live_api: LiveApi) -> None:
    n = 10
    clients = [live_api.client(OPERATOR_TOKEN) for _ in range(n)]
    start = threading.Barrier(n)

    def apply(i: int) -> httpx.Response:
        start.wait(timeout=30)
        return put(clients[i], "racy", {"tasks": [{"key": "a", "action": "mock"}]})

    with ThreadPoolExecutor(max_workers=n) as pool:
        answers = list(pool.map(apply, range(n)))
    assert sorted(a.status_code for a in answers) == [200] * (n - 1) + [201], [
        a.text for a in answers
    ]
    assert {a.json()["version"] for a in answers} == {1}
    assert live_api.viewer.get("/api/v1/workflows/racy").json()["latest_version"] == 1


def run_to_end(live_api: LiveApi, workflow_id: str) -> dict[str, Any]:
    started = live_api.operator.post(
        f"/api/v1/workflows/{workflow_id}/versions/1/runs",
        json={"input": {"n": 1}},
        headers={"Idempotency-Key": f"run-{next(_keys)}"},
    )
    assert started.status_code == 202, started.text
    assert started.json()["output"] is None  # not yet succeeded
    run_id = started.json()["run_id"]

    def finished() -> dict[str, Any] | None:
        run: dict[str, Any] = live_api.viewer.get(f"/api/v1/runs/{run_id}").json()
        return run if run["status"] in ("succeeded", "failed", "canceled") else None

    return wait_until(finished, timeout=30, message=f"run {run_id} did not finish")


def test_a_succeeded_runs_output_is_its_sinks_outputs(live_api: LiveApi) -> None:
    diamond = {
        "id": "two-sinks",
        "tasks": [
            {"key": "a", "action": "mock", "input": {"output": {"rows": 3}}},
            {"key": "b", "action": "mock", "depends_on": ["a"], "input": {"output": {"x": 1}}},
            {"key": "c", "action": "mock", "depends_on": ["a"], "input": {"output": {"y": [2]}}},
            {"key": "d", "action": "mock", "depends_on": ["b"]},
        ],
    }
    assert put(live_api.operator, "two-sinks", diamond).status_code == 201
    run = run_to_end(live_api, "two-sinks")
    assert run["status"] == "succeeded"
    sinks = {
        "c": {"y": [2]},
        "d": live_api.viewer.get(f"/api/v1/runs/{run['run_id']}/tasks/d").json()["output"],
    }
    assert run["output"] == sinks
    listed = live_api.viewer.get("/api/v1/runs", params={"workflow_id": "two-sinks"}).json()
    assert [r["output"] for r in listed["items"]] == [sinks]


def test_a_run_that_did_not_succeed_has_no_output(live_api: LiveApi) -> None:
    # b fails for good, so the sink c downstream of it is skipped: the run fails, no result.
    failing = {
        "id": "failing",
        "tasks": [
            {"key": "a", "action": "mock", "input": {"output": {"ok": True}}},
            {"key": "b", "action": "mock", "depends_on": ["a"], "input": {"fail_first": 5}},
            {"key": "c", "action": "mock", "depends_on": ["b"]},
        ],
    }
    assert put(live_api.operator, "failing", failing).status_code == 201
    run = run_to_end(live_api, "failing")
    assert run["status"] == "failed"
    assert run["output"] is None
    sink = live_api.viewer.get(f"/api/v1/runs/{run['run_id']}/tasks/c").json()
    assert sink["status"] == "skipped"
