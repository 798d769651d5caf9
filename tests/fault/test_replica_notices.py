"""Work reaches its owner (SPEC §16, real processes): after a reconnection, and from a stop.

A worker's report settled through one replica is announced to the run's owner (``NOTIFY`` on
the run's shard): the owner's runner, idle while a remote attempt runs, starts what became ready.
An announcement made while the owner's listener reconnects is lost; the owner's runner must
still continue the run — it reads the run again once its listener listens again (ADR 0049).

A replica stopping (SIGTERM) hands its shards over one by one, the last once its longest
attempt has ended: the others take each shard as it is given up, not when it exits.
"""

from __future__ import annotations

import signal
from typing import Any

import httpx

from tests.fault.conftest import (
    WORKER_TOKEN,
    PgCluster,
    Services,
    create_workflow,
    post,
    start_run,
    wait_for_attempt_running,
    wait_for_run,
)
from tests.fault.test_replicas import owners, replica_env, start_replicas, wait_balanced
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


def test_a_stopping_replicas_shards_are_taken_as_it_gives_them_not_when_it_exits(
    services: Services, database_url: str
) -> None:
    # SPEC §16: SIGTERM hands the shards over; a run is started by its shard's owner within
    # 5 s. A stopping replica waits for its longest attempt (up to the hand-off's bound) before
    # it exits: the shards it gave up meanwhile must not wait for that.
    staying = services.start(database_url, env=replica_env("staying"))
    stopping = services.start(
        database_url, env=replica_env("stopping", WORKLOAD_SHARD_HANDOFF_SECONDS="20")
    )
    staying.wait_ready()
    stopping.wait_ready()
    wait_balanced([staying, stopping])
    create_workflow(
        staying,
        {"id": "long", "tasks": [{"key": "a", "action": "mock", "input": {"sleep_ms": 60000}}]},
    )
    create_workflow(staying, {"id": "quick", "tasks": [{"key": "a", "action": "mock"}]})
    theirs = {shard for shard, name in owners(staying).items() if name == "stopping"}
    long_run = start_run(staying, "long")
    while shard_of(long_run, DEFAULT_SHARDS) not in theirs:
        long_run = start_run(staying, "long")
    wait_for_attempt_running(staying, long_run, "a")

    stopping.signal(signal.SIGTERM)  # its hand-off of the long run's shard takes 20 s
    busy = shard_of(long_run, DEFAULT_SHARDS)
    probe = start_run(staying, "quick")
    while shard_of(probe, DEFAULT_SHARDS) not in theirs - {busy}:
        probe = start_run(staying, "quick")
    assert wait_for_run(staying, probe, timeout=10)["status"] == "succeeded"
    assert stopping.process.poll() is None  # still handing its busy shard over
    assert stopping.wait_exit(60) == 0
