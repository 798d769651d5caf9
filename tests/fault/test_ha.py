"""High availability through real processes (SPEC §14): two ``workload serve --standby`` on one
database, a leader killed or frozen, fenced epochs, workers claiming through both replicas, and a
plain leader (no ``--standby``) hearing a standby replica's writes.

Each service is a real process; the database is a real PostgreSQL. Times are measured and
printed (a benchmark's job), never asserted against a wall clock.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import httpx

from tests.fault.conftest import (
    DATABASE,
    FAST_REAPER,
    LOCK_CHECK_INTERVAL,
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
)
from tests.tls import shared_tls
from tests.waiting import wait_until

STANDBY = {"WORKLOAD_STANDBY": "true", **FAST_REAPER}


def role(service: Service) -> dict[str, Any] | None:
    try:
        body: dict[str, Any] = httpx.get(
            f"{service.base_url}/readyz", timeout=2, verify=shared_tls()
        ).json()
    except httpx.HTTPError:
        return None
    return body


def pair(services: Services, database_url: str) -> tuple[Service, Service]:
    """A leader and a standby, started one after the other (leader first)."""
    first = services.start(database_url, env=STANDBY)
    first.wait_ready()
    second = services.start(database_url, env=STANDBY)
    second.wait_ready()
    assert (role(first) or {}).get("role") == "leader"
    assert (role(second) or {}).get("role") == "standby"
    return first, second


def events_by_epoch(pg: PgCluster, database_url: str) -> list[tuple[str, int, int | None]]:
    rows = pg.query(
        database_url,
        "SELECT run_id::text, sequence, epoch FROM state_events ORDER BY run_id, sequence",
    )
    return [(str(r[0]), int(r[1]), r[2]) for r in rows]


def test_runs_created_through_both_replicas_run_once_and_survive_the_leaders_death(
    services: Services, database_url: str, workers: Workers
) -> None:
    leader, standby = pair(services, database_url)
    assert (role(leader) or {}).get("epoch") is not None
    retry = {"max_attempts": 3, "initial_backoff_seconds": 0}
    create_workflow(
        leader,
        {
            "id": "ha-local",
            "tasks": [
                {"key": "a", "action": "mock", "input": {"sleep_ms": 3000}, "retry": retry},
                {"key": "b", "action": "mock", "depends_on": ["a"]},
            ],
        },
    )
    create_workflow(standby, {"id": "ha-remote", "tasks": [{"key": "r", "action": "hold"}]})
    held = start_run(standby, "ha-remote")
    worker = workers.start(standby, "holder")  # claims through the standby
    wait_until(worker.started, timeout=30, message=lambda: f"no handler started\n{worker.log()}")
    (claim,) = worker.claimed()
    # Alternately through the leader and the standby, once the worker holds its attempt: a
    # worker slow to start must not leave the local attempts ended before the kill.
    runs = [start_run(leader if i % 2 else standby, "ha-local") for i in range(6)]

    def local_statuses() -> list[str]:
        return [a["status"] for r in runs for a in list_attempts(leader, r, "a")]

    wait_until(
        lambda: "running" in local_statuses(),
        message=lambda: f"no local attempt is running: {local_statuses()}",
    )

    killed_at = time.monotonic()
    leader.signal(signal.SIGKILL)
    leader.wait_exit(10)
    wait_until(lambda: (role(standby) or {}).get("role") == "leader", timeout=30)
    took_over = time.monotonic() - killed_at
    print(
        f"\ntakeover after SIGKILL: {took_over:.2f} s (lock check interval {LOCK_CHECK_INTERVAL} s)"
    )
    epochs = (role(standby) or {}).get("epoch")
    assert isinstance(epochs, int)

    (worker.directory / "release").write_text("go")
    for run_id in [*runs, held]:
        assert wait_for_run(standby, run_id, timeout=60)["status"] == "succeeded"
    for run_id in runs:  # each task ran to success once; interrupted attempts were retried
        statuses = [a["status"] for a in list_attempts(standby, run_id, "a")]
        assert statuses[-1] == "succeeded"
        assert statuses.count("succeeded") == 1
        assert set(statuses[:-1]) <= {"interrupted"}
        assert [a["status"] for a in list_attempts(standby, run_id, "b")] == ["succeeded"]
    # The remote attempt kept its lease across the takeover: the same attempt completed.
    (remote,) = list_attempts(standby, held, "r")
    assert (remote["attempt_id"], remote["status"]) == (claim["attempt_id"], "succeeded")
    runs_page = standby.client(VIEWER_TOKEN).get("/api/v1/runs", params={"limit": 200}).json()
    assert len(runs_page["items"]) == 7  # no run lost, none made twice


def test_a_frozen_leader_is_fenced_and_writes_nothing_after_the_takeover(
    services: Services, database_url: str, pg: PgCluster
) -> None:
    leader, standby = pair(services, database_url)
    old_epoch = (role(leader) or {})["epoch"]
    create_workflow(
        leader,
        {
            "id": "fenced",
            "tasks": [
                {
                    "key": f"t{i}",
                    "action": "mock",
                    # Still running at the freeze on a slow machine; the takeover interrupts
                    # what the frozen leader ran: it is retried.
                    "input": {"sleep_ms": 3000},
                    "retry": {"max_attempts": 3, "initial_backoff_seconds": 0},
                }
                for i in range(3)
            ],
        },
    )
    runs = [start_run(leader, "fenced") for _ in range(4)]
    wait_until(
        lambda: any(get_run(leader, r)["status"] == "running" for r in runs),
        message="nothing runs",
    )
    leader.signal(signal.SIGSTOP)  # frozen: its lock session lives on, its lease does not
    try:
        wait_until(lambda: (role(standby) or {}).get("role") == "leader", timeout=30)
        new_epoch = (role(standby) or {})["epoch"]
        assert new_epoch > old_epoch
        for run_id in runs:
            assert wait_for_run(standby, run_id, timeout=60)["status"] == "succeeded"
    finally:
        leader.signal(signal.SIGCONT)
    assert leader.wait_exit(30) == 5  # it finds itself fenced (or its lock gone): fail-stop
    assert "fail-stop" in leader.stderr()

    # No event of the old epoch follows an event of the new one, in any run.
    events = events_by_epoch(pg, database_url)
    first_new: dict[str, int] = {}
    for run_id, sequence, epoch in events:
        if epoch == new_epoch:
            first_new.setdefault(run_id, sequence)
    stale = [
        (run_id, sequence)
        for run_id, sequence, epoch in events
        if epoch == old_epoch and sequence > first_new.get(run_id, 1 << 62)
    ]
    assert stale == []
    assert first_new, "the new leader wrote nothing"


def test_workers_claiming_through_both_replicas_never_share_an_attempt(
    services: Services, database_url: str, workers: Workers
) -> None:
    leader, standby = pair(services, database_url)
    create_workflow(leader, {"id": "both", "tasks": [{"key": "e", "action": "echo"}]})
    runs = [start_run(leader if i % 2 else standby, "both") for i in range(40)]
    one = workers.start(leader, "via-leader", concurrency=4)
    two = workers.start(standby, "via-standby", concurrency=4)
    for run_id in runs:
        assert wait_for_run(leader, run_id, timeout=60)["status"] == "succeeded"
    handed = [c["attempt_id"] for w in (one, two) for c in w.claimed()]
    assert len(handed) == len(set(handed)) == len(runs)
    for run_id in runs:
        assert len(list_attempts(leader, run_id, "e")) == 1


def test_without_standby_a_second_coordinator_still_exits_3(
    services: Services, database_url: str
) -> None:
    first = services.start(database_url)
    first.wait_ready()
    second = services.start(database_url)
    assert second.wait_exit(30) == 3
    assert (role(first) or {}).get("role") == "leader"
    assert DATABASE in database_url


def test_a_leader_without_standby_hears_what_a_standby_replica_writes(
    services: Services, database_url: str
) -> None:
    # SPEC §14: the first process is a plain `workload serve` (§7), the replica `--standby`.
    leader = services.start(database_url, env=FAST_REAPER)
    leader.wait_ready()
    standby = services.start(database_url, env=STANDBY)
    standby.wait_ready()
    assert (role(leader) or {}).get("role") == "leader"
    assert (role(standby) or {}).get("role") == "standby"
    create_workflow(
        standby,
        {"id": "long", "tasks": [{"key": "a", "action": "mock", "input": {"sleep_ms": 600000}}]},
    )
    create_workflow(
        standby,
        {
            "id": "handoff",
            "tasks": [
                {"key": "r", "action": "hold"},
                {"key": "s", "action": "mock", "depends_on": ["r"]},
            ],
        },
    )

    # A cancel through the standby reaches the leader's runner of that run.
    long_run = start_run(standby, "long")
    wait_until(
        lambda: [a["status"] for a in list_attempts(leader, long_run, "a")] == ["running"],
        timeout=30,
        message="the leader never started the run created through the standby",
    )
    canceled = post(standby.operator, f"/api/v1/runs/{long_run}/cancel")
    assert canceled.status_code == 202, canceled.text
    assert wait_for_run(standby, long_run)["status"] == "canceled"
    assert [a["status"] for a in list_attempts(leader, long_run, "a")] == ["canceled"]

    # A worker's report through the standby lets the leader run what it made ready.
    handoff = start_run(leader, "handoff")
    worker = standby.client(WORKER_TOKEN)
    body = {"queues": ["default"], "actions": ["hold"], "wait_seconds": 10}
    claimed = worker.post("/api/v1/workers/w1/claim", json=body, timeout=30)
    assert claimed.status_code == 200, claimed.text
    (item,) = claimed.json()["attempts"]
    report = {"lease_token": item["lease_token"], "output": {"done": True}}
    completed = worker.post(f"/api/v1/attempts/{item['attempt_id']}/complete", json=report)
    assert completed.status_code == 200, completed.text
    assert wait_for_run(standby, handoff)["status"] == "succeeded"
    assert [a["status"] for a in list_attempts(leader, handoff, "s")] == ["succeeded"]
    # All along, the leader led: nothing waited for a takeover.
    assert (role(leader) or {}).get("role") == "leader"
    assert (role(standby) or {}).get("role") == "standby"
