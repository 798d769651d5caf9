"""Process-level faults of ``workload serve`` (SPEC §4 "Interruption is not cancellation", §7).

Each test runs the real console script against a PostgreSQL server the test owns, and breaks
something from outside: the database, the lock connection, the process itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import time
from datetime import datetime
from typing import Any

import pytest

from tests.fault.conftest import (
    TERMINAL_RUN_STATUSES,
    PgCluster,
    Service,
    Services,
    canceled_anywhere,
    create_workflow,
    get_run,
    list_attempts,
    lock_backends,
    start_run,
    stored_run,
    wait_for_attempt_running,
    wait_for_run,
)
from tests.waiting import wait_until
from workload_domain.compiler import compile_definition
from workload_domain.ids import uuid7
from workload_domain.records import VersionRecord, WorkflowRecord
from workload_engine.clock import SystemClock
from workload_engine.runs import build_run
from workload_store_postgres.store import PostgresStore

# Long enough that a stop or a fail-stop on a loaded machine ends well before the task would.
SLOW_TASK_MS = 6000
SLOW: dict[str, Any] = {
    "id": "slow",
    "description": "one slow task that may be retried",
    "tasks": [
        {
            "key": "work",
            "action": "mock",
            "input": {"sleep_ms": SLOW_TASK_MS},
            "retry": {"max_attempts": 3, "initial_backoff_seconds": 0},
        }
    ],
}
QUICK: dict[str, Any] = {
    "id": "quick",
    "description": "one instant task",
    "tasks": [{"key": "only", "action": "mock", "input": {"output": {"ok": True}}}],
}
FAIL_STOP_EXIT_BOUND = 15.0  # seconds: "within a few lock-check intervals", generously
EXIT_CODE_FAIL_STOP = 5
EXIT_CODE_LOCK_HELD = 3
EXIT_CODE_SCHEMA = 4


def report(name: str, **values: Any) -> None:
    """A measurement, as one JSON line on stdout (``pytest -s`` shows it)."""
    print(json.dumps({"measurement": name, **values}), flush=True)


def start_slow_run(service: Service) -> str:
    """Create the SLOW workflow, start a run, and wait until its attempt 1 runs."""
    create_workflow(service, SLOW)
    run_id = start_run(service, "slow")
    wait_for_attempt_running(service, run_id, "work", 1)
    return run_id


def assert_nothing_canceled(pg: PgCluster, database_url: str) -> None:
    rows = canceled_anywhere(pg, database_url)
    assert rows == [], f"interruption was written as cancellation: {rows}"


def assert_left_interrupted(database_url: str, run_id: str) -> None:
    """What the stopped coordinator left: a non-terminal run whose attempt 1 did not finish.

    The next coordinator marks it ``interrupted`` (SPEC §4); the stopped one may have left it
    ``running`` or written ``interrupted`` itself, but never ``canceled`` nor a result.
    """
    stored = stored_run(database_url, run_id)
    assert stored.status not in TERMINAL_RUN_STATUSES, stored
    assert stored.tasks["work"] in {"running", "waiting_retry"}, stored
    assert len(stored.attempts) == 1, stored
    assert stored.attempts[0][:2] == ("work", 1), stored
    assert stored.attempts[0][2:] in {("running", None), ("interrupted", "interrupted")}, stored


def assert_recovers(services: Services, database_url: str, run_id: str) -> Service:
    """A new service takes over: ready, then the run succeeds on attempt 2."""
    service = services.start(database_url)
    ready_after = service.wait_ready()
    report("recovery_ready_seconds", seconds=round(ready_after, 3))
    run = wait_for_run(service, run_id, timeout=SLOW_TASK_MS / 1000 * 3 + 20)
    assert run["status"] == "succeeded", f"{run}\n{service.stderr_tail()}"
    attempts = list_attempts(service, run_id, "work")
    assert [(a["attempt"], a["status"]) for a in attempts] == [
        (1, "interrupted"),
        (2, "succeeded"),
    ], f"{attempts}\n{service.stderr_tail()}"
    assert attempts[0]["error"]["code"] == "interrupted"
    assert attempts[0]["error"]["retryable"] is True
    stored = stored_run(database_url, run_id)
    assert "run.recovered" in stored.event_types, stored
    assert "attempt.interrupted" in stored.event_types, stored
    return service


def assert_fail_stop(service: Service, fault_at: float) -> float:
    """The service exits 5 soon after the fault; return how long it took."""
    code = service.wait_exit(FAIL_STOP_EXIT_BOUND)
    elapsed = time.monotonic() - fault_at
    assert code == EXIT_CODE_FAIL_STOP, f"exit code {code}, not 5\n{service.stderr_tail()}"
    messages = [r.get("message", "") for r in service.log_records()]
    assert any("fail-stop" in m for m in messages), service.stderr_tail()
    return elapsed


# -- 1. the database goes away -------------------------------------------------------------------


def test_postgres_stopped_while_a_task_runs_fail_stops_and_recovers(
    pg: PgCluster, database_url: str, services: Services
) -> None:
    first = services.start(database_url)
    first.wait_ready()
    run_id = start_slow_run(first)

    fault_at = time.monotonic()
    pg.stop_immediately()
    elapsed = assert_fail_stop(first, fault_at)
    report("fail_stop_after_postgres_stop_seconds", seconds=round(elapsed, 3))

    pg.start()
    assert_nothing_canceled(pg, database_url)
    assert_left_interrupted(database_url, run_id)
    assert_recovers(services, database_url, run_id)
    assert_nothing_canceled(pg, database_url)


# -- 2. the lock connection is killed ------------------------------------------------------------


def test_lock_connection_terminated_fail_stops_and_recovers(
    pg: PgCluster, database_url: str, services: Services
) -> None:
    first = services.start(database_url)
    first.wait_ready()
    run_id = start_slow_run(first)
    pids = lock_backends(pg)
    assert len(pids) == 1, f"expected one lock connection, found {pids}"

    fault_at = time.monotonic()
    terminated = pg.query(pg.admin_url, "SELECT pg_terminate_backend(%s)", (pids[0],))
    assert terminated == [(True,)]
    elapsed = assert_fail_stop(first, fault_at)
    report("fail_stop_after_lock_terminated_seconds", seconds=round(elapsed, 3))
    assert "lost the coordinator lock" in first.stderr(), first.stderr_tail()
    assert elapsed < SLOW_TASK_MS / 1000, "the fail-stop waited for the running task to end"

    assert_nothing_canceled(pg, database_url)
    assert_left_interrupted(database_url, run_id)
    assert_recovers(services, database_url, run_id)
    assert_nothing_canceled(pg, database_url)


# -- 3. the process is killed --------------------------------------------------------------------


def test_sigkill_mid_run_is_recovered_by_the_next_service(
    pg: PgCluster, database_url: str, services: Services
) -> None:
    first = services.start(database_url)
    first.wait_ready()
    run_id = start_slow_run(first)

    first.signal(signal.SIGKILL)
    assert first.wait_exit(10) == -signal.SIGKILL
    # The kernel closes the dead process's sockets; PostgreSQL then ends its lock session.
    wait_until(
        lambda: not lock_backends(pg),
        timeout=10,
        message="the killed coordinator's lock session is still alive",
    )
    assert_nothing_canceled(pg, database_url)
    assert_left_interrupted(database_url, run_id)
    assert_recovers(services, database_url, run_id)


# -- 4. committed but never handed to execution --------------------------------------------------


async def _write_run_without_a_service(database_url: str) -> str:
    """Create the QUICK workflow and one run through the store, as if the process died between
    the run's COMMIT and ``engine.submit``."""
    clock = SystemClock()
    compiled = compile_definition(QUICK)
    now = clock.now()
    version = VersionRecord(
        compiled.workflow_id,
        1,
        compiled.definition_hash,
        len(compiled.tasks),
        now,
        compiled.document(),
    )
    workflow = WorkflowRecord(compiled.workflow_id, 1, compiled.definition.description, now, now)
    async with PostgresStore(database_url) as store:
        await store.create_workflow(workflow, version)
        run_id = uuid7(int(now.timestamp() * 1000), secrets.token_bytes(10))
        new_run = build_run(compiled, version=1, run_id=run_id, run_input={}, clock=clock)
        await store.create_run(new_run)
    return run_id


