"""SIGTERM and SIGINT at any point of a service's life: exit 0, never death by the signal (§7).

Start-up is stopped where it is — waiting on a database that accepts but never answers, opening
the store, the recovery scan after the lock is taken, the embedded PostgreSQL starting — and
releases what it took (the lock session, the embedded server). A repeated signal while the
service stops (two 10 ms apart; a process group signalled through ``uv run`` delivers it twice)
changes nothing. The start-up points are reached deterministically: the silent database has
accepted the service's connection, or a table the step needs is locked by the test and the
service's query is seen waiting on it. ``workload worker`` likewise (SPEC §10: a stopped worker
exits 0): a signal while the user's module loads, and two 10 ms apart while an idle worker stops.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.fault.conftest import (
    DATABASE,
    WORKER_TOKEN,
    PgCluster,
    Service,
    Services,
    create_workflow,
    free_port,
    lock_backends,
    start_run,
    wait_for_attempt_running,
    workload_executable,
)
from tests.waiting import wait_until

SIGNALS = pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"]
)
EXIT_BOUND = 30.0  # seconds: a stop is quick; this only bounds the wait for a broken one
SLOW = {
    "id": "slow",
    "tasks": [{"key": "work", "action": "mock", "input": {"sleep_ms": 30_000}}],
}


def messages(service: Service) -> list[str]:
    """The messages of the service's JSON log lines."""
    return [str(r.get("message", "")) for r in service.log_records()]


def assert_stopped_on(service: Service, signum: signal.Signals) -> None:
    """Exit 0 (not killed by the signal), having logged the stop, with no fail-stop."""
    code = service.wait_exit(EXIT_BOUND)
    assert code == 0, f"exit code {code}, not 0\n{service.stderr_tail()}"
    logged = messages(service)
    assert f"stopping on {signum.name}" in logged, service.stderr_tail()
    assert not any("fail-stop" in m for m in logged), service.stderr_tail()
    assert "Traceback" not in service.stderr(), service.stderr_tail()


def assert_alive(service: Service) -> None:
    assert service.process.poll() is None, service.stderr_tail()


# -- a database that accepts and never answers ------------------------------------------------


class SilentDatabase:
    """A loopback TCP listener that accepts connections and never sends a byte."""

    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port: int = self._listener.getsockname()[1]
        self.accepted = threading.Event()
        self._connections: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"postgresql://workload@127.0.0.1:{self.port}/{DATABASE}"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # closed
            self._connections.append(connection)
            self.accepted.set()

    def close(self) -> None:
        self._listener.close()
        for connection in self._connections:
            connection.close()
        self._thread.join(5)


@pytest.fixture
def silent_database() -> Iterator[SilentDatabase]:
    database = SilentDatabase()
    try:
        yield database
    finally:
        database.close()


@SIGNALS
def test_a_signal_while_start_up_waits_on_a_silent_database_exits_0(
    silent_database: SilentDatabase, services: Services, signum: signal.Signals
) -> None:
    service = services.start(silent_database.url)
    wait_until(
        silent_database.accepted.is_set,
        timeout=30,
        message=lambda: f"the service never connected\n{service.stderr_tail()}",
    )
    assert_alive(service)  # waiting on the database's answer
    service.signal(signum)
    assert_stopped_on(service, signum)


# -- start-up steps held on a table lock -------------------------------------------------------


@contextlib.contextmanager
def table_locked(database_url: str, table: str) -> Iterator[None]:
    """Hold ``ACCESS EXCLUSIVE`` on ``table``: every query on it waits until the block ends."""
    with psycopg.connect(database_url, connect_timeout=5) as conn:
        conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")  # the transaction holds it
        yield
        conn.rollback()


def waiting_queries(pg: PgCluster) -> list[str]:
    """The queries of the database's sessions that wait on a lock."""
    rows = pg.query(
        pg.admin_url,
        "SELECT query FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'",
        (DATABASE,),
    )
    return [str(query) for (query,) in rows]


# service_secrets: opening the store (before the coordinator lock); attempts: the recovery
# scan's first query (the lock is taken, the backlog waits).
STEPS = pytest.mark.parametrize(
    ("table", "lock_taken"),
    [("service_secrets", False), ("attempts", True)],
    ids=["opening-the-store", "recovery-scan"],
)


