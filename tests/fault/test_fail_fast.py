"""Fail fast while PostgreSQL is known unreachable; fail-stop without error noise (ADR 0021).

Found by the chaos soak: during a PostgreSQL outage every request waited out the pool's timeout
for a connection before its 503 — even on a standby whose ``/readyz`` already said
``unavailable`` — so clients timed out instead of failing fast; and every fail-stop logged
error-level lines for what is its expected behaviour (uvicorn's end of the shutdown grace, the
fail-stop itself, each 503).

- ``refuses_at_once``: a standby cut off from PostgreSQL (a TCP proxy the test cuts) answers a
  request that needs the database 503 ``unavailable`` with ``Retry-After`` — far sooner than the
  pool timeout, set to 10 s here — while ``/livez``, ``/readyz``, ``/metrics`` and the console's
  static files keep answering; once the proxy forwards again, requests succeed again;
- ``quiet_fail_stop``: exit 5 (PostgreSQL stopped under load; frozen with a request inside it)
  and exit 3 (a second coordinator; a start-up without PostgreSQL) log no error-level line.

Real processes on a real PostgreSQL, each test its own cluster (``tests/fault/conftest.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.fault.conftest import (
    DATABASE,
    VIEWER_TOKEN,
    PgCluster,
    Service,
    Services,
    create_workflow,
    post,
    start_run,
    wait_for_run,
)
from tests.fault.proxy import unix_socket_of
from tests.fault.test_faults import (
    EXIT_CODE_FAIL_STOP,
    EXIT_CODE_LOCK_HELD,
    QUICK,
    report,
    start_slow_run,
)
from tests.fault.test_reliability import SMALL_POOL, Load, a_request_held_in_the_database
from tests.fault.test_standby_outage import STANDBY, CutProxy, readyz, wait_readyz
from tests.waiting import wait_until

POOL_TIMEOUT = 10.0
"""The pool timeout of these services: what a request waited for before the fix."""
FAIL_FAST = 2.0
"""A refusal arrives within this (far below the pool timeout: a behavioural check, not a
performance target; a loaded 2-core machine answers in milliseconds)."""
RECOVERY_DEADLINE = 15.0
"""The store is back within half a second plus two connections of PostgreSQL answering
(ADR 0021); a loaded machine gets a wide margin."""
ERROR_LEVELS = frozenset({"error", "critical"})


@pytest.fixture
def cut_proxy(pg: PgCluster) -> Iterator[CutProxy]:
    """A cuttable TCP proxy to the test's cluster (as in ``test_standby_outage``)."""
    with CutProxy(unix_socket_of(pg.socket_dir)) as proxy:
        yield proxy


def error_lines(service: Service) -> list[str]:
    """Lines of the service's stderr that are errors: JSON at error level, or not JSON at all.

    Every line the service writes is a JSON log record; anything else (a traceback, asyncio's
    "Task exception was never retrieved") bypassed the logging and counts as an error.
    """
    found = []
    for line in service.stderr().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            found.append(line)
            continue
        if not isinstance(record, dict) or record.get("level") in ERROR_LEVELS:
            found.append(line)
    return found


def assert_no_error_lines(service: Service) -> None:
    """The service logged nothing at error level (and nothing outside its JSON log)."""
    errors = error_lines(service)
    assert errors == [], "error-level lines:\n" + "\n".join(errors)