def test_run_committed_but_never_enqueued_runs_at_next_start(
    pg: PgCluster, database_url: str, services: Services
) -> None:
    run_id = asyncio.run(_write_run_without_a_service(database_url))
    assert stored_run(database_url, run_id).status == "pending"

    service = services.start(database_url)
    service.wait_ready()
    run = wait_for_run(service, run_id, timeout=20)
    assert run["status"] == "succeeded", f"{run}\n{service.stderr_tail()}"
    attempts = list_attempts(service, run_id, "only")
    assert [(a["attempt"], a["status"]) for a in attempts] == [(1, "succeeded")]
    assert attempts[0]["output"] == {"ok": True}
    ready = [r for r in service.log_records() if r.get("message") == "ready"]
    assert ready, service.stderr_tail()
    assert ready[0].get("recovered_runs") == 1, ready


# -- 5. a second coordinator ---------------------------------------------------------------------


def logged_at(record: dict[str, Any]) -> float:
    """When a JSON log line was written (its ``time``), in seconds."""
    return datetime.fromisoformat(str(record["time"]).replace("Z", "+00:00")).timestamp()


def test_second_service_on_the_same_database_exits_3_and_the_first_keeps_serving(
    pg: PgCluster, database_url: str, services: Services
) -> None:
    first = services.start(database_url)
    first.wait_ready()
    create_workflow(first, QUICK)

    second = services.start(database_url)
    code = second.wait_exit(30)
    took = time.monotonic() - second.started_at
    report("second_coordinator_exit_seconds", seconds=round(took, 3))
    assert code == EXIT_CODE_LOCK_HELD, f"exit code {code}, not 3\n{second.stderr_tail()}"
    assert "another coordinator" in second.stderr(), second.stderr_tail()
    # It gives up at once (SPEC §7) rather than waits for the lock: timed by its own log, from
    # its first line to its refusal, so that a slow interpreter start-up is not counted.
    records = second.log_records()
    refusal = next(r for r in records if "another coordinator" in str(r.get("message")))
    gave_up = logged_at(refusal) - logged_at(records[0])
    assert gave_up < 5, f"it gave up {gave_up:.1f} s after its first log line"
    assert "holds the lock" in second.stderr(), second.stderr_tail()

    assert first.process.poll() is None, first.stderr_tail()
    assert first.ready(), first.stderr_tail()
    run_id = start_run(first, "quick")
    assert wait_for_run(first, run_id)["status"] == "succeeded"
    assert len(lock_backends(pg)) == 1


