"""The real ``workload serve`` and ``workload worker``, each kept running by a supervisor.

Every process is the console script of the environment running the soak: ``serve`` with
``--host 127.0.0.1`` in strict mode (``--database-url``, and ``--standby`` or ``--replica`` when
several run), ``worker`` with the soak's worker module. Their environment holds none of the
caller's ``WORKLOAD_*`` variables, only the soak's tokens and a short lock-check interval. Output
goes to one file per process in the soak's directory. A supervisor restarts its process 0.3 s
after every exit and records every start and exit code with its time; it ends only the processes
it started, by pid.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.chaos.settings import OPERATOR_TOKEN, VIEWER_TOKEN, WORKER_TOKEN
from benchmarks.chaos.worker_app import EXECUTIONS_ENV

__all__ = ["Exit", "Launcher", "Supervisor", "free_port", "is_ready", "readyz"]

WORKER_TARGET = "benchmarks.chaos.worker_app:worker"

_RESTART_PAUSE_SECONDS = 0.3
_MAX_STARTS = 5_000


def free_port() -> int:
    """A loopback port that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def is_ready(base_url: str, timeout: float = 1.0) -> bool:
    """Whether ``GET /readyz`` answers 200 within ``timeout``."""
    return readyz(base_url, timeout)[0] == 200


def readyz(base_url: str, timeout: float = 1.0) -> tuple[int | None, dict[str, Any]]:
    """``GET /readyz``: its status (None: no answer) and its body."""
    try:
        answer = httpx.get(f"{base_url}/readyz", timeout=timeout)
    except httpx.HTTPError:
        return None, {}
    try:
        body = answer.json()
    except ValueError:
        body = {}
    return answer.status_code, body if isinstance(body, dict) else {}


def _workload_executable() -> str:
    beside = Path(sys.executable).parent / "workload"
    found = str(beside) if beside.exists() else shutil.which("workload")
    if found is None:
        raise RuntimeError("the `workload` console script is not installed (uv sync)")
    return found


class Launcher:
    """Builds ``workload`` command lines and environments, and starts them with logs on disk."""

    def __init__(self, directory: Path, lock_check_interval: float) -> None:
        self.directory = directory
        self.executions = directory / "executions"
        self.executions.mkdir(parents=True, exist_ok=True)
        self.executable = _workload_executable()
        self._count = 0
        directory.mkdir(parents=True, exist_ok=True)
        runtime = directory / "xdg-runtime"
        runtime.mkdir(mode=0o700)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
        self.env.update(
            {
                "WORKLOAD_OPERATOR_TOKENS": OPERATOR_TOKEN,
                "WORKLOAD_VIEWER_TOKENS": VIEWER_TOKEN,
                "WORKLOAD_WORKER_TOKENS": WORKER_TOKEN,
                "WORKLOAD_LOCK_CHECK_INTERVAL_SECONDS": str(lock_check_interval),
                "WORKLOAD_LOG_LEVEL": "INFO",
                "XDG_RUNTIME_DIR": str(runtime),
                "PYTHONUNBUFFERED": "1",
                # A fatal signal (SIGSEGV, SIGABRT…) prints every thread's Python stack.
                "PYTHONFAULTHANDLER": "1",
            }
        )

    def migrate(self, database_url: str) -> None:
        """``workload migrate up --database-url URL``; raise with its output if it fails."""
        result = subprocess.run(
            [self.executable, "migrate", "up", "--database-url", database_url],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=self.env,
        )
        if result.returncode != 0:
            raise RuntimeError(f"workload migrate up failed: {result.stdout}{result.stderr}")

    def serve(
        self, database_url: str, port: int, name: str, flag: str | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``workload serve`` on 127.0.0.1:``port``; stdout and stderr to ``name.*.log``.

        ``flag``: ``--standby`` or ``--replica`` (None: a single coordinator).
        """
        command = [self.executable, "serve", "--host", "127.0.0.1", "--port", str(port)]
        command += ["--database-url", database_url]
        if flag is not None:
            command.append(flag)
        return self._start(command, name, self.env)

    def worker(self, url: str, name: str) -> subprocess.Popen[bytes]:
        """Start ``workload worker`` of the soak's worker module against ``url``."""
        env = {**self.env, "WORKLOAD_WORKER_TOKEN": WORKER_TOKEN}
        env[EXECUTIONS_ENV] = str(self.executions)
        command = [self.executable, "worker", WORKER_TARGET, "--url", url]
        return self._start(command, name, env)

    def _start(self, command: list[str], name: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        self._count += 1
        stem = self.directory / f"{name}-{self._count:04d}"
        with (
            stem.with_suffix(".out.log").open("wb") as out,
            stem.with_suffix(".err.log").open("wb") as err,
        ):
            return subprocess.Popen(
                command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env
            )

    def logs(self, prefix: str = "") -> list[Path]:
        """Every stderr file written so far (of the processes whose name starts ``prefix``)."""
        return sorted(self.directory.glob(f"{prefix}*.err.log"))


@dataclass(frozen=True)
class Exit:
    """One exit of a supervised service."""

    generation: int
    pid: int
    code: int
    at: float  # time.monotonic()
    name: str = ""


class Supervisor:
    """Keeps one process running (a service on a fixed port, or a worker): restarts it.

    ``launch`` starts the process; ``base_url`` is the service's (None for a worker).
    """

    def __init__(
        self,
        name: str,
        launch: Callable[[], subprocess.Popen[bytes]],
        lifetime_seconds: float,
        base_url: str | None = None,
    ) -> None:
        self.name = name
        self._launch = launch
        self._lifetime = lifetime_seconds
        self.base_url = base_url or ""
        self.exits: list[Exit] = []
        self.starts = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"supervise-{name}", daemon=True)

    def start(self) -> None:
        """Start the service and the thread that restarts it."""
        self._thread.start()

    def current(self) -> tuple[int, subprocess.Popen[bytes] | None]:
        """The generation (number of starts) and the process running now, if any."""
        with self._lock:
            process = self._process
            return self.starts, process if process and process.poll() is None else None

    def _loop(self) -> None:
        deadline = time.monotonic() + self._lifetime
        while self._live(deadline) and self.starts < _MAX_STARTS:
            with self._lock:
                self._process = self._launch()
                self.starts += 1
                process, generation = self._process, self.starts
            while process.poll() is None and self._live(deadline):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=0.1)
            if not self._live(deadline):
                return  # stop() ends the process
            exit_ = Exit(generation, process.pid, process.returncode, time.monotonic(), self.name)
            self.exits.append(exit_)
            self._stopping.wait(_RESTART_PAUSE_SECONDS)

    def _live(self, deadline: float) -> bool:
        return not self._stopping.is_set() and time.monotonic() < deadline

    def wait_ready(self, timeout: float) -> bool:
        """Poll ``/readyz`` until 200 (True) or ``timeout`` (False); a worker: until it runs."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready():
                return True
            time.sleep(0.1)
        return False

    def ready(self) -> bool:
        """A service: ``/readyz`` answers 200. A worker: its process is running."""
        if self.base_url:
            return is_ready(self.base_url)
        return self.current()[1] is not None

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM the running service, wait (SIGKILL after ``timeout``); its exit code."""
        self._stopping.set()
        self._thread.join(timeout=10)
        with self._lock:
            process = self._process
        if process is None:
            return None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)  # in case a fault left it stopped
                process.send_signal(signal.SIGTERM)
            try:
                return process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
                return None
        return process.returncode
