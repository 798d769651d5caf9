from __future__ import annotations

from tests.plugins.live_api import LiveApi

DIAMOND = {
    "id": "diamond",
    "tasks": [
        {"key": "a", "action": "mock", "input": {"sleep_ms": 20}},
        {
            "key": "b",
            "action": "mock",
            "depends_on": ["a"],
            "input": {"fail_first": 1},
            "retry": {"max_attempts": 2, "initial_backoff_seconds": 0.05},
        },
        {"key": "c", "action": "mock", "depends_on": ["a"]},
        {"key": "d", "action": "mock", "depends_on": ["b", "c"], "input": {"output": {"ok": 1}}},
    ],
}


def test_smoke(live_api: LiveApi) -> None:
    created = live_api.operator.post(
        "/api/v1/workflows", json=DIAMOND, headers={"Idempotency-Key": "k1"}
    )
    assert created.status_code == 201, created.text
    started = live_api.operator.post(
        "/api/v1/workflows/diamond/versions/1/runs", headers={"Idempotency-Key": "k2"}
    )
    assert started.status_code == 202, started.text
    run = live_api.wait_for_run(started.json()["run_id"])
    assert run["status"] == "succeeded", run
