"""Remote execution through the worker endpoints (SPEC §10), with a worker written in httpx.

In-process on the in-memory store by default, and again over real HTTP and PostgreSQL for the
tests marked ``real_http``. The worker SDK has its own tests; here the protocol is driven by
hand, so every answer — leases, fencing reasons, timeouts — is checked as the wire shows it.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.plugins.live_api import LiveApi
from tests.waiting import wait_until

V1 = "/api/v1"
_keys = itertools.count()


def idem() -> dict[str, str]:
    return {"Idempotency-Key": f"workers-{next(_keys)}"}


def create(api: LiveApi, definition: dict[str, Any]) -> None:
    response = api.operator.post(f"{V1}/workflows", json=definition, headers=idem())
    assert response.status_code == 201, response.text


def start(api: LiveApi, workflow_id: str, run_input: dict[str, Any] | None = None) -> str:
    body = None if run_input is None else {"input": run_input}
    response = api.operator.post(
        f"{V1}/workflows/{workflow_id}/versions/1/runs", json=body, headers=idem()
    )
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id


def claim(
    api: LiveApi,
    *,
    worker_id: str = "w1",
    queues: list[str] | None = None,
    actions: list[str] | None = None,
    max_attempts: int = 1,
    wait_seconds: float = 5,
) -> list[dict[str, Any]]:
    body = {
        "queues": queues or ["default"],
        "actions": actions or ["resize"],
        "max_attempts": max_attempts,
        "wait_seconds": wait_seconds,
    }
    response = api.worker.post(f"{V1}/workers/{worker_id}/claim", json=body, timeout=60)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["attempts"]
    return items


def claim_one(api: LiveApi, **kwargs: Any) -> dict[str, Any]:
    items = wait_until(lambda: claim(api, wait_seconds=1, **kwargs), message="no attempt queued")
    assert len(items) == 1, items
    return items[0]


def report(
    api: LiveApi, item: dict[str, Any], kind: str, body: dict[str, Any] | None = None
) -> httpx.Response:
    payload = {"lease_token": item["lease_token"], **(body or {})}
    return api.worker.post(f"{V1}/attempts/{item['attempt_id']}/{kind}", json=payload)


def complete(api: LiveApi, item: dict[str, Any], output: dict[str, Any]) -> httpx.Response:
    return report(api, item, "complete", {"output": output})


def lease_lost(response: httpx.Response, reason: str) -> None:
    assert response.status_code == 409, response.text
    body = response.json()
    assert (body["code"], body["reason"]) == ("lease_lost", reason), body


def remote(key: str = "r", action: str = "resize", **fields: Any) -> dict[str, Any]:
    return {"key": key, "action": action, **fields}


def task_attempts(api: LiveApi, run_id: str, key: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api.viewer.get(f"{V1}/runs/{run_id}/tasks/{key}/attempts").json()[
        "items"
    ]
    return items


def events(api: LiveApi, run_id: str) -> list[str]:
    return [
        e["type"]
        for e in api.viewer.get(f"{V1}/runs/{run_id}/events", params={"limit": 200}).json()["items"]
    ]


# -- the happy path --------------------------------------------------------------------------


@pytest.mark.real_http
def test_a_remote_task_is_queued_claimed_and_completed(live_api: LiveApi) -> None:
    create(live_api, {"id": "img", "tasks": [remote(input={"size": 64}, queue="images")]})
    run_id = start(live_api, "img", {"path": "/tmp/x.png"})
    wait_until(lambda: task_attempts(live_api, run_id, "r"), message="no attempt queued")
    (queued,) = task_attempts(live_api, run_id, "r")
    assert queued["status"] == "queued"
    assert queued["queue"] == "images"
    assert queued["worker_id"] is None
    assert live_api.viewer.get(f"{V1}/runs/{run_id}").json()["status"] == "running"

    item = claim_one(live_api, queues=["images"])
    assert item["kind"] == "task"
    assert item["run_id"] == run_id
    assert (item["task_key"], item["attempt"], item["action"]) == ("r", 1, "resize")
    assert (item["queue"], item["input"], item["run_input"]) == (
        "images",
        {"size": 64},
        {"path": "/tmp/x.png"},
    )
    assert item["upstream"] == {}
    assert item["heartbeat_timeout_seconds"] == 30
    assert item["traceparent"] is None
    assert len(item["lease_token"]) >= 32
    (running,) = task_attempts(live_api, run_id, "r")
    assert running["status"] == "running"
    assert running["worker_id"] == "w1"
    assert running["attempt_id"] == item["attempt_id"]
    assert running["lease_expires_at"] is not None

    done = complete(live_api, item, {"width": 64})
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "succeeded"
    assert done.json()["output"] == {"width": 64}
    final = live_api.wait_for_run(run_id)
    assert final["status"] == "succeeded"
    task = live_api.viewer.get(f"{V1}/runs/{run_id}/tasks/r").json()
    assert task["output"] == {"width": 64}
    assert events(live_api, run_id) == [
        "run.created",
        "run.started",
        "attempt.queued",
        "attempt.started",
        "attempt.succeeded",
        "task.succeeded",
        "run.succeeded",
    ]


@pytest.mark.real_http
def test_upstream_outputs_reach_in_process_and_remote_tasks(live_api: LiveApi) -> None:
    create(
        live_api,
        {
            "id": "pipe",
            "tasks": [
                {"key": "fetch", "action": "mock", "input": {"output": {"pages": 3}}},
                remote("count", depends_on=["fetch"]),
                {"key": "after", "action": "mock", "depends_on": ["count"]},
            ],
        },
    )
    run_id = start(live_api, "pipe")
    item = claim_one(live_api)
    assert item["upstream"] == {"fetch": {"pages": 3}}
    assert complete(live_api, item, {"words": 120}).status_code == 200
    assert live_api.wait_for_run(run_id)["status"] == "succeeded"


def test_a_waiting_claim_is_woken_by_new_work(live_api: LiveApi) -> None:
    create(live_api, {"id": "wake", "tasks": [remote()]})
    results: list[list[dict[str, Any]]] = []
    claimer = threading.Thread(target=lambda: results.append(claim(live_api, wait_seconds=30)))
    claimer.start()
    # The claim is waiting (nothing is queued); a run then queues an attempt.
    wait_until(claimer.is_alive, message="the claim did not start")
    run_id = start(live_api, "wake")
    claimer.join(timeout=40)
    # A claim that was not woken answers empty after its whole wait (it does not look again):
    # an item means the commit that queued the attempt woke it.
    assert len(results) == 1
    assert len(results[0]) == 1, results
    assert results[0][0]["run_id"] == run_id


def test_claims_are_fifo_and_batched_to_max_attempts(live_api: LiveApi) -> None:
    create(live_api, {"id": "fifo", "tasks": [remote()]})
    runs = [start(live_api, "fifo") for _ in range(5)]
    wait_until(lambda: all(task_attempts(live_api, r, "r") for r in runs), message="not all queued")
    first = claim(live_api, max_attempts=3)
    second = claim(live_api, max_attempts=3)
    assert [i["run_id"] for i in first + second] == runs
    assert len({i["lease_token"] for i in first + second}) == 5
    assert claim(live_api, wait_seconds=0) == []


def test_claims_match_queues_and_actions(live_api: LiveApi) -> None:
    create(live_api, {"id": "route", "tasks": [remote(queue="gpu", action="train")]})
    run_id = start(live_api, "route")
    wait_until(lambda: task_attempts(live_api, run_id, "r"), message="no attempt queued")
    assert claim(live_api, queues=["default"], actions=["train"], wait_seconds=0) == []
    assert claim(live_api, queues=["gpu"], actions=["resize"], wait_seconds=0) == []
    (item,) = claim(live_api, queues=["cpu", "gpu"], actions=["train"], wait_seconds=0)
    assert item["run_id"] == run_id


# -- leases and fencing ------------------------------------------------------------------------


def test_heartbeats_renew_the_lease_and_record_progress(live_api: LiveApi) -> None:
    create(live_api, {"id": "hb", "tasks": [remote(heartbeat_timeout_seconds=60)]})
    run_id = start(live_api, "hb")
    item = claim_one(live_api)
    beat = report(live_api, item, "heartbeat", {"progress": {"done": 0.5}})
    assert beat.status_code == 200, beat.text
    assert beat.json()["lease_expires_at"] >= item["lease_expires_at"]
    (attempt,) = task_attempts(live_api, run_id, "r")
    assert attempt["progress"] == {"done": 0.5}
    assert attempt["lease_expires_at"] == beat.json()["lease_expires_at"]
    # No progress keeps the last one.
    assert report(live_api, item, "heartbeat").status_code == 200
    assert task_attempts(live_api, run_id, "r")[0]["progress"] == {"done": 0.5}
    workers = live_api.viewer.get(f"{V1}/workers").json()["items"]
    assert [(w["worker_id"], w["in_flight"], w["status"]) for w in workers] == [("w1", 1, "active")]
    assert workers[0]["queues"] == ["default"]
    assert workers[0]["actions"] == ["resize"]


def test_a_lease_that_runs_out_is_interrupted_and_retried(live_api: LiveApi) -> None:
    task = remote(
        heartbeat_timeout_seconds=0.3, retry={"max_attempts": 2, "initial_backoff_seconds": 0}
    )
    create(live_api, {"id": "lapse", "tasks": [task]})
    run_id = start(live_api, "lapse")
    first = claim_one(live_api, worker_id="dies")
    # The worker stops heartbeating; the leader expires its lease and the task retries.
    second = claim_one(live_api, worker_id="lives")
    assert (second["attempt"], second["run_id"]) == (2, run_id)
    attempts = task_attempts(live_api, run_id, "r")
    assert attempts[0]["status"] == "interrupted"
    assert attempts[0]["error"]["code"] == "lease_expired"
    assert attempts[0]["error"]["retryable"] is True
    # The first worker's late reports are refused, and write nothing.
    lease_lost(report(live_api, first, "heartbeat"), "expired")
    lease_lost(complete(live_api, first, {"from": "first"}), "expired")
    assert complete(live_api, second, {"from": "second"}).status_code == 200
    assert live_api.wait_for_run(run_id)["status"] == "succeeded"
    task_run = live_api.viewer.get(f"{V1}/runs/{run_id}/tasks/r").json()
    assert task_run["output"] == {"from": "second"}
    assert "attempt.interrupted" in events(live_api, run_id)


def test_start_to_close_counts_from_the_claim(live_api: LiveApi) -> None:
    create(live_api, {"id": "slow", "tasks": [remote(timeout_seconds=0.3)]})
    run_id = start(live_api, "slow")
    item = claim_one(live_api)
    assert item["timeout_at"] < item["lease_expires_at"]  # 0.3 s from the claim, lease 30 s
    final = live_api.wait_for_run(run_id)
    assert final["status"] == "failed"
    (attempt,) = task_attempts(live_api, run_id, "r")
    assert (attempt["status"], attempt["error"]["code"]) == ("timed_out", "attempt_timed_out")
    lease_lost(report(live_api, item, "heartbeat"), "timed_out")
    lease_lost(complete(live_api, item, {}), "timed_out")


def test_schedule_to_start_fails_an_unserved_attempt(live_api: LiveApi) -> None:
    task = remote(action="nobody-serves-this", schedule_to_start_timeout_seconds=0.2)
    create(
        live_api,
        {"id": "unserved", "tasks": [task, {"key": "next", "action": "mock", "depends_on": ["r"]}]},
    )
    run_id = start(live_api, "unserved")
    final = live_api.wait_for_run(run_id)
    assert final["status"] == "failed"
    (attempt,) = task_attempts(live_api, run_id, "r")
    assert attempt["status"] == "failed"
    assert attempt["error"] == {
        "code": "schedule_to_start_timed_out",
        "message": attempt["error"]["message"],
        "retryable": False,
    }
    assert live_api.viewer.get(f"{V1}/runs/{run_id}/tasks/next").json()["status"] == "skipped"


@pytest.mark.real_http
def test_cancel_converges_without_the_worker(live_api: LiveApi) -> None:
    create(live_api, {"id": "stop", "tasks": [remote(), remote("queued-too")]})
    run_id = start(live_api, "stop")
    item = claim_one(live_api)
    canceled = live_api.operator.post(f"{V1}/runs/{run_id}/cancel", headers=idem())
    assert canceled.status_code == 202, canceled.text
    # At once: the run does not wait for its worker.
    assert canceled.json()["status"] == "canceled"
    statuses = {
        a["status"] for k in ("r", "queued-too") for a in task_attempts(live_api, run_id, k)
    }
    assert statuses == {"canceled"}
    lease_lost(report(live_api, item, "heartbeat"), "canceled")
    lease_lost(complete(live_api, item, {}), "canceled")


def test_complete_and_fail_are_idempotent_for_the_same_token_and_body(live_api: LiveApi) -> None:
    create(live_api, {"id": "twice", "tasks": [remote(), remote("f"), remote("d")]})
    run_id = start(live_api, "twice")
    first = claim_one(live_api)
    second = claim_one(live_api)
    third = claim_one(live_api)
    # A default spelled out is the same report as the default left out.
    implied = {"error": {"code": "busy", "message": "later"}}
    spelled = {"error": {"message": "later", "retryable": True, "code": "busy"}}
    retried = report(live_api, third, "fail", implied)
    assert retried.status_code == 200, retried.text
    assert report(live_api, third, "fail", spelled).json() == retried.json()
    lease_lost(
        report(live_api, third, "fail", {"error": {**implied["error"], "retryable": False}}),
        "finished",
    )
    ok = complete(live_api, first, {"n": 1})
    assert ok.status_code == 200
    again = complete(live_api, first, {"n": 1})
    assert (again.status_code, again.json()) == (200, ok.json())
    lease_lost(complete(live_api, first, {"n": 2}), "finished")
    lease_lost(
        report(live_api, first, "fail", {"error": {"code": "x", "message": "m"}}), "finished"
    )
    failure = {"error": {"code": "disk_full", "message": "no space", "retryable": False}}
    failed = report(live_api, second, "fail", failure)
    assert failed.status_code == 200, failed.text
    assert failed.json()["error"] == failure["error"]
    assert report(live_api, second, "fail", failure).json() == failed.json()
    lease_lost(complete(live_api, second, {}), "finished")
    assert live_api.wait_for_run(run_id)["status"] == "failed"


def test_concurrent_duplicate_reports_record_one_outcome(live_api: LiveApi) -> None:
    create(live_api, {"id": "dup", "tasks": [remote()]})
    run_id = start(live_api, "dup")
    item = claim_one(live_api)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: complete(live_api, item, {"once": True}), range(16)))
    assert {a.status_code for a in answers} == {200}
    assert len({a.text for a in answers}) == 1
    assert live_api.wait_for_run(run_id)["status"] == "succeeded"
    assert events(live_api, run_id).count("attempt.succeeded") == 1


@pytest.mark.real_http
def test_concurrent_reports_on_one_run_are_all_recorded(live_api: LiveApi) -> None:
    # Many workers finishing the parallel tasks of one run at once: every report is recorded
    # (200), none is answered a revision conflict or left to lose its lease (SPEC §10). Before
    # reports on one run took turns, some here were answered 409 revision_conflict.
    n = 100
    tasks = [remote(f"t{i:02}") for i in range(n)]
    create(live_api, {"id": "fan", "tasks": tasks})
    run_id = start(live_api, "fan")
    items: list[dict[str, Any]] = []
    while len(items) < n:  # a claim hands out up to 100 at once, as soon as they are queued
        found = claim(live_api, max_attempts=n - len(items), wait_seconds=10)
        assert found, "no attempt queued"
        items += found
    barrier = threading.Barrier(n)

    def finish(item: dict[str, Any]) -> httpx.Response:
        barrier.wait(timeout=30)
        return complete(live_api, item, {"key": item["task_key"]})

    with ThreadPoolExecutor(n) as pool:
        answers = list(pool.map(finish, items))
    assert [a.status_code for a in answers] == [200] * n, [
        a.text for a in answers if a.status_code != 200
    ]
    assert live_api.wait_for_run(run_id)["status"] == "succeeded"
    found = live_api.viewer.get(f"{V1}/runs/{run_id}/tasks", params={"limit": 200}).json()
    assert {(t["status"], t["attempt_count"]) for t in found["items"]} == {("succeeded", 1)}
    assert {t["output"]["key"] for t in found["items"]} == {f"t{i:02}" for i in range(n)}


@pytest.mark.real_http
def test_a_completed_output_reads_back_as_it_was_answered(live_api: LiveApi) -> None:
    # JSONB gives 1e+20 back as 100000000000000000000: the answer already has that form.
    create(live_api, {"id": "numbers", "tasks": [remote()]})
    run_id = start(live_api, "numbers")
    item = claim_one(live_api)
    answered = complete(live_api, item, {"big": 1e20, "zero": -0.0, "small": 1e-7})
    assert answered.status_code == 200, answered.text
    assert answered.json()["output"] == {"big": 10**20, "zero": 0.0, "small": 1e-7}
    assert '"big":100000000000000000000' in answered.text.replace(" ", "")
    assert live_api.wait_for_run(run_id)["status"] == "succeeded"
    (attempt,) = task_attempts(live_api, run_id, "r")
    assert attempt["output"] == answered.json()["output"]
    again = complete(live_api, item, {"big": 1e20, "zero": -0.0, "small": 1e-7})
    assert (again.status_code, again.text) == (200, answered.text)  # the same 200 again


@pytest.mark.parametrize(
    ("token", "attempt_id"),
    [
        pytest.param("not-the-token", None, id="wrong-token"),
        pytest.param("", None, id="empty-token"),
        pytest.param("t" * 300, None, id="overlong-token"),
        pytest.param(None, "00000000-0000-4000-8000-000000000000", id="unknown-attempt"),
        pytest.param(None, "not-a-uuid", id="malformed-attempt-id"),
    ],
)
def test_foreign_reports_are_refused_as_unknown(
    live_api: LiveApi, token: str | None, attempt_id: str | None
) -> None:
    create(live_api, {"id": "foreign", "tasks": [remote()]})
    run_id = start(live_api, "foreign")
    item = claim_one(live_api)
    forged = {**item, "lease_token": item["lease_token"] if token is None else token}
    forged["attempt_id"] = attempt_id or item["attempt_id"]
    for kind, body in (
        ("heartbeat", {}),
        ("complete", {"output": {}}),
        ("fail", {"error": {"code": "x", "message": "m"}}),
    ):
        lease_lost(report(live_api, forged, kind, body), "unknown")
    (attempt,) = task_attempts(live_api, run_id, "r")
    assert attempt["status"] == "running"  # nothing was written


def test_another_workers_token_does_not_fit_an_attempt(live_api: LiveApi) -> None:
    create(live_api, {"id": "two", "tasks": [remote(), remote("s")]})
    start(live_api, "two")
    mine = claim_one(live_api, worker_id="a")
    theirs = claim_one(live_api, worker_id="b")
    lease_lost(complete(live_api, {**mine, "lease_token": theirs["lease_token"]}, {}), "unknown")


# -- roles and hostile input -------------------------------------------------------------------


@pytest.mark.parametrize("who", ["viewer", "operator"])
def test_only_workers_claim_and_report(live_api: LiveApi, who: str) -> None:
    client: httpx.Client = getattr(live_api, who)
    answers = [
        client.post(f"{V1}/workers/w1/claim", json={"queues": ["q"], "actions": ["a"]}),
        client.post(f"{V1}/attempts/00000000-0000-4000-8000-000000000000/heartbeat", json={}),
        client.post(f"{V1}/attempts/00000000-0000-4000-8000-000000000000/complete", json={}),
        client.post(f"{V1}/attempts/00000000-0000-4000-8000-000000000000/fail", json={}),
    ]
    assert [(a.status_code, a.json()["code"]) for a in answers] == [(403, "forbidden")] * 4


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", f"{V1}/runs"),
        ("GET", f"{V1}/workers"),
        ("GET", f"{V1}/queues"),
        ("POST", f"{V1}/workflows"),
    ],
)
def test_a_worker_token_does_nothing_else(live_api: LiveApi, method: str, path: str) -> None:
    response = live_api.worker.request(method, path, json={}, headers=idem())
    assert (response.status_code, response.json()["code"]) == (403, "forbidden")


CLAIM = {"queues": ["default"], "actions": ["resize"]}
JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("body", "path"),
    [
        pytest.param({}, "/queues", id="missing-queues"),
        pytest.param({**CLAIM, "queues": []}, "/queues", id="empty-queues"),
        pytest.param({**CLAIM, "actions": []}, "/actions", id="empty-actions"),
        pytest.param({**CLAIM, "queues": ["Bad Queue"]}, "/queues/0", id="bad-queue-name"),
        pytest.param({**CLAIM, "actions": [""]}, "/actions/0", id="empty-action"),
        pytest.param({**CLAIM, "max_attempts": 0}, "/max_attempts", id="zero-attempts"),
        pytest.param({**CLAIM, "max_attempts": 101}, "/max_attempts", id="too-many-attempts"),
        pytest.param({**CLAIM, "max_attempts": "2"}, "/max_attempts", id="string-attempts"),
        pytest.param({**CLAIM, "wait_seconds": 51}, "/wait_seconds", id="wait-too-long"),
        pytest.param({**CLAIM, "wait_seconds": -1}, "/wait_seconds", id="negative-wait"),
        pytest.param({**CLAIM, "extra": 1}, "/extra", id="unknown-field"),
    ],
)
def test_malformed_claims_are_400(live_api: LiveApi, body: dict[str, Any], path: str) -> None:
    response = live_api.worker.post(f"{V1}/workers/w1/claim", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "invalid_argument"
    assert path in [e["path"] for e in response.json()["errors"]]


@pytest.mark.real_http
@pytest.mark.parametrize(
    ("actions", "code", "paths"),
    [
        pytest.param('["ok", "a\\u0000b"]', "invalid_argument", ["/actions/1"], id="nul"),
        pytest.param('["\\ud800"]', "invalid_json", [], id="lone-surrogate"),
    ],
)
def test_claims_of_actions_the_database_cannot_hold_are_400(
    live_api: LiveApi, actions: str, code: str, paths: list[str]
) -> None:
    """An action name PostgreSQL cannot store (NUL, a lone surrogate) is refused, not a 500."""
    body = f'{{"queues": ["default"], "actions": {actions}, "wait_seconds": 0}}'
    response = live_api.worker.post(f"{V1}/workers/w1/claim", content=body, headers=JSON)
    assert (response.status_code, response.json()["code"]) == (400, code), response.text
    assert [e["path"] for e in response.json().get("errors", [])] == paths
    assert live_api.viewer.get(f"{V1}/workers").json()["items"] == []


@pytest.mark.parametrize(
    "worker_id", ["has space", "x" * 129, "semi;colon", "%00", "w1%0A", "%0Aw1", "w1%0D"]
)
def test_malformed_worker_ids_are_400(live_api: LiveApi, worker_id: str) -> None:
    response = live_api.worker.post(f"{V1}/workers/{worker_id}/claim", json=CLAIM)
    assert (response.status_code, response.json()["code"]) == (400, "invalid_argument")


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        pytest.param("heartbeat", {}, id="heartbeat-no-token"),
        pytest.param("heartbeat", {"lease_token": 5}, id="heartbeat-token-not-string"),
        pytest.param("heartbeat", {"lease_token": "t", "progress": []}, id="progress-not-object"),
        pytest.param("complete", {"lease_token": "t"}, id="complete-no-output"),
        pytest.param("complete", {"lease_token": "t", "output": "x"}, id="output-not-object"),
        pytest.param(
            "complete", {"lease_token": "t", "output": {"a": "\u0000"}}, id="output-with-nul"
        ),
        pytest.param("fail", {"lease_token": "t"}, id="fail-no-error"),
        pytest.param("fail", {"lease_token": "t", "error": {"code": "x"}}, id="error-no-message"),
        pytest.param(
            "fail",
            {"lease_token": "t", "error": {"code": "x", "message": "m", "retryable": "no"}},
            id="retryable-not-bool",
        ),
        pytest.param("fail", {"lease_token": "t", "error": {}, "x": 1}, id="unknown-field"),
    ],
)
def test_malformed_reports_are_400_and_write_nothing(
    live_api: LiveApi, kind: str, body: dict[str, Any]
) -> None:
    create(live_api, {"id": "hostile", "tasks": [remote()]})
    run_id = start(live_api, "hostile")
    item = claim_one(live_api)
    response = live_api.worker.post(f"{V1}/attempts/{item['attempt_id']}/{kind}", json=body)
    assert (response.status_code, response.json()["code"]) == (400, "invalid_argument")
    (attempt,) = task_attempts(live_api, run_id, "r")
    assert (attempt["status"], attempt["progress"]) == ("running", None)


def test_oversized_progress_is_413_and_keeps_the_lease(live_api: LiveApi) -> None:
    create(live_api, {"id": "big", "tasks": [remote()]})
    run_id = start(live_api, "big")
    item = claim_one(live_api)
    huge = {"blob": "x" * (64 * 1024)}
    response = report(live_api, item, "heartbeat", {"progress": huge})
    assert (response.status_code, response.json()["code"]) == (413, "payload_too_large")
    assert task_attempts(live_api, run_id, "r")[0]["progress"] is None
    assert report(live_api, item, "heartbeat", {"progress": {"ok": 1}}).status_code == 200


@pytest.mark.parametrize(
    ("content", "headers", "status", "code"),
    [
        pytest.param(b"{", {"Content-Type": "application/json"}, 400, "invalid_json", id="json"),
        pytest.param(b"[]", {"Content-Type": "application/json"}, 400, "invalid_json", id="array"),
        pytest.param(
            b"{}", {"Content-Type": "text/plain"}, 415, "unsupported_media_type", id="type"
        ),
        pytest.param(
            b'{"lease_token": "' + b"x" * (1024 * 1024) + b'"}',
            JSON,
            413,
            "payload_too_large",
            id="over-1-mib",
        ),
    ],
)
def test_malformed_bodies_on_worker_endpoints(
    live_api: LiveApi, content: bytes, headers: dict[str, str], status: int, code: str
) -> None:
    path = f"{V1}/attempts/00000000-0000-4000-8000-000000000000/complete"
    response = live_api.worker.post(path, content=content, headers=headers)
    assert (response.status_code, response.json()["code"]) == (status, code)


# -- queues ------------------------------------------------------------------------------------


def test_queues_list_work_and_history(live_api: LiveApi) -> None:
    assert live_api.viewer.get(f"{V1}/queues").json() == {"items": []}
    create(live_api, {"id": "qs", "tasks": [remote(queue="alpha"), remote("b", queue="beta")]})
    start(live_api, "qs")
    wait_until(
        lambda: len(live_api.viewer.get(f"{V1}/queues").json()["items"]) == 2,
        message="the queues are not listed",
    )
    claim_one(live_api, queues=["beta"])
    items = {q["queue"]: q for q in live_api.viewer.get(f"{V1}/queues").json()["items"]}
    assert (items["alpha"]["queued"], items["alpha"]["running"]) == (1, 0)
    assert (items["beta"]["queued"], items["beta"]["running"]) == (0, 1)
    assert items["alpha"]["oldest_queued_age_seconds"] >= 0
    assert items["beta"]["oldest_queued_age_seconds"] is None
