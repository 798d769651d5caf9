"""What telemetry costs, counted in instructions (SPEC §12): a reading this machine cannot blur.

``telemetry_bench`` times CPU, and on this shared two-core machine a round's spread (8-24
points) is wider than either budget of SPEC §12 (metrics ≤ 3 %, 10 % of traces ≤ 10 %). Here
the service runs under valgrind's callgrind, which counts the instructions it executes: the
same work gives the same count whatever else the machine does (two readings of one
configuration agree within 1 %).

Each configuration serves in a process of its own (``telemetry_bench``'s ``serve``, under
``valgrind --tool=callgrind --instr-atstart=no``: start-up runs uncounted), against a database
of its own; one client creates ``WORKLOAD_BENCH_INSTRUCTIONS_RUNS`` one-task mock runs one after
the other (one client: concurrent ones batch commits by timing, which moves the count), then
waits until every run is terminal. The count covers the runs and the export of their spans; the idle
process's background (lease renewals, polls), counted over an idle window after, is subtracted
in proportion to the window's length.

Configurations: telemetry off, metrics (the default), tracing on at ratio 0 (every request
unsampled: what an unsampled request costs) and every trace recorded. SPEC §12's production
sampler samples 10 %, so its expected cost is 0.9 × the unsampled reading + 0.1 × the
every-trace one: computed, not sampled, so that the draw of trace ids does not move it.

Needs ``valgrind`` (Debian's package). Prints JSON; every loop is bounded in count and time.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.api_bench import TOKEN
from benchmarks.common import database_server, emit, knob
from benchmarks.telemetry_bench import dummy_collector
from workload_store_postgres.migrations import migrate_up

RUNS = knob("WORKLOAD_BENCH_INSTRUCTIONS_RUNS", 150, 10)
WARM_UP_RUNS = 10
ROUNDS = knob("WORKLOAD_BENCH_INSTRUCTIONS_ROUNDS", 1, 1)
EXPORT_SECONDS = 6.0
"""Waited before a count ends: the batch span processor exports every 5 s by default."""
IDLE_SECONDS = 5.0
TIME_LIMIT_SECONDS = 300.0
MODES = ("off", "metrics", "traces_unsampled", "traces_every")
_SAMPLER = "parentbased_traceidratio"


def _control(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def totals(text: str) -> int | None:
    """The instruction total of a callgrind dump's text (None until its ``totals:`` line)."""
    for line in text.splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    return None


