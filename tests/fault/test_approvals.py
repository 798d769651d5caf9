"""Approvals through real processes (SPEC §11): `workload serve`, a worker, real HTTP.

An agent (mock model) calls a tool that requires approval; the tool is served by the worker
process, which leaves a marker per execution, so "the tool ran once" is counted where it runs.
"""

from __future__ import annotations

import hashlib
import signal
import threading
from datetime import UTC, datetime
from typing import Any

import httpx

from tests.fault.conftest import (
    FAST_REAPER,
    OPERATOR_TOKEN,
    VIEWER_TOKEN,
    Service,
    Services,
    Workers,
    create_workflow,
    get_run,
    post,
    wait_for_run,
)
from tests.tls import shared_tls
from tests.waiting import wait_until

DEPLOY = {
    "name": "deploy",
    "action": "search",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    "requires_approval": True,
}


def approval_workflow(workflow_id: str, timeout: float = 86400) -> dict[str, Any]:
    script = [
        {"tool_calls": [{"name": "deploy", "arguments": {"q": "prod"}}]},
        {"content": "finished"},
    ]
    tool = {**DEPLOY, "approval_timeout_seconds": timeout}
    spec = {"model": "mock", "prompt": "deploy", "tools": [tool], "script": script}
    return {"id": workflow_id, "tasks": [{"key": "agent", "action": "agent", "input": spec}]}


def serve(services: Services, database_url: str) -> Service:
    service = services.start(database_url, env=FAST_REAPER)
    service.wait_ready()
    return service


def start(service: Service, workflow_id: str) -> str:
    response = post(service.operator, f"/api/v1/workflows/{workflow_id}/versions/1/runs")
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id


