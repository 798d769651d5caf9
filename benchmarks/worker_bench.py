"""Worker benchmark (SPEC §15): remote tasks/s with 1, 2 and 4 worker processes, and the
queued → claimed latency with an idle worker waiting.

The service is a real ``workload serve`` process on a loopback port (``common.Serve``) against a
throwaway embedded PostgreSQL (or ``WORKLOAD_BENCH_DATABASE_URL``), the workers real processes
(``benchmarks.worker_app``: zero-work handlers, batched claims), and this process only creates
runs and watches the database through one kept connection: nothing it does runs in the
service's process.

Throughput: a backlog of one-task runs is queued with no worker, then the workers start.
``tasks_per_s`` is the backlog over the window the service stamped, from the first claim to the
last attempt's end (a worker's start-up is not in it); ``tasks_per_s_from_spawn`` counts from the
workers' spawn instead. CPU a task: the service's, and the workers' less their start-up (one
worker's CPU after its start, measured alone and idle, times the worker count).

Latency: one idle worker waits in a claim; runs are started one at a time, each after the
previous one ended and a pause for the worker to wait again, and each attempt's
``claimed_at - started_at`` (both stamped by the service's clock) is the queued → claimed time.
Prints JSON; every loop is bounded in count and time.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg

from benchmarks.common import (
    Serve,
    commit_baseline,
    database,
    emit,
    knob,
    percentiles_ms,
    process_cpu_seconds,
)
from workload_store_postgres.migrations import migrate_up

BACKLOG = knob("WORKLOAD_BENCH_WORKER_TASKS", 2000, 20)
LATENCY_RUNS = knob("WORKLOAD_BENCH_WORKER_LATENCY_RUNS", 200, 5)
WORKER_COUNTS = (1, 2, 4)
TIME_LIMIT_SECONDS = 120.0
POLL_SECONDS = 0.01
IDLE_START_SECONDS = 3.0  # a worker is up and waiting in a claim by then
OPERATOR = "bench-operator-token"
WORKER = "bench-worker-token"
ROOT = Path(__file__).resolve().parents[1]
_keys = itertools.count()


def _start_workers(url: str, count: int) -> list[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
    started: list[subprocess.Popen[bytes]] = []
    try:
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
    except BaseException:
        _stop(started)
        raise
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


class _Watch:
    """The database, read through one kept connection (no connection a poll)."""

    def __init__(self, database_url: str) -> None:
        self._conn = psycopg.connect(database_url, autocommit=True)

    def close(self) -> None:
        self._conn.close()

    def count(self, sql: str, *params: object) -> int:
        row = self._conn.execute(sql, params).fetchone()
        return int(row[0]) if row else 0

    def queued(self) -> int:
        return self.count("SELECT count(*) FROM attempts WHERE status = 'queued'")

    def unfinished(self) -> int:
        return self.count(
            "SELECT count(*) FROM workflow_runs"
            " WHERE status NOT IN ('succeeded', 'failed', 'canceled')"
        )

    def window(self, runs: list[str]) -> float:
        """Seconds from the first claim to the last attempt's end, by the service's clock."""
        row = self._conn.execute(
            "SELECT extract(epoch FROM max(finished_at) - min(claimed_at)) FROM attempts"
            " WHERE run_id = ANY(%s::uuid[])",
            (runs,),
        ).fetchone()
        if row is None or row[0] is None:
            raise RuntimeError("no attempt of the phase was claimed and finished")
        return float(row[0])

    def queued_to_claimed(self, runs: list[str]) -> list[float]:
        rows = self._conn.execute(
            "SELECT extract(epoch FROM claimed_at - started_at) FROM attempts"
            " WHERE run_id = ANY(%s::uuid[])",
            (runs,),
        ).fetchall()
        return sorted(float(r[0]) for r in rows)


def _wait(check: Callable[[], bool], what: str) -> float:
    began = time.perf_counter()
    deadline = began + TIME_LIMIT_SECONDS
    while not check():
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{what}: not done within {TIME_LIMIT_SECONDS} s")
        time.sleep(POLL_SECONDS)
    return time.perf_counter() - began


def _worker_start_cpu(url: str) -> float:
    """CPU seconds one worker process spends starting, measured alone with nothing to do."""
    started = _start_workers(url, 1)
    try:
        time.sleep(IDLE_START_SECONDS)
        return process_cpu_seconds(started[0].pid)
    finally:
        _stop(started)


def _throughput(
    serve: Serve, watch: _Watch, client: httpx.Client, workers: int, start_cpu: float
) -> dict[str, Any]:
    runs = _start_runs(client, BACKLOG)
    _wait(lambda: watch.queued() >= BACKLOG, "queueing the backlog")
    serve_cpu = serve.cpu_seconds()
    began = time.perf_counter()
    started = _start_workers(serve.url, workers)
    try:
        _wait(lambda: watch.unfinished() == 0, f"{workers} worker(s) draining")
        elapsed = time.perf_counter() - began
        worker_cpu = sum(process_cpu_seconds(p.pid) for p in started)
        serve_cpu = serve.cpu_seconds() - serve_cpu
    finally:
        _stop(started)
    window = watch.window(runs)
    return {
        "workers": workers,
        "tasks": BACKLOG,
        "seconds": round(window, 3),
        "tasks_per_s": round(BACKLOG / window, 1),
        "seconds_from_spawn": round(elapsed, 3),
        "tasks_per_s_from_spawn": round(BACKLOG / elapsed, 1),
        "serve_cpu_ms_per_task": round(1000 * serve_cpu / BACKLOG, 3),
        "worker_cpu_ms_per_task": round(1000 * (worker_cpu - workers * start_cpu) / BACKLOG, 3),
    }


def _latency(url: str, watch: _Watch, client: httpx.Client) -> dict[str, Any]:
    started = _start_workers(url, 1)
    try:
        time.sleep(IDLE_START_SECONDS)
        runs = []
        for _ in range(LATENCY_RUNS):
            runs.extend(_start_runs(client, 1))
            _wait(lambda: watch.unfinished() == 0, "one run")
            time.sleep(0.05)  # the worker's next claim is waiting again
    finally:
        _stop(started)
    cuts = percentiles_ms(watch.queued_to_claimed(runs))
    return {"runs": len(runs), **{f"queued_to_claimed_{k}": v for k, v in cuts.items()}}


def run(database_url: str) -> dict[str, Any]:
    """Serve in a process of its own and measure."""
    asyncio.run(migrate_up(database_url))
    baseline = commit_baseline(database_url)
    env = {"WORKLOAD_OPERATOR_TOKENS": OPERATOR, "WORKLOAD_WORKER_TOKENS": WORKER}
    watch = _Watch(database_url)
    with tempfile.TemporaryDirectory(prefix="workload-worker-bench-") as scratch:
        serve = Serve(database_url, Path(scratch) / "serve.log", env)
        try:
            serve.start()
            serve.wait_ready()
            with httpx.Client(
                base_url=serve.url, headers={"Authorization": f"Bearer {OPERATOR}"}, timeout=30
            ) as client:
                client.post(
                    "/api/v1/workflows",
                    json={"id": "noop", "tasks": [{"key": "a", "action": "noop"}]},
                    headers={"Idempotency-Key": "wbench-workflow"},
                ).raise_for_status()
                start_cpu = _worker_start_cpu(serve.url)
                throughput = [
                    _throughput(serve, watch, client, n, start_cpu) for n in WORKER_COUNTS
                ]
                latency = _latency(serve.url, watch, client)
        finally:
            serve.stop()
            watch.close()
    return {
        "throughput": throughput,
        "latency_idle_worker": latency,
        "worker_start_cpu_s": round(start_cpu, 3),
        "commit_baseline": baseline,
    }


def main() -> None:
    with database("workload_worker_bench") as url:
        result = run(url)
        result["server"] = "workload serve on 127.0.0.1, embedded PostgreSQL over a Unix socket"
        emit("worker_bench", result)


if __name__ == "__main__":
    main()
