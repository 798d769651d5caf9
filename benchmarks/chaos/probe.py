"""A frozen worker's late report, played by the soak itself with the worker token.

While a worker is frozen (the ``worker_sigstop`` fault), the probe starts a run of
``chaos-probe`` (one remote task on a queue no worker serves), claims its attempt, lets the
lease run out without a heartbeat, and then completes it — as the frozen worker would on
waking. The server must refuse that report (409 ``lease_lost``) and retry the task; the probe
then claims the retry and completes it, so the run succeeds. Every answer is recorded in the
fault's detail; the report fails the soak unless the late report was refused.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx

from benchmarks.chaos.settings import OPERATOR_TOKEN, PROBE_QUEUE, PROBE_WORKFLOW, WORKER_TOKEN

__all__ = ["PROBE_PATH", "late_report"]

PROBE_PATH = f"/api/v1/workflows/{PROBE_WORKFLOW['id']}/versions/1/runs"
_ACTION = PROBE_WORKFLOW["tasks"][0]["action"]
_LAPSE_MARGIN_SECONDS = 1.0


def late_report(base_url: str, key: str) -> dict[str, Any]:
    """Run the probe once against ``base_url``; what each step answered."""
    detail: dict[str, Any] = {"probe_key": key}
    worker_id = f"chaos-probe-{uuid.uuid4().hex[:8]}"
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    with httpx.Client(base_url=base_url, timeout=20) as client:
        started = client.post(PROBE_PATH, headers={**operator, "Idempotency-Key": key})
        detail["probe_start_status"] = started.status_code
        if started.status_code != 202:
            return detail
        detail["probe_run"] = started.json()["run_id"]
        claimed = _claim(client, worker_id)
        if claimed is None:
            detail["probe_claim"] = "nothing claimed"
            return detail
        time.sleep(float(claimed["heartbeat_timeout_seconds"]) + _LAPSE_MARGIN_SECONDS)
        late = _complete(client, claimed)
        detail["late_report_status"] = late.status_code
        detail["late_report_code"] = _code(late)
        retry = _claim(client, worker_id)
        if retry is None:
            detail["retry_claim"] = "nothing claimed"
            return detail
        detail["retry_attempt"] = retry["attempt"]
        detail["retry_report_status"] = _complete(client, retry).status_code
    return detail


def _claim(client: httpx.Client, worker_id: str) -> dict[str, Any] | None:
    answer = client.post(
        f"/api/v1/workers/{worker_id}/claim",
        headers={"Authorization": f"Bearer {WORKER_TOKEN}"},
        json={"queues": [PROBE_QUEUE], "actions": [_ACTION], "max_attempts": 1, "wait_seconds": 10},
    )
    if answer.status_code != 200:
        return None
    attempts = answer.json().get("attempts") or []
    return dict(attempts[0]) if attempts else None


def _complete(client: httpx.Client, claimed: dict[str, Any]) -> httpx.Response:
    return client.post(
        f"/api/v1/attempts/{claimed['attempt_id']}/complete",
        headers={"Authorization": f"Bearer {WORKER_TOKEN}"},
        json={"lease_token": claimed["lease_token"], "output": {"probe": True}},
    )


def _code(answer: httpx.Response) -> str | None:
    try:
        body = answer.json()
    except ValueError:
        return None
    return body.get("code") if isinstance(body, dict) else None