def pending_approval(service: Service, run_id: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        page = service.client(VIEWER_TOKEN).get("/api/v1/approvals", params={"status": "pending"})
        assert page.status_code == 200, page.text
        mine = [a for a in page.json()["items"] if a["run_id"] == run_id]
        return mine[0] if mine else None

    approval = wait_until(found, message=service.stderr_tail)
    assert get_run(service, run_id)["status"] == "waiting_approval"
    return approval


def decide(
    service: Service, approval: dict[str, Any], decision: str, *, key: str, **extra: Any
) -> httpx.Response:
    body = {"decision": decision, "arguments_digest": approval["arguments_digest"], **extra}
    return service.operator.post(
        f"/api/v1/approvals/{approval['approval_id']}/decision",
        json=body,
        headers={"Idempotency-Key": key},
    )


def tool_runs(worker: Any) -> int:
    return len([c for c in worker.claimed() if c["kind"] == "tool_call"])


def model_saw(service: Service, run_id: str) -> str:
    steps = service.client(VIEWER_TOKEN).get(f"/api/v1/runs/{run_id}/tasks/agent/steps").json()
    last = steps["items"][-1]
    assert last["kind"] == "model_call"
    content: str = last["request"]["messages"][-1]["content"]
    return content


def test_an_approved_call_runs_once_whatever_the_decisions_sent(
    services: Services, database_url: str, workers: Workers
) -> None:
    service = serve(services, database_url)
    worker = workers.start(service, "tools")
    create_workflow(service, approval_workflow("approve-once"))
    run_id = start(service, "approve-once")
    approval = pending_approval(service, run_id)
    assert (approval["tool"], approval["arguments"], approval["status"]) == (
        "deploy",
        {"q": "prod"},
        "pending",
    )
    digest = "sha256:" + hashlib.sha256(b'{"q":"prod"}').hexdigest()
    assert approval["arguments_digest"] == digest

    # A viewer cannot decide; a stale digest changes nothing.
    viewer = service.client(VIEWER_TOKEN).post(
        f"/api/v1/approvals/{approval['approval_id']}/decision",
        json={"decision": "approve", "arguments_digest": digest},
        headers={"Idempotency-Key": "viewer-1"},
    )
    assert viewer.status_code == 403
    stale = decide(
        service, {**approval, "arguments_digest": "sha256:" + "0" * 64}, "approve", key="s"
    )
    assert (stale.status_code, stale.json()["code"]) == (409, "approval_changed")
    assert (
        service.client(VIEWER_TOKEN)
        .get(f"/api/v1/approvals/{approval['approval_id']}")
        .json()["status"]
        == "pending"
    )
    assert tool_runs(worker) == 0

    # Twenty concurrent decisions, half of them replays of one request: exactly one decides.
    answers: list[httpx.Response] = []
    same_key: list[httpx.Response] = []
    lock = threading.Lock()

    def send(i: int) -> None:
        with httpx.Client(
            base_url=service.base_url,
            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
            timeout=10,
            verify=shared_tls(),
        ) as client:
            response = client.post(
                f"/api/v1/approvals/{approval['approval_id']}/decision",
                json={"decision": "approve", "arguments_digest": digest, "comment": "ship it"},
                headers={"Idempotency-Key": "same" if i % 2 else f"other-{i}"},
            )
        with lock:
            answers.append(response)
            if i % 2:
                same_key.append(response)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    statuses = sorted(r.status_code for r in answers)
    assert set(statuses) <= {200, 409}, [r.text for r in answers]
    decided = [r.json() for r in answers if r.status_code == 200]
    assert {d["status"] for d in decided} == {"approved"}
    assert len({d["decided_at"] for d in decided}) == 1  # one decision, replayed
    conflicts = [r.json()["code"] for r in answers if r.status_code == 409]
    assert set(conflicts) <= {"approval_decided"}

    run = wait_for_run(service, run_id)
    assert run["status"] == "succeeded"
    assert tool_runs(worker) == 1
    final = service.client(VIEWER_TOKEN).get(f"/api/v1/approvals/{approval['approval_id']}").json()
    assert final["status"] == "approved"
    assert final["comment"] == "ship it"
    assert final["decided_by"].startswith("operator:")
    assert OPERATOR_TOKEN not in str(final)
    assert OPERATOR_TOKEN not in service.stderr()
    # The replay of the same request, after the fact, answers as that request was answered.
    again = decide(service, approval, "approve", key="same", comment="ship it")
    first = {r.status_code for r in same_key}
    assert len(first) == 1  # the ten same-key requests got one answer
    assert again.status_code in first
    if again.status_code == 200:
        assert again.json()["decided_at"] == final["decided_at"]


def test_a_rejection_is_told_to_the_model_which_finishes(
    services: Services, database_url: str, workers: Workers
) -> None:
    service = serve(services, database_url)
    worker = workers.start(service, "tools")
    create_workflow(service, approval_workflow("reject"))
    run_id = start(service, "reject")
    approval = pending_approval(service, run_id)
    rejected = decide(service, approval, "reject", key="r1", comment="not today")
    assert rejected.status_code == 200
    assert rejected.json()["status"] == "rejected"
    assert wait_for_run(service, run_id)["status"] == "succeeded"
    assert tool_runs(worker) == 0
    assert "rejected" in model_saw(service, run_id)
    assert "not today" in model_saw(service, run_id)
    late = decide(service, approval, "approve", key="r2")
    assert (late.status_code, late.json()["code"]) == (409, "approval_decided")


def test_an_approval_that_expired_while_the_service_was_down_is_a_rejection(
    services: Services, database_url: str, workers: Workers
) -> None:
    first = serve(services, database_url)
    # It must still be pending when the first service is killed, on a slow machine too.
    create_workflow(first, approval_workflow("expire", timeout=5))
    run_id = start(first, "expire")
    approval = pending_approval(first, run_id)
    first.signal(signal.SIGKILL)
    first.wait_exit(10)
    # It expires while nothing runs; the next coordinator applies it at once.
    expires_at = datetime.fromisoformat(approval["expires_at"])
    wait_until(lambda: datetime.now(UTC) > expires_at, timeout=10, message="time stood still")
    second = serve(services, database_url)
    worker = workers.start(second, "tools")
    assert wait_for_run(second, run_id)["status"] == "succeeded"
    expired = second.client(VIEWER_TOKEN).get(f"/api/v1/approvals/{approval['approval_id']}")
    assert expired.json()["status"] == "expired"
    assert expired.json()["decided_by"] is None
    assert tool_runs(worker) == 0
    assert "expired" in model_saw(second, run_id)


def test_kills_while_pending_and_right_after_a_decision_lose_nothing(
    services: Services, database_url: str, workers: Workers
) -> None:
    first = serve(services, database_url)
    create_workflow(first, approval_workflow("kill"))
    run_id = start(first, "kill")
    approval = pending_approval(first, run_id)
    first.signal(signal.SIGKILL)  # while the approval is pending
    first.wait_exit(10)

    second = serve(services, database_url)
    assert pending_approval(second, run_id)["approval_id"] == approval["approval_id"]
    assert decide(second, approval, "approve", key="k1").status_code == 200
    second.signal(signal.SIGKILL)  # right after the decision
    second.wait_exit(10)

    third = serve(services, database_url)
    worker = workers.start(third, "tools")
    assert wait_for_run(third, run_id)["status"] == "succeeded"
    assert tool_runs(worker) == 1
    assert decide(third, approval, "approve", key="k1").status_code == 200  # replayed
    events = third.client(VIEWER_TOKEN).get(f"/api/v1/runs/{run_id}/events", params={"limit": 200})
    types = [e["type"] for e in events.json()["items"]]
    assert types.count("approval.requested") == 1
    assert types.count("approval.approved") == 1