def _totals(out: Path, before: set[Path]) -> int:
    """The instruction total of the dump ``callgrind_control -d`` just wrote."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for dump in sorted(set(out.parent.glob(f"{out.name}.*")) - before):
            found = totals(dump.read_text())
            if found is not None:
                return found
        time.sleep(0.2)
    raise RuntimeError(f"no callgrind dump appeared for {out}")


def _dump(pid: int, out: Path) -> int:
    before = set(out.parent.glob(f"{out.name}.*"))
    _control(pid, "-d")
    return _totals(out, before)


def _runs(client: httpx.Client, count: int) -> None:
    """Create ``count`` runs one after the other, then wait until every run is terminal.

    The runs are not awaited one by one: polling each would add a number of reads that
    depends on timing. The end is seen by a few reads of ``/api/v1/status``.
    """
    deadline = time.monotonic() + TIME_LIMIT_SECONDS
    for n in range(count):
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {n} of {count} runs within the time limit")
        created = client.post(
            "/api/v1/workflows/bench/versions/1/runs",
            headers={"Idempotency-Key": f"instructions-{time.monotonic_ns()}-{n}"},
        )
        if created.status_code != 202:
            raise RuntimeError(f"create-run answered {created.status_code}")
    while client.get("/api/v1/status").json()["runs_active"] != 0:
        if time.monotonic() > deadline:
            raise RuntimeError("runs were still active after the time limit")
        time.sleep(0.2)


def _env(mode: str, endpoint: str) -> dict[str, str]:
    if not mode.startswith("traces"):
        return {"OTEL_TRACES_EXPORTER": "none"}
    traced = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    }
    if mode == "traces_unsampled":
        return {**traced, "OTEL_TRACES_SAMPLER": _SAMPLER, "OTEL_TRACES_SAMPLER_ARG": "0.0"}
    return traced


def measure(database_url: str, mode: str, endpoint: str, scratch: Path) -> dict[str, float]:
    """One configuration's instructions per run (millions), background subtracted."""
    asyncio.run(migrate_up(database_url))
    out = scratch / f"{mode}.{time.monotonic_ns()}.out"
    child = subprocess.Popen(
        [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-m",
            "benchmarks.telemetry_bench",
            "serve",
            database_url,
            "off" if mode == "off" else "metrics",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **_env(mode, endpoint)},
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        if not line.startswith("READY "):
            raise RuntimeError(f"the service did not start ({line!r})")
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=line.split()[1], headers=headers, timeout=60) as client:
            _control(child.pid, "-i", "on")
            created = client.post(
                "/api/v1/workflows",
                json={"id": "bench", "tasks": [{"key": "a", "action": "mock"}]},
                headers={"Idempotency-Key": "instructions-workflow"},
            )
            if created.status_code != 201:
                raise RuntimeError(f"create-workflow answered {created.status_code}")
            _runs(client, WARM_UP_RUNS)
            time.sleep(EXPORT_SECONDS)
            _control(child.pid, "-z")
            began = time.monotonic()
            _runs(client, RUNS)
            time.sleep(EXPORT_SECONDS)
            counted = _dump(child.pid, out)
            window = time.monotonic() - began
            _control(child.pid, "-z")
            idle_began = time.monotonic()
            time.sleep(IDLE_SECONDS)
            idle = _dump(child.pid, out)
            idle_rate = idle / (time.monotonic() - idle_began)
        return {
            "instructions_per_run_m": round((counted - idle_rate * window) / RUNS / 1e6, 4),
            "idle_instructions_per_s_m": round(idle_rate / 1e6, 3),
            "window_s": round(window, 1),
        }
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _percent(value: float, base: float) -> float:
    return round((value / base - 1) * 100, 2)


def costs(per_run: dict[str, float]) -> dict[str, float]:
    """Each configuration's cost against "off" in %, with 10 % of traces' expected one.

    A run is sampled with probability 0.1: it then costs what a run costs with every trace
    recorded, and otherwise what an unsampled one costs.
    """
    sampled = 0.9 * per_run["traces_unsampled"] + 0.1 * per_run["traces_every"]
    off = per_run["off"]
    return {
        "metrics": _percent(per_run["metrics"], off),
        "traces_unsampled": _percent(per_run["traces_unsampled"], off),
        "traces_at_10_percent_expected": _percent(sampled, off),
        "traces_every": _percent(per_run["traces_every"], off),
    }


def run(new_database: Any) -> dict[str, Any]:
    """Every configuration, ``ROUNDS`` times in turn; costs against "off" of the same round."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise RuntimeError("valgrind is not installed (Debian: apt-get install valgrind)")
    rounds: list[dict[str, Any]] = []
    with dummy_collector() as endpoint, tempfile.TemporaryDirectory() as scratch:
        for number in range(ROUNDS):
            readings = {
                mode: measure(new_database(f"instr_{number}_{mode}"), mode, endpoint, Path(scratch))
                for mode in MODES
            }
            per_run = {mode: r["instructions_per_run_m"] for mode, r in readings.items()}
            rounds.append(
                {
                    "instructions_per_run_m": per_run,
                    "cost_vs_off_percent": costs(per_run),
                    "readings": readings,
                }
            )
    return {
        "runs_per_configuration": RUNS,
        "budgets_percent": {"metrics": 3, "traces_at_10_percent_expected": 10},
        "rounds": rounds,
    }


def main() -> None:
    url = os.environ.get("WORKLOAD_BENCH_DATABASE_URL")
    if url:
        emit("instructions_bench", {"telemetry_instructions": run(lambda _: url)})
        return
    with database_server("workload-instructions-bench") as new_database:
        emit("instructions_bench", {"telemetry_instructions": run(new_database)})


if __name__ == "__main__":
    main()