@STEPS
@SIGNALS
def test_a_signal_during_a_start_up_step_exits_0_and_releases_the_lock(
    pg: PgCluster,
    database_url: str,
    services: Services,
    signum: signal.Signals,
    table: str,
    lock_taken: bool,
) -> None:
    create_workflow_rows(services, database_url)  # a backlog for the recovery scan
    with table_locked(database_url, table):
        service = services.start(database_url)
        wait_until(
            lambda: any(table in q for q in waiting_queries(pg)),
            timeout=30,
            message=lambda: f"no query waits on {table}\n{service.stderr_tail()}",
        )
        assert bool(lock_backends(pg)) is lock_taken, lock_backends(pg)
        assert not service.ready()
        service.signal(signum)
        assert_stopped_on(service, signum)
        wait_until(
            lambda: not lock_backends(pg),
            timeout=10,
            message="the lock session outlived the stopped service",
        )
    # Nothing was left behind: the next service starts and recovers the backlog.
    again = services.start(database_url)
    again.wait_ready()


def create_workflow_rows(services: Services, database_url: str) -> None:
    """A few pending runs, created through a service that is then stopped."""
    first = services.start(database_url)
    first.wait_ready()
    create_workflow(first, SLOW)
    for _ in range(3):
        start_run(first, "slow")
    first.signal(signal.SIGTERM)
    assert first.wait_exit(EXIT_BOUND) == 0, first.stderr_tail()


# -- a repeated signal while stopping ----------------------------------------------------------


@SIGNALS
def test_two_signals_10_ms_apart_once_ready_exit_0(
    database_url: str, services: Services, signum: signal.Signals
) -> None:
    service = services.start(database_url)
    service.wait_ready()
    create_workflow(service, SLOW)
    run_id = start_run(service, "slow")
    wait_for_attempt_running(service, run_id, "work")

    service.signal(signum)
    time.sleep(0.01)  # the second signal's timing, not an assertion
    service.signal(signum)
    assert_stopped_on(service, signum)


# -- embedded mode: the PostgreSQL it started is stopped ---------------------------------------


def postmaster_pid(data_dir: Path) -> int | None:
    """The embedded server's postmaster pid, once its ``postmaster.pid`` names one."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((data_dir / "postgres" / "postmaster.pid").read_text().split()[0])
    return None


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def assert_embedded_stopped(data_dir: Path, pid: int) -> None:
    wait_until(lambda: not is_alive(pid), timeout=10, message="the embedded PostgreSQL lives on")
    assert not (data_dir / "postgres" / "postmaster.pid").exists()


@SIGNALS
def test_a_signal_while_the_embedded_database_starts_stops_it_and_exits_0(
    services: Services, tmp_path: Path, signum: signal.Signals
) -> None:
    data_dir = tmp_path / "data"
    service = services.start(None, env={"WORKLOAD_DATA_DIR": str(data_dir)})
    found: list[int] = []

    def started() -> bool:
        pid = postmaster_pid(data_dir)
        if pid is not None:
            found.append(pid)
        return pid is not None

    wait_until(started, timeout=90, message=lambda: f"no embedded server\n{service.stderr_tail()}")
    service.signal(signum)
    code = service.wait_exit(60)
    assert code == 0, f"exit code {code}, not 0\n{service.stderr_tail()}"
    assert f"stopping on {signum.name}" in service.stderr(), service.stderr_tail()
    assert "Traceback" not in service.stderr(), service.stderr_tail()
    assert_embedded_stopped(data_dir, found[0])


@SIGNALS
def test_two_signals_10_ms_apart_in_embedded_mode_stop_the_database_and_exit_0(
    services: Services, tmp_path: Path, signum: signal.Signals
) -> None:
    data_dir = tmp_path / "data"
    service = services.start(None, env={"WORKLOAD_DATA_DIR": str(data_dir)})
    service.wait_ready(timeout=90)
    pid = postmaster_pid(data_dir)
    assert pid is not None

    service.signal(signum)
    time.sleep(0.01)  # the second signal's timing, not an assertion
    service.signal(signum)
    code = service.wait_exit(60)
    assert code == 0, f"exit code {code}, not 0\n{service.stderr_tail()}"
    assert f"stopping on {signum.name}" in messages(service), service.stderr_tail()
    assert_embedded_stopped(data_dir, pid)


def child_programs(pid: int) -> set[str]:
    """The names of the programs ``pid`` runs as its children right now."""
    names: set[str] = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            text = stat.read_text()
            name = text[text.index("(") + 1 : text.rindex(")")]
            if int(text[text.rindex(")") + 2 :].split()[1]) == pid:
                names.add(name)
    return names


@pytest.mark.parametrize(
    ("signum", "program"),
    [(signal.SIGINT, "initdb"), (signal.SIGTERM, "initdb"), (signal.SIGINT, "pg_ctl")],
    ids=["SIGINT-initdb", "SIGTERM-initdb", "SIGINT-pg_ctl"],
)
def test_a_signal_to_the_process_group_while_the_embedded_database_starts_exits_0(
    services: Services, tmp_path: Path, signum: signal.Signals, program: str
) -> None:
    """Ctrl-C in a terminal signals the whole group, the programs the start runs included."""
    data_dir = tmp_path / "data"
    env = {"WORKLOAD_DATA_DIR": str(data_dir)}
    if program == "pg_ctl":  # a data directory made already: the start is pg_ctl's alone
        first = services.start(None, env=env)
        first.wait_ready(timeout=90)
        first.signal(signal.SIGTERM)
        assert first.wait_exit(60) == 0, first.stderr_tail()
    service = services.start(None, env=env, own_group=True)
    wait_until(
        lambda: program in child_programs(service.pid),
        timeout=90,
        interval=0.005,
        message=lambda: f"never ran {program}\n{service.stderr_tail()}",
    )
    service.signal_group(signum)
    code = service.wait_exit(60)
    assert code == 0, f"exit code {code}, not 0\n{service.stderr_tail()}"
    assert "Traceback" not in service.stderr(), service.stderr_tail()
    assert f"stopping on {signum.name}" in service.stderr(), service.stderr_tail()
    pid = postmaster_pid(data_dir)
    if pid is not None:
        assert_embedded_stopped(data_dir, pid)

    # The data directory was not left half made: the next start serves.
    again = services.start(None, env=env)
    again.wait_ready(timeout=90)
    again.signal(signal.SIGTERM)
    assert again.wait_exit(60) == 0, again.stderr_tail()


# -- the worker: `workload worker MODULE:ATTRIBUTE` --------------------------------------------

IMPORTING_MODULE = """
import time
from pathlib import Path

