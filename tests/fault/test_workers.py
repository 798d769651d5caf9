"""Remote execution under faults (SPEC §10), with real processes: `workload serve` and workers.

Each worker is ``python -m tests.fault.worker_app`` (the worker SDK over real HTTP); the tests
kill workers and the service, and replay a dead worker's report with its own lease token.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fault.conftest import (
    FAST_REAPER,
    VIEWER_TOKEN,
    WORKER_TOKEN,
    PgCluster,
    Service,
    Services,
    Workers,
    create_workflow,
    get_run,
    list_attempts,
    post,
    start_run,
    wait_for_run,
    workload_executable,
)
from tests.waiting import wait_until


def hold_workflow(service: Service, workflow_id: str, **task: Any) -> None:
    create_workflow(service, {"id": workflow_id, "tasks": [{"key": "r", "action": "hold", **task}]})


def report(service: Service, item: dict[str, Any], kind: str, body: Any) -> httpx.Response:
    client = service.client(WORKER_TOKEN)
    payload = {"lease_token": item["lease_token"], **body}
    return client.post(f"/api/v1/attempts/{item['attempt_id']}/{kind}", json=payload)


def test_a_killed_workers_attempt_expires_and_another_worker_completes_it(
    services: Services, database_url: str, workers: Workers
) -> None:
    service = services.start(database_url, env=FAST_REAPER)
    service.wait_ready()
    retry = {"max_attempts": 2, "initial_backoff_seconds": 0}
    hold_workflow(service, "lapse", heartbeat_timeout_seconds=1, retry=retry)
    run_id = start_run(service, "lapse")
    doomed = workers.start(service, "doomed")
    wait_until(doomed.started, timeout=30, message=lambda: f"no handler started\n{doomed.log()}")
    (first,) = doomed.claimed()
    doomed.process.send_signal(signal.SIGKILL)
    doomed.process.wait(timeout=10)

    survivor = workers.start(service, "survivor")
    final = wait_for_run(service, run_id, timeout=60)
    history = service.client(VIEWER_TOKEN).get(f"/api/v1/runs/{run_id}/events").json()["items"]
    assert final["status"] == "succeeded", f"{history}\n{survivor.log()}"
    attempts = list_attempts(service, run_id, "r")
    assert [a["status"] for a in attempts] == ["interrupted", "succeeded"]
    assert attempts[0]["error"]["code"] == "lease_expired"
    assert (attempts[0]["worker_id"], attempts[1]["worker_id"]) == ("doomed", "survivor")

    # The dead worker's report arrives late, with its own lease token: refused, nothing written.
    late = report(service, first, "complete", {"output": {"by": "doomed", "attempt": 1}})
    assert late.status_code == 409, late.text
    assert (late.json()["code"], late.json()["reason"]) == ("lease_lost", "expired")
    task = service.client(VIEWER_TOKEN).get(f"/api/v1/runs/{run_id}/tasks/r").json()
    assert task["output"] == {"by": "survivor", "attempt": 2}
    assert survivor.process.poll() is None


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_restart_of_the_service_keeps_the_workers_lease(
    services: Services, database_url: str, workers: Workers, pg: PgCluster, how: signal.Signals
) -> None:
    service = services.start(database_url, env=FAST_REAPER)
    service.wait_ready()
    # A lease that outlasts a slow machine's restart (a heartbeat every 10 s).
    hold_workflow(service, "kept", heartbeat_timeout_seconds=30)
    run_id = start_run(service, "kept")
    worker = workers.start(service, "steady")
    wait_until(worker.started, timeout=30, message=lambda: f"no handler started\n{worker.log()}")

    service.process.send_signal(how)
    code = service.process.wait(timeout=30)
    assert code == (0 if how is signal.SIGTERM else -signal.SIGKILL), service.stderr_tail()
    again = services.start(database_url, port=service.port, env=FAST_REAPER)
    again.wait_ready()
    # The remote attempt kept its lease across the restart: still running, not interrupted.
    (attempt,) = list_attempts(again, run_id, "r")
    assert (attempt["status"], attempt["worker_id"]) == ("running", "steady")
    # And the worker's heartbeats renew it through the new service.
    lease_sql = "SELECT lease_expires_at FROM attempts WHERE run_id = %s"
    ((restarted_with,),) = pg.query(database_url, lease_sql, (run_id,))
    wait_until(
        lambda: pg.query(database_url, lease_sql, (run_id,))[0][0] > restarted_with,
        timeout=30,
        message=lambda: f"no heartbeat renewed the lease\n{worker.log()}",
    )

    (worker.directory / "release").touch()
    final = wait_for_run(again, run_id, timeout=60)
    assert final["status"] == "succeeded", f"{final}\n{worker.log()}"
    (attempt,) = list_attempts(again, run_id, "r")
    assert attempt["status"] == "succeeded"
    assert attempt["output"] == {"by": "steady", "attempt": 1}
    events = again.client(VIEWER_TOKEN).get(f"/api/v1/runs/{run_id}/events").json()["items"]
    assert "attempt.interrupted" not in {e["type"] for e in events}


def test_cancel_reaches_the_running_handler(
    services: Services, database_url: str, workers: Workers
) -> None:
    service = services.start(database_url, env=FAST_REAPER)
    service.wait_ready()
    hold_workflow(service, "stopped", heartbeat_timeout_seconds=1.5)
    run_id = start_run(service, "stopped")
    worker = workers.start(service, "busy")
    wait_until(worker.started, timeout=30, message=lambda: f"no handler started\n{worker.log()}")
    (attempt_id,) = worker.started()

    canceled = post(service.operator, f"/api/v1/runs/{run_id}/cancel")
    assert canceled.status_code == 202, canceled.text
    assert canceled.json()["status"] == "canceled"  # at once: the worker is not waited for
    assert get_run(service, run_id)["status"] == "canceled"
    # The worker's next heartbeat hears it (409 canceled), and its handler is cancelled.
    wait_until(
        lambda: worker.marked("cancelled", attempt_id),
        timeout=30,
        message=lambda: f"the handler was not cancelled\n{worker.log()}",
    )
    assert not worker.marked("finished", attempt_id)
    (attempt,) = list_attempts(service, run_id, "r")
    assert attempt["status"] == "canceled"


def test_four_workers_claim_every_attempt_exactly_once(
    services: Services, database_url: str, workers: Workers
) -> None:
    """4 worker processes × 200 attempts, over two API processes sharing one database.

    A leader and a standby (SPEC §14): two workers claim through each, and the runs are created
    through both.
    """
    replicas = {"WORKLOAD_STANDBY": "true", **FAST_REAPER}
    service = services.start(database_url, env=replicas)
    service.wait_ready()
    standby = services.start(database_url, env=replicas)
    standby.wait_ready()
    create_workflow(service, {"id": "many", "tasks": [{"key": "r", "action": "echo"}]})
    pool = [workers.start(standby if i % 2 else service, f"w{i}", concurrency=8) for i in range(4)]
    runs = [start_run(standby if i % 2 else service, "many") for i in range(800)]
    for run_id in runs:
        assert wait_for_run(service, run_id, timeout=120)["status"] == "succeeded"

    claimed = [item["attempt_id"] for worker in pool for item in worker.claimed()]
    assert len(claimed) == len(set(claimed)) == 800, "an attempt was handed out twice"
    done = {name.name for worker in pool for name in worker.directory.glob("finished-*")}
    assert len(done) == 800
    assert all(worker.claimed() for worker in pool), "every worker took a share"
    started = service.client(VIEWER_TOKEN).get("/api/v1/queues").json()["items"]
    assert started == [
        {"queue": "default", "queued": 0, "running": 0, "oldest_queued_age_seconds": None}
    ]


STUCK_WORKER = """
import time
from pathlib import Path