# -- 6. an unmigrated database -------------------------------------------------------------------


def test_unmigrated_database_exits_4_until_migrated(pg: PgCluster, services: Services) -> None:
    url = pg.create_database()
    refused = services.start(url)
    code = refused.wait_exit(30)
    assert code == EXIT_CODE_SCHEMA, f"exit code {code}, not 4\n{refused.stderr_tail()}"
    assert "workload migrate up" in refused.stderr(), refused.stderr_tail()
    # Nothing was created by the service: the schema stays the operator's to apply.
    tables = pg.query(
        url, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
    )
    assert tables == [(0,)], tables

    result = services.migrate(url)
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    service = services.start(url)
    service.wait_ready()
    create_workflow(service, QUICK)
    assert wait_for_run(service, start_run(service, "quick"))["status"] == "succeeded"


# -- 7. a graceful stop --------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_with_exit_0_and_the_run_is_recovered(
    pg: PgCluster, database_url: str, services: Services, signum: signal.Signals
) -> None:
    first = services.start(database_url)
    first.wait_ready()
    run_id = start_slow_run(first)

    stop_at = time.monotonic()
    first.signal(signum)
    code = first.wait_exit(15)
    took = time.monotonic() - stop_at
    report(f"{signum.name.lower()}_exit_seconds", seconds=round(took, 3))
    assert code == 0, f"exit code {code}, not 0\n{first.stderr_tail()}"
    assert took < SLOW_TASK_MS / 1000, f"{signum.name} waited for the running task to finish"
    messages = [r.get("message", "") for r in first.log_records()]
    assert f"stopping on {signum.name}" in messages, first.stderr_tail()
    assert not any("fail-stop" in m for m in messages), first.stderr_tail()
    wait_until(
        lambda: not lock_backends(pg),
        timeout=5,
        message="the lock session outlived the stopped service",
    )

    assert_nothing_canceled(pg, database_url)
    assert_left_interrupted(database_url, run_id)
    assert_recovers(services, database_url, run_id)
    assert_nothing_canceled(pg, database_url)


# -- 8. start-up with a large backlog ------------------------------------------------------------

# How many runs; a measurement, printed as JSON (`pytest -s`): time-to-ready and time until all
# finished are reported, not asserted. Lower it with WORKLOAD_FAULT_BACKLOG for quick runs.
BACKLOG = int(os.environ.get("WORKLOAD_FAULT_BACKLOG", "5000"))
BACKLOG_DEADLINE = 300.0


async def _write_backlog(database_url: str, count: int) -> None:
    """``count`` pending runs of QUICK, written through the store (never handed to a service)."""
    clock = SystemClock()
    compiled = compile_definition(QUICK)
    now = clock.now()
    version = VersionRecord(
        compiled.workflow_id, 1, compiled.definition_hash, 1, now, compiled.document()
    )
    workflow = WorkflowRecord(compiled.workflow_id, 1, "", now, now)
    async with PostgresStore(database_url, max_size=16) as store:
        await store.create_workflow(workflow, version)
        limit = asyncio.Semaphore(16)

        async def one() -> None:
            async with limit:
                run_id = uuid7(int(clock.now().timestamp() * 1000), secrets.token_bytes(10))
                new_run = build_run(compiled, version=1, run_id=run_id, run_input={}, clock=clock)
                await store.create_run(new_run)

        await asyncio.gather(*(one() for _ in range(count)))