def timed(request: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    """The answer to ``request`` and how long it took (seconds)."""
    started = time.monotonic()
    response = request()
    return response, time.monotonic() - started


def assert_refused_at_once(response: httpx.Response, took: float, service: Service) -> None:
    """503 ``unavailable`` with ``Retry-After``, long before the pool's timeout."""
    assert response.status_code == 503, f"{response.text}\n{service.stderr_tail()}"
    assert response.json()["code"] == "unavailable", response.text
    assert took < FAIL_FAST, (
        f"answered after {took:.2f} s: it waited for the pool ({POOL_TIMEOUT:g} s)\n"
        f"{service.stderr_tail()}"
    )
    assert response.headers.get("Retry-After") == "1", dict(response.headers)


# -- a, b. a standby that knows PostgreSQL is unreachable ------------------------------------------


def test_refuses_at_once_while_postgresql_is_unreachable_and_serves_once_it_is_back(
    services: Services, database_url: str, cut_proxy: CutProxy
) -> None:
    leader = services.start(database_url, env=STANDBY)
    leader.wait_ready()
    standby = services.start(
        cut_proxy.url(DATABASE),
        env={**STANDBY, "WORKLOAD_POOL_TIMEOUT_SECONDS": str(POOL_TIMEOUT)},
    )
    standby.wait_ready()
    wait_readyz(standby, 200, {"role": "standby"})
    create_workflow(leader, QUICK)
    before = start_run(standby, "quick")
    assert wait_for_run(standby, before)["status"] == "succeeded"

    cut_proxy.cut()
    wait_readyz(standby, 503, {"status": "unavailable", "role": "standby"})
    viewer = standby.client(VIEWER_TOKEN)
    read, read_took = timed(lambda: viewer.get(f"/api/v1/runs/{before}"))
    write, write_took = timed(
        lambda: post(standby.operator, "/api/v1/workflows/quick/versions/1/runs")
    )
    listing, listing_took = timed(lambda: viewer.get("/api/v1/runs"))
    report(
        "refused_while_unreachable",
        read_seconds=round(read_took, 4),
        write_seconds=round(write_took, 4),
        list_seconds=round(listing_took, 4),
    )
    assert_refused_at_once(read, read_took, standby)
    assert_refused_at_once(write, write_took, standby)
    assert_refused_at_once(listing, listing_took, standby)
    # What needs no PostgreSQL keeps answering.
    assert viewer.get("/livez").status_code == 200
    assert readyz(standby) == (503, {"status": "unavailable", "role": "standby", "epoch": None})
    metrics, metrics_took = timed(lambda: viewer.get("/metrics"))
    assert metrics.status_code == 200, metrics.text
    assert "workload_database_up 0.0" in metrics.text
    assert metrics_took < FAIL_FAST, f"/metrics took {metrics_took:.2f} s"
    assert viewer.get("/ui/static/console.js").status_code == 200
    assert standby.process.poll() is None, standby.stderr_tail()

    cut_proxy.restore()
    restored_at = time.monotonic()

    def served() -> bool:
        return viewer.get(f"/api/v1/runs/{before}").status_code == 200

    wait_until(
        served,
        timeout=RECOVERY_DEADLINE,
        interval=0.05,
        message=lambda: f"still refused after PostgreSQL came back\n{standby.stderr_tail()}",
    )
    report("served_again_after_seconds", seconds=round(time.monotonic() - restored_at, 3))
    after = start_run(standby, "quick")
    assert wait_for_run(standby, after)["status"] == "succeeded"
    wait_readyz(standby, 200, {"status": "ready", "role": "standby"})
    records = [r.get("message", "") for r in standby.log_records()]
    assert sum(m.startswith("PostgreSQL is unreachable") for m in records) >= 1, records
    assert sum(m.startswith("PostgreSQL answers again") for m in records) >= 1, records
    assert_no_error_lines(standby)


# -- c. fail-stop and refusals without error-level lines -----------------------------------------


def postgres_stopped_under_load(pg: PgCluster, database_url: str, services: Services) -> Service:
    """A coordinator serving requests (a small pool: some wait) when PostgreSQL stops: exit 5."""
    service = services.start(database_url, env=SMALL_POOL)
    service.wait_ready()
    create_workflow(service, QUICK)
    start_slow_run(service)
    with Load(service, threads=6) as load:
        wait_until(
            lambda: load.count(lambda a: a.status == 202) >= 10,
            timeout=30,
            message=lambda: f"the load does not flow\n{service.stderr_tail()}",
        )
        pg.stop_immediately()
        assert service.wait_exit(30) == EXIT_CODE_FAIL_STOP, service.stderr_tail()
    return service


def postgres_frozen_with_a_request_inside(
    pg: PgCluster, database_url: str, services: Services
) -> Service:
    """A request waits inside PostgreSQL (on a row lock) when it freezes: the shutdown grace
    ends with that request still running (exit 5)."""
    service = services.start(database_url)
    service.wait_ready()
    with a_request_held_in_the_database(service, database_url, pg) as answers:
        try:
            pg.freeze()
            assert service.wait_exit(30) == EXIT_CODE_FAIL_STOP, service.stderr_tail()
        finally:
            pg.thaw()
    (answer,) = answers
    if isinstance(answer, httpx.Response):
        assert answer.status_code == 503, answer.text
    return service


def second_coordinator(pg: PgCluster, database_url: str, services: Services) -> Service:
    """A second coordinator (not a standby) on a database one already leads: exit 3."""
    first = services.start(database_url)
    first.wait_ready()
    second = services.start(database_url)
    assert second.wait_exit(30) == EXIT_CODE_LOCK_HELD, second.stderr_tail()
    assert "holds the lock" in second.stderr(), second.stderr_tail()
    assert first.ready(), first.stderr_tail()
    return second


def start_without_postgresql(pg: PgCluster, database_url: str, services: Services) -> Service:
    """A coordinator started while PostgreSQL is stopped: exit 5 (SPEC §7)."""
    pg.stop_immediately()
    service = services.start(database_url)
    assert service.wait_exit(60) == EXIT_CODE_FAIL_STOP, service.stderr_tail()
    return service


QUIET_EXITS: dict[str, Callable[[PgCluster, str, Services], Service]] = {
    "postgres-stopped-under-load": postgres_stopped_under_load,
    "postgres-frozen-request-inside": postgres_frozen_with_a_request_inside,
    "second-coordinator": second_coordinator,
    "start-without-postgres": start_without_postgresql,
}


@pytest.mark.parametrize("case", list(QUIET_EXITS))
def test_quiet_fail_stop_logs_no_error_level_line(
    pg: PgCluster, database_url: str, services: Services, case: str
) -> None:
    service = QUIET_EXITS[case](pg, database_url, services)
    records: list[dict[str, Any]] = service.log_records()
    assert records, service.stderr_tail()  # it did log (as JSON), at warning level at most
    assert_no_error_lines(service)
