"""A replica whose listener reconnected looks at its runs again (SPEC §16, real processes).

A worker's report settled through one replica is announced to the run's owner (``NOTIFY`` on
the run's shard): the owner's runner, idle while a remote attempt runs, starts what became ready.
An announcement made while the owner's listener reconnects is lost; the owner's runner must
still continue the run — it reads the run again once its listener listens again.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.fault.conftest import (
    WORKER_TOKEN,
    PgCluster,
    Services,
    create_workflow,
    post,
    start_run,
    wait_for_run,
)
from tests.fault.test_replicas import owners, start_replicas, wait_balanced
from tests.waiting import wait_until
from workload_domain.shards import DEFAULT_SHARDS, shard_of
from workload_store_postgres.notifications import APPLICATION_NAME as LISTENER

WORKFLOW_ID = "remote-then-local"
REMOTE_THEN_LOCAL = {
    "id": WORKFLOW_ID,
    "tasks": [
        {"key": "a", "action": "outside"},
        {"key": "b", "action": "mock", "depends_on": ["a"]},
    ],
}


def _claim_of(client: httpx.Client, run_id: str) -> dict[str, Any]:
    """Claim queued attempts (the other runs' too) until the one of ``run_id`` comes."""

    def claimed() -> dict[str, Any] | None:
        response = client.post(
            "/api/v1/workers/notice-worker/claim",
            json={
                "queues": ["default"],
                "actions": ["outside"],
                "max_attempts": 100,
                "wait_seconds": 5,
            },
        )
        assert response.status_code == 200, response.text
        items: list[dict[str, Any]] = response.json()["attempts"]
        return next((i for i in items if i["run_id"] == run_id), None)

    return wait_until(claimed, timeout=30, message="the run's attempt was never claimed")


def _listeners(pg: PgCluster) -> list[int]:
    rows = pg.query(
        pg.admin_url, "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (LISTENER,)
    )
    return [int(pid) for (pid,) in rows]


def test_a_report_announced_while_the_owner_reconnects_still_continues_the_run(
    services: Services, database_url: str, pg: PgCluster
) -> None:
    through, owner = start_replicas(services, database_url, ["through", "owner"])
    wait_balanced([through, owner])
    create_workflow(through, REMOTE_THEN_LOCAL)
    owned = {shard for shard, name in owners(through).items() if name == "owner"}
    # A run created through one replica, in a shard the other owns.
    run_id = start_run(through, WORKFLOW_ID)
    while shard_of(run_id, DEFAULT_SHARDS) not in owned:
        run_id = start_run(through, WORKFLOW_ID)
    worker = through.client(WORKER_TOKEN)
    item = _claim_of(worker, run_id)

    # Both listeners cut (one of them is the owner's), and gone before the report: the owner's
    # runner, idle while "a" runs remotely, hears nothing of it.
    before = _listeners(pg)
    assert len(before) == 2
    pg.query(
        pg.admin_url,
        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = %s",
        (LISTENER,),
    )
    assert not set(before) & set(_listeners(pg))
    done = post(
        worker,
        f"/api/v1/attempts/{item['attempt_id']}/complete",
        {"lease_token": item["lease_token"], "output": {"n": 1}},
    )
    assert done.status_code == 200, done.text

    # Its listener listens again, and its runner reads the run: "b" runs, the run ends.
    wait_until(lambda: len(_listeners(pg)) == 2, timeout=20, message="the listeners are not back")
    assert wait_for_run(owner, run_id, timeout=20)["status"] == "succeeded"
    records = owner.log_records()
    assert any(r.get("message") == "the notification listener listens again" for r in records)
