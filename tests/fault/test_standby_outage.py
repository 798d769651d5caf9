"""A standby outlives losing PostgreSQL (SPEC §14, docs/operations.md's HA table).

A standby executes nothing, so a database it cannot reach is not a fault for it: it answers
``/readyz`` 503 ``unavailable`` and requests 503 ``unavailable``, keeps retrying the lock every
check interval, and once the database answers it is ready again — and leads if the leader died
meanwhile. Only the leader fail-stops (exit 5, SPEC §7). Before the fix, a standby's failed
lock try was a fail-stop: a database blip (or a partition of the standby alone) killed every
replica, and when PostgreSQL came back nobody was left to execute.

Real processes on a real PostgreSQL; a standby partitioned alone reaches the database through a
small TCP proxy that the test cuts and restores.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
import pytest

from tests.cut_forwarding import CutForwarding
from tests.fault.conftest import (
    DATABASE,
    FAST_REAPER,
    PgCluster,
    Service,
    Services,
    create_workflow,
    post,
    start_run,
    wait_for_run,
)
from tests.fault.proxy import unix_socket_of
from tests.tls import shared_tls
from tests.waiting import wait_until
from workload_store_postgres.notifications import APPLICATION_NAME as LISTENER

_T = TypeVar("_T")

STANDBY = {"WORKLOAD_STANDBY": "true", **FAST_REAPER}
QUICK = {"id": "quick", "tasks": [{"key": "a", "action": "mock"}]}


class CutProxy:
    """A TCP proxy on 127.0.0.1 to a PostgreSQL Unix socket that the test can cut.

    A :class:`~tests.cut_forwarding.CutForwarding` in an event loop of its own thread (the test
    and the processes it drives are synchronous). It counts the connections it turned away, so
    that a test can wait for a client's retries.
    """

    def __init__(self, unix_socket: Path) -> None:
        self.unix_socket = unix_socket
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._forwarding = CutForwarding(lambda: asyncio.open_unix_connection(str(unix_socket)))

    def url(self, database: str) -> str:
        """A libpq URL of ``database`` through the proxy."""
        return (
            f"postgresql://postgres@127.0.0.1:{self.port}/{database}"
            "?sslmode=disable&gssencmode=disable"
        )

    @property
    def refused(self) -> int:
        """How many connections were turned away while cut."""
        return self._call(self._count())

    def cut(self) -> None:
        """Abort every connection; turn new ones away."""
        self._call(self._set_cut(True))

    def restore(self) -> None:
        """Forward new connections again."""
        self._call(self._set_cut(False))

    def __enter__(self) -> Self:
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def _call(self, work: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout=30)

    async def _count(self) -> int:
        return self._forwarding.refused

    async def _shutdown(self) -> None:
        await self._set_cut(True)
        if self._server is not None:
            self._server.close()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=10)

    async def _set_cut(self, cut: bool) -> None:
        if cut:
            self._forwarding.sever()
        else:
            self._forwarding.restore()

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._forwarding.accept(client_r, client_w)
        finally:
            self._tasks.discard(task)


@pytest.fixture
def cut_proxy(pg: PgCluster) -> Iterator[CutProxy]:
    """A cuttable TCP proxy to the test's cluster."""
    with CutProxy(unix_socket_of(pg.socket_dir)) as proxy:
        yield proxy


def listeners(pg: PgCluster) -> int:
    """How many ``LISTEN`` connections (one per replica) the database has."""
    rows = pg.query(
        pg.admin_url,
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
        (LISTENER,),
    )
    return int(rows[0][0])


def readyz(service: Service) -> tuple[int, dict[str, Any]] | None:
    """``GET /readyz``: its status code and body, or None when nothing answers."""
    try:
        response = httpx.get(f"{service.base_url}/readyz", timeout=2, verify=shared_tls())
    except httpx.HTTPError:
        return None
    body: dict[str, Any] = response.json()
    return response.status_code, body


def wait_readyz(service: Service, status: int, body: dict[str, Any], timeout: float = 30) -> None:
    """Poll ``/readyz`` until it answers ``status`` with (at least) ``body``."""
    last: tuple[int, dict[str, Any]] | None = None

    def answered() -> bool:
        nonlocal last
        last = readyz(service)
        return last is not None and last[0] == status and body.items() <= last[1].items()

    wait_until(
        answered,
        timeout=timeout,
        interval=0.05,
        message=lambda: f"/readyz is {last}, not {status} {body}\n{service.stderr_tail()}",
    )


def assert_unavailable(response: httpx.Response, service: Service) -> None:
    """A request that needs the database is answered 503 ``unavailable`` (not 500)."""
    assert response.status_code == 503, f"{response.text}\n{service.stderr_tail()}"
    assert response.json()["code"] == "unavailable", response.text