from workload_worker import Worker

Path("importing").write_text("")
time.sleep(600)  # a module that takes its time to load (heavy imports, a model)
worker = Worker(worker_id="slow-import")
"""
IDLE_MODULE = """
from workload_worker import Worker

worker = Worker(worker_id="idle", wait_seconds=1)


@worker.action("nothing")
def nothing(ctx, input):
    return {}
"""


@contextlib.contextmanager
def worker_command(tmp_path: Path, module: str) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """``workload worker`` on ``module`` (its server: a port nobody listens on); killed after."""
    (tmp_path / "signal_worker.py").write_text(module, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
    env.update({"PYTHONPATH": str(tmp_path), "PYTHONUNBUFFERED": "1"})
    command = [str(workload_executable()), "worker", "signal_worker:worker"]
    command += ["--url", f"http://127.0.0.1:{free_port()}", "--token", WORKER_TOKEN]
    log = tmp_path / "worker.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, cwd=tmp_path, env=env, stdout=output, stderr=output, stdin=subprocess.DEVNULL
        )
    try:
        yield process, log
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def assert_worker_exit_0(process: subprocess.Popen[bytes], log: Path) -> str:
    try:
        code = process.wait(EXIT_BOUND)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the worker still runs\n{log.read_text(errors='replace')}") from None
    output = log.read_text(errors="replace")
    assert code == 0, f"exit code {code}, not 0\n{output}"
    assert "Traceback" not in output, output
    return output


@SIGNALS
def test_a_signal_while_the_worker_module_loads_exits_0(
    tmp_path: Path, signum: signal.Signals
) -> None:
    with worker_command(tmp_path, IMPORTING_MODULE) as (process, log):
        wait_until(
            (tmp_path / "importing").exists,
            timeout=30,
            message=lambda: f"the module never loaded\n{log.read_text(errors='replace')}",
        )
        process.send_signal(signum)
        output = assert_worker_exit_0(process, log)
    assert f"stopped on {signum.name}" in output, output


@SIGNALS
def test_two_signals_10_ms_apart_stop_an_idle_worker_with_exit_0(
    tmp_path: Path, signum: signal.Signals
) -> None:
    with worker_command(tmp_path, IDLE_MODULE) as (process, log):
        wait_until(
            lambda: "worker idle: serving" in log.read_text(errors="replace"),
            timeout=30,
            message=lambda: f"the worker never served\n{log.read_text(errors='replace')}",
        )
        process.send_signal(signum)
        time.sleep(0.01)  # the second signal's timing, not an assertion
        process.send_signal(signum)
        output = assert_worker_exit_0(process, log)
    assert f"{signum.name}: stopping" in output, output