@pytest.mark.timeout(BACKLOG_DEADLINE + 120)
def test_start_up_with_a_backlog_of_pending_runs(
    pg: PgCluster, database_url: str, services: Services
) -> None:
    written_at = time.monotonic()
    asyncio.run(_write_backlog(database_url, BACKLOG))
    write_seconds = time.monotonic() - written_at
    count_sql = "SELECT status, count(*) FROM workflow_runs GROUP BY status"
    assert pg.query(database_url, count_sql) == [("pending", BACKLOG)]

    service = services.start(database_url)
    ready_seconds = service.wait_ready(timeout=120)
    finished: dict[str, int] = {}

    def all_finished() -> bool:
        nonlocal finished
        finished = dict(pg.query(database_url, count_sql))
        return sum(finished.get(s, 0) for s in TERMINAL_RUN_STATUSES) == BACKLOG

    wait_until(
        all_finished,
        timeout=BACKLOG_DEADLINE,
        interval=0.25,
        message=lambda: f"runs by status: {finished}\n{service.stderr_tail()}",
    )
    done_seconds = time.monotonic() - service.started_at
    report(
        "backlog_start_up",
        runs=BACKLOG,
        write_seconds=round(write_seconds, 3),
        ready_seconds=round(ready_seconds, 3),
        all_finished_seconds=round(done_seconds, 3),
        runs_per_second=round(BACKLOG / done_seconds, 1),
    )
    assert finished == {"succeeded": BACKLOG}, f"{finished}\n{service.stderr_tail()}"
    assert service.process.poll() is None, service.stderr_tail()
    ((first_run,),) = pg.query(
        database_url, "SELECT run_id::text FROM workflow_runs ORDER BY run_id LIMIT 1"
    )
    counts = get_run(service, first_run)["task_counts"]
    assert {k: v for k, v in counts.items() if v} == {"succeeded": 1}, counts
    ready = [r for r in service.log_records() if r.get("message") == "ready"]
    assert ready, service.stderr_tail()
    assert ready[0].get("recovered_runs") == BACKLOG, ready


# -- 9. a database that is gone or hung (beyond the brief's list) --------------------------


def test_database_that_stops_answering_fail_stops_and_recovers(
    pg: PgCluster, database_url: str, services: Services
) -> None:
    """SIGSTOP of every PostgreSQL process: no error, no answer (a dead network)."""
    first = services.start(database_url)
    first.wait_ready()
    run_id = start_slow_run(first)

    fault_at = time.monotonic()
    pg.freeze()
    try:
        elapsed = assert_fail_stop(first, fault_at)
    finally:
        pg.thaw()
    report("fail_stop_after_postgres_froze_seconds", seconds=round(elapsed, 3))
    # The frozen backends notice the dead client once they run again.
    wait_until(lambda: not lock_backends(pg), timeout=10, message="the old lock session lives on")
    assert_nothing_canceled(pg, database_url)
    assert_left_interrupted(database_url, run_id)
    assert_recovers(services, database_url, run_id)


def test_database_unreachable_at_start_up_exits_5(
    pg: PgCluster, database_url: str, services: Services
) -> None:
    pg.stop()
    service = services.start(database_url)
    code = service.wait_exit(FAIL_STOP_EXIT_BOUND)
    assert code == EXIT_CODE_FAIL_STOP, f"exit code {code}, not 5\n{service.stderr_tail()}"
    assert "Traceback" not in service.stderr(), service.stderr_tail()

    pg.start()
    again = services.start(database_url)
    again.wait_ready()


def test_database_not_answering_at_start_up_exits_instead_of_hanging(
    pg: PgCluster, database_url: str, services: Services
) -> None:
    """A database that accepts no work at start-up: the service must give up, not hang.

    SPEC §7 bounds every wait on the database once running (the lock check, fail-stop with
    exit 5); a start-up that waits forever, silently, never reaches either outcome.
    """
    pg.freeze()
    try:
        service = services.start(database_url)
        code = service.wait_exit(30)
    finally:
        pg.thaw()
    assert code == EXIT_CODE_FAIL_STOP, f"exit code {code}, not 5\n{service.stderr_tail()}"


# -- a port that is taken: a configuration error ---------------------------------------------------


def test_a_port_in_use_exits_2_and_releases_the_lock(
    pg: PgCluster, database_url: str, services: Services
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = services.start(database_url, port=port)
        code = refused.wait_exit(30)
    assert code == 2, f"exit code {code}, not 2\n{refused.stderr_tail()}"
    assert "cannot listen" in refused.stderr(), refused.stderr_tail()
    # The lock went with it: another service starts at once.
    services.start(database_url).wait_ready()