def test_a_partitioned_standby_waits_for_postgresql_and_then_takes_over(
    pg: PgCluster, services: Services, database_url: str, cut_proxy: CutProxy
) -> None:
    leader = services.start(database_url, env=STANDBY)
    leader.wait_ready()
    standby = services.start(cut_proxy.url(DATABASE), env=STANDBY)
    standby.wait_ready()
    wait_readyz(standby, 200, {"role": "standby"})
    create_workflow(leader, QUICK)
    before = start_run(standby, "quick")
    assert wait_for_run(leader, before)["status"] == "succeeded"

    cut_proxy.cut()
    wait_readyz(standby, 503, {"status": "unavailable", "role": "standby"})
    # It keeps trying (each try is a connection the proxy turns away) and stays up, not ready.
    tried = cut_proxy.refused
    wait_until(lambda: cut_proxy.refused >= tried + 3, message="the standby stopped retrying")
    assert standby.process.poll() is None, standby.stderr_tail()
    assert readyz(standby) == (503, {"status": "unavailable", "role": "standby", "epoch": None})
    assert_unavailable(standby.operator.get(f"/api/v1/runs/{before}"), standby)
    assert_unavailable(post(standby.operator, "/api/v1/workflows/quick/versions/1/runs"), standby)
    wait_until(lambda: listeners(pg) == 1, message="the standby's listener is still connected")
    # Nothing else changes: the leader leads and executes.
    wait_readyz(leader, 200, {"status": "ready", "role": "leader"})
    during = start_run(leader, "quick")
    assert wait_for_run(leader, during)["status"] == "succeeded"
    assert standby.process.poll() is None, standby.stderr_tail()

    cut_proxy.restore()
    wait_readyz(standby, 200, {"status": "ready", "role": "standby"})
    assert wait_for_run(standby, during)["status"] == "succeeded"
    # Its listener is back too: the leader's and its own listen again.
    wait_until(
        lambda: listeners(pg) == 2,
        message=lambda: f"the standby's listener did not reconnect\n{standby.stderr_tail()}",
    )
    through_standby = start_run(standby, "quick")
    assert wait_for_run(standby, through_standby)["status"] == "succeeded"

    # The standby is a standby again in full: it takes over when the leader dies.
    leader.signal(signal.SIGKILL)
    leader.wait_exit(timeout=30)
    wait_readyz(standby, 200, {"status": "ready", "role": "leader"})
    after = start_run(standby, "quick")
    assert wait_for_run(standby, after)["status"] == "succeeded"
    records = [r["message"] for r in standby.log_records()]
    assert not [m for m in records if m.startswith("fail-stop")], standby.stderr_tail()
    # Said once when the outage began and once when it ended, not at every try.
    assert sum(m.startswith("standing by without PostgreSQL") for m in records) == 1, records
    assert sum(m == "standing by: PostgreSQL reached again" for m in records) == 1, records


def test_a_standby_outlives_a_postgresql_restart_that_stops_the_leader(
    pg: PgCluster, services: Services, database_url: str
) -> None:
    leader = services.start(database_url, env=STANDBY)
    leader.wait_ready()
    standby = services.start(database_url, env=STANDBY)
    standby.wait_ready()
    wait_readyz(standby, 200, {"role": "standby"})
    create_workflow(leader, QUICK)
    create_workflow(
        leader,
        {
            "id": "slow",
            "tasks": [
                {
                    "key": "s",
                    "action": "mock",
                    "input": {"sleep_ms": 1500},
                    "retry": {"max_attempts": 3, "initial_backoff_seconds": 0},
                }
            ],
        },
    )
    unfinished = start_run(standby, "slow")

    pg.stop_immediately()
    # SPEC §7: the leader fail-stops. The standby stays, not ready, and keeps trying.
    assert leader.wait_exit(timeout=60) == 5, leader.stderr_tail()
    wait_readyz(standby, 503, {"status": "unavailable", "role": "standby"})
    assert_unavailable(standby.operator.get(f"/api/v1/runs/{unfinished}"), standby)
    assert standby.process.poll() is None, standby.stderr_tail()

    pg.start()
    # The lock is free (the leader is gone): the standby takes over and recovers.
    wait_readyz(standby, 200, {"status": "ready", "role": "leader"}, timeout=60)
    assert wait_for_run(standby, unfinished, timeout=60)["status"] == "succeeded"
    after = start_run(standby, "quick")
    assert wait_for_run(standby, after)["status"] == "succeeded"
    records = [r["message"] for r in standby.log_records()]
    assert not [m for m in records if m.startswith("fail-stop")], standby.stderr_tail()


def test_a_standby_without_postgresql_still_stops_cleanly(
    services: Services, database_url: str, cut_proxy: CutProxy
) -> None:
    leader = services.start(database_url, env=STANDBY)
    leader.wait_ready()
    standby = services.start(cut_proxy.url(DATABASE), env=STANDBY)
    standby.wait_ready()
    cut_proxy.cut()
    wait_readyz(standby, 503, {"status": "unavailable", "role": "standby"})
    standby.signal(signal.SIGTERM)  # SPEC §7: a signal is a clean stop, whatever the database
    assert standby.wait_exit(timeout=60) == 0, standby.stderr_tail()
    wait_readyz(leader, 200, {"status": "ready", "role": "leader"})
