"""`workload serve` with no configuration: the one command a newcomer runs (SPEC §7).

Runs the real console script as a subprocess with an empty data directory and nothing but a
private runtime dir in its environment: it must start the embedded PostgreSQL, migrate it,
print development tokens, serve on the default 127.0.0.1:8080, execute a run created with the
printed operator token, and stop everything on SIGTERM with exit code 0.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.waiting import wait_until
from workload_sdk.config import DEFAULT_BASE_URL

DEFAULT_URL = DEFAULT_BASE_URL


def _wait(check: Callable[[], bool], timeout: float, describe: str, log: Path) -> None:
    def explain() -> str:
        return f"{describe}; service log:\n{log.read_text(errors='replace')[-4000:]}"

    wait_until(check, timeout=timeout, interval=0.05, message=explain)


def _ready() -> bool:
    try:
        return httpx.get(f"{DEFAULT_URL}/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _runtime_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a newcomer's shell: a PATH, a HOME, a private runtime dir."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "XDG_RUNTIME_DIR": str(runtime),
        "WORKLOAD_DATA_DIR": str(tmp_path / "data"),
    }


@pytest.mark.postgres  # the embedded PostgreSQL of `workload serve`
def test_serve_with_no_configuration_runs_a_workflow(tmp_path: Path) -> None:
    with socket.socket() as probe:  # the default port must be free for this test to mean much
        probe.bind(("127.0.0.1", 8080))
    env = _runtime_env(tmp_path)
    data_dir = Path(env["WORKLOAD_DATA_DIR"])
    log = tmp_path / "serve.log"
    workload = shutil.which("workload", path=str(Path(sys.executable).parent))
    assert workload is not None
    with log.open("wb") as output:
        process = subprocess.Popen(
            [workload, "serve"], stdout=output, stderr=subprocess.STDOUT, env=env
        )
    try:
        _wait(_ready, 90, "the service did not become ready", log)
        text = log.read_text()
        assert f"data directory: {data_dir}" in text
        printed = re.search(r"operator: (\S+)", text)
        assert printed is not None, text
        token = printed[1]
        credentials = data_dir / "credentials.json"
        assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
        stored = json.loads(credentials.read_text())
        assert stored["operator_token"] == token
        assert stored["url"] == DEFAULT_URL
        worker_token = re.search(r"worker:\s+(\S+)", text)
        assert worker_token is not None, text
        assert worker_token[1] == stored["worker_token"]

        headers = {"Authorization": f"Bearer {token}"}
        created = httpx.post(
            f"{DEFAULT_URL}/api/v1/workflows",
            json={"id": "hello", "tasks": [{"key": "a", "action": "mock"}]},
            headers={**headers, "Idempotency-Key": "hello-1"},
        )
        assert created.status_code == 201, created.text
        started = httpx.post(
            f"{DEFAULT_URL}/api/v1/workflows/hello/versions/1/runs",
            headers={**headers, "Idempotency-Key": "hello-run-1"},
        )
        assert started.status_code == 202, started.text
        run_url = f"{DEFAULT_URL}{started.headers['location']}"

        def finished() -> bool:
            return bool(httpx.get(run_url, headers=headers).json()["status"] == "succeeded")

        _wait(finished, 30, "the run did not succeed", log)

        # A second `serve` of the same directory cannot lead (exit 3): the URL the client
        # commands find stays the one that serves.
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            other_port = probe.getsockname()[1]
        second = subprocess.run(
            [workload, "serve", "--port", str(other_port)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert second.returncode == 3, second.stderr[-4000:]
        assert json.loads(credentials.read_text()) == stored

        # A second terminal with no configuration at all: the CLI finds the dev credentials.
        demo = subprocess.run(
            [workload, "--output", "json", "demo"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert demo.returncode == 0, demo.stdout + demo.stderr
        assert json.loads(demo.stdout)["status"] == "succeeded", demo.stdout
        # The demo started the example worker with the stored worker token, and the worker's
        # tasks ran remotely: their report exists.
        assert "started the example worker" in demo.stderr, demo.stderr
        report = re.search(r"report: (\S+)", demo.stderr)
        assert report is not None, demo.stderr
        assert "Text statistics" in Path(report[1]).read_text(encoding="utf-8")
        run_id = json.loads(demo.stdout)["run_id"]
        attempts = httpx.get(
            f"{DEFAULT_URL}/api/v1/runs/{run_id}/tasks/stats/attempts", headers=headers
        ).json()["items"]
        assert attempts[-1]["worker_id"] is not None
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert code == 0, log.read_text()[-4000:]
    assert "stopping on SIGTERM" in log.read_text()
    # The embedded PostgreSQL stopped with the service: its postmaster.pid is gone.
    assert not (data_dir / "postgres" / "postmaster.pid").exists()