from workload_worker import Worker

worker = Worker(worker_id="stuck", grace_seconds=1, wait_seconds=1)


@worker.action("stuck")
def stuck(ctx, input):
    Path("started").write_text(ctx.attempt_id)
    time.sleep(600)  # a sync handler that never looks at ctx.cancelled
    return {}
"""


def test_sigterm_stops_the_worker_even_if_a_sync_handler_never_returns(
    services: Services, database_url: str, tmp_path: Path
) -> None:
    # SPEC §10: on SIGTERM the worker stops claiming, gives its handlers their grace period,
    # reports the rest worker_shutdown, and exits — a thread it cannot stop must not keep it.
    service = services.start(database_url, env=FAST_REAPER)
    service.wait_ready()
    create_workflow(service, {"id": "stuck", "tasks": [{"key": "s", "action": "stuck"}]})
    run_id = start_run(service, "stuck")
    (tmp_path / "stuck_worker.py").write_text(STUCK_WORKER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
    env["PYTHONPATH"] = str(tmp_path)
    command = [str(workload_executable()), "worker", "stuck_worker:worker"]
    command += ["--url", service.base_url, "--token", WORKER_TOKEN]
    with (tmp_path / "worker.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=log)
    try:
        wait_until((tmp_path / "started").exists, timeout=30, message="not started")
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    output = (tmp_path / "worker.log").read_text(errors="replace")
    assert code == 0, output
    (attempt,) = list_attempts(service, run_id, "s")
    assert attempt["error"]["code"] == "worker_shutdown", attempt
    assert "Traceback" not in output
