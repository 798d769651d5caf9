"""Worker benchmark (SPEC §15): remote tasks/s with 1, 2 and 4 worker processes, and the
queued → claimed latency with an idle worker waiting.

Starts the real service (``Coordinator``: lock, store, engine, uvicorn) on a loopback port against
a throwaway embedded PostgreSQL (or ``WORKLOAD_BENCH_DATABASE_URL``), and real worker processes
(``benchmarks.worker_app``: zero-work handlers, batched claims). Throughput: a backlog of
one-task runs is queued with no worker, then the workers start and the clock runs until every
run succeeded. Latency: one idle worker waits in a claim; runs are started one at a time and
each attempt's ``claimed_at - started_at`` (both stamped by the service's clock) is the
queued → claimed time. Prints JSON; every loop is bounded in count and time.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

from benchmarks.common import commit_baseline, database, emit, knob, percentiles_ms
from workload_api import eventloop
from workload_api.container import Container
from workload_api.settings import Settings
from workload_store_postgres.migrations import migrate_up

BACKLOG = knob("WORKLOAD_BENCH_WORKER_TASKS", 2000, 20)
LATENCY_RUNS = knob("WORKLOAD_BENCH_WORKER_LATENCY_RUNS", 200, 5)
WORKER_COUNTS = (1, 2, 4)
TIME_LIMIT_SECONDS = 120.0
OPERATOR = "bench-operator-token"
WORKER = "bench-worker-token"
ROOT = Path(__file__).resolve().parents[1]
_keys = itertools.count()


def _start_workers(url: str, count: int) -> list[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
    started = []
    for i in range(count):
        env.update(
            {"WORKLOAD_URL": url, "WORKLOAD_WORKER_TOKEN": WORKER, "BENCH_WORKER_ID": f"b{i}"}
        )
        started.append(
            subprocess.Popen(
                [sys.executable, "-m", "benchmarks.worker_app"],
                cwd=ROOT,
                env=dict(env),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    return started


def _stop(workers: list[subprocess.Popen[bytes]]) -> None:
    for process in workers:
        process.send_signal(signal.SIGTERM)
    for process in workers:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _start_runs(client: httpx.Client, n: int) -> list[str]:
    runs = []
    for _ in range(n):
        response = client.post(
            "/api/v1/workflows/noop/versions/1/runs",
            headers={"Idempotency-Key": f"wbench-{next(_keys)}"},
        )
        response.raise_for_status()
        runs.append(response.json()["run_id"])
    return runs


def _queued(database_url: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT count(*) FROM attempts WHERE status = 'queued'").fetchone()
    return int(row[0]) if row else 0


def _unfinished(database_url: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM workflow_runs WHERE status NOT IN ('succeeded', 'failed')"
        ).fetchone()
    return int(row[0]) if row else 0


def _wait(check: Any, what: str) -> float:
    began = time.perf_counter()
    deadline = began + TIME_LIMIT_SECONDS
    while not check():
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{what}: not done within {TIME_LIMIT_SECONDS} s")
        time.sleep(0.02)
    return time.perf_counter() - began


def _throughput(url: str, database_url: str, client: httpx.Client, workers: int) -> dict[str, Any]:
    _start_runs(client, BACKLOG)
    _wait(lambda: _queued(database_url) >= BACKLOG, "queueing the backlog")
    began = time.perf_counter()
    started = _start_workers(url, workers)
    try:
        _wait(lambda: _unfinished(database_url) == 0, f"{workers} worker(s) draining")
        elapsed = time.perf_counter() - began
    finally:
        _stop(started)
    return {
        "workers": workers,
        "tasks": BACKLOG,
        "seconds": round(elapsed, 3),
        "tasks_per_s": round(BACKLOG / elapsed, 1),
    }


def _latency(url: str, database_url: str, client: httpx.Client) -> dict[str, Any]:
    started = _start_workers(url, 1)
    try:
        time.sleep(2)  # the worker is up and waiting in a claim
        runs = []
        for run_id in _start_runs(client, LATENCY_RUNS):
            runs.append(run_id)
            _wait(lambda r=run_id: _unfinished(database_url) == 0, "one run")
        with psycopg.connect(database_url) as conn:
            rows = conn.execute(
                "SELECT extract(epoch FROM claimed_at - started_at) FROM attempts"
                " WHERE run_id = ANY(%s::uuid[])",
                (runs,),
            ).fetchall()
    finally:
        _stop(started)
    latencies = sorted(float(r[0]) for r in rows)
    cuts = percentiles_ms(latencies)
    return {"runs": len(latencies), **{f"queued_to_claimed_{k}": v for k, v in cuts.items()}}


def run(database_url: str) -> dict[str, Any]:
    """Serve on an ephemeral port and measure."""
    asyncio.run(migrate_up(database_url))
    baseline = commit_baseline(database_url)
    settings = Settings(
        database_url=database_url,
        operator_tokens=OPERATOR,
        worker_tokens=WORKER,
        pool_max_size=10,
    )
    container = Container(settings=settings)
    ready = threading.Event()
    coordinator = container.coordinator(
        host="127.0.0.1", port=0, on_ready=lambda _: ready.set(), handle_signals=False
    )
    thread = threading.Thread(target=lambda: eventloop.run(coordinator.run()), daemon=True)
    thread.start()
    if not ready.wait(timeout=30) or coordinator.url is None:
        raise RuntimeError("the service did not start")
    try:
        with httpx.Client(
            base_url=coordinator.url, headers={"Authorization": f"Bearer {OPERATOR}"}, timeout=30
        ) as client:
            client.post(
                "/api/v1/workflows",
                json={"id": "noop", "tasks": [{"key": "a", "action": "noop"}]},
                headers={"Idempotency-Key": "wbench-workflow"},
            ).raise_for_status()
            throughput = [
                _throughput(coordinator.url, database_url, client, n) for n in WORKER_COUNTS
            ]
            latency = _latency(coordinator.url, database_url, client)
        return {
            "throughput": throughput,
            "latency_idle_worker": latency,
            "commit_baseline": baseline,
        }
    finally:
        coordinator.stop()
        thread.join(timeout=30)


def main() -> None:
    with database("workload_worker_bench") as url:
        result = run(url)
        result["server"] = "uvicorn on 127.0.0.1, PostgreSQL over a Unix socket"
        emit("worker_bench", result)


if __name__ == "__main__":
    main()
