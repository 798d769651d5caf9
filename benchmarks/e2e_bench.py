"""End-to-end benchmark (SPEC §15): whole runs of a 1-task workflow and of a 10-task chain
(a → b → … → j), zero-work mock tasks, executed by the service itself.

Starts a real ``workload serve`` process on a loopback port against a throwaway embedded
PostgreSQL (or ``WORKLOAD_BENCH_DATABASE_URL``), and measures the one-connection single-row
``INSERT``+``COMMIT`` on the same server first (the commit ceiling the 10-task figure is a ratio
to). Per repetition and workflow (the method of the peer harness's ``workload_e2e_bench.py``,
the DBOS comparison's counterpart): 8 clients submit ``WORKLOAD_BENCH_E2E_RUNS`` runs as fast as
they can, then the database is polled (every 20 ms, one connection) until none of that
workflow's runs is unfinished; tasks/s = tasks of succeeded runs ÷ the time from the first
submission to that answer. Each workflow first runs ``WORKLOAD_BENCH_E2E_WARMUP`` runs unmeasured.
The serve process's CPU per task comes from ``/proc/<pid>/stat``; its write transactions per
task from ``pg_snapshot_xmax(pg_current_snapshot())`` before and after (a transaction takes an
id only when it writes: the group commit's measure). Prints JSON (medians over
``WORKLOAD_BENCH_E2E_REPS`` repetitions, and every repetition); every loop is bounded in count
and time.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

from benchmarks.common import Serve, commit_baseline, database, emit, knob, next_xid
from workload_store_postgres.migrations import migrate_up

RUNS = knob("WORKLOAD_BENCH_E2E_RUNS", 300, 10)
WARMUP = knob("WORKLOAD_BENCH_E2E_WARMUP", 20, 2)
REPS = knob("WORKLOAD_BENCH_E2E_REPS", 3, 1)
CLIENTS = 8
CHAIN_LENGTHS = (1, 10)
PHASE_TIMEOUT_SECONDS = 300.0
POLL_SECONDS = 0.02
TOKEN = "bench-operator-token"
_keys = itertools.count()


def chain(length: int) -> list[dict[str, Any]]:
    """``length`` zero-work mock tasks, each depending on the one before."""
    keys = "abcdefghijklmnopqrstuvwxyz"
    return [
        {
            "key": keys[i],
            "action": "mock",
            "input": {"sleep_ms": 0},
            **({"depends_on": [keys[i - 1]]} if i else {}),
        }
        for i in range(length)
    ]


def _counts(conn: psycopg.Connection[Any], workflow: str) -> dict[str, int]:
    rows = conn.execute(
        "SELECT status, count(*) FROM workflow_runs WHERE workflow_id = %s GROUP BY status",
        (workflow,),
    ).fetchall()
    return {str(status): int(n) for status, n in rows}


def _unfinished(counts: dict[str, int]) -> int:
    return sum(n for s, n in counts.items() if s not in ("succeeded", "failed", "canceled"))


async def _submit(client: httpx.AsyncClient, workflow: str, n: int) -> dict[str, Any]:
    """``CLIENTS`` callers start ``n`` runs between them as fast as they can."""
    remaining = n
    errors: dict[str, int] = {}
    deadline = time.monotonic() + PHASE_TIMEOUT_SECONDS

    async def caller() -> None:
        nonlocal remaining
        while remaining > 0 and time.monotonic() < deadline:
            remaining -= 1
            response = await client.post(
                f"/api/v1/workflows/{workflow}/versions/1/runs",
                headers={"Idempotency-Key": f"e2e-{next(_keys)}"},
            )
            if response.status_code != 202:
                key = str(response.status_code)
                errors[key] = errors.get(key, 0) + 1

    await asyncio.gather(*(caller() for _ in range(CLIENTS)))
    return errors


async def _phase(
    client: httpx.AsyncClient, conn: psycopg.Connection[Any], serve: Serve, workflow: str, n: int
) -> dict[str, Any]:
    cpu_before = serve.cpu_seconds()
    xids_before = next_xid(conn)
    began = time.perf_counter()
    errors = await _submit(client, workflow, n)
    submitted = time.perf_counter()
    deadline = time.monotonic() + PHASE_TIMEOUT_SECONDS
    counts = _counts(conn, workflow)
    while _unfinished(counts) and time.monotonic() < deadline:
        await asyncio.sleep(POLL_SECONDS)
        counts = _counts(conn, workflow)
    elapsed = time.perf_counter() - began
    cpu = serve.cpu_seconds() - cpu_before
    writes = next_xid(conn) - xids_before
    return {
        "write_transactions": writes,
        "errors": errors,
        "statuses": counts,
        "drained": _unfinished(counts) == 0,
        "wall_s": round(elapsed, 3),
        "submit_s": round(submitted - began, 3),
        "runs_per_s": round(counts.get("succeeded", 0) / elapsed, 1),
        "serve_cpu_s": round(cpu, 3),
    }


async def _bench(serve: Serve, database_url: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    limits = httpx.Limits(max_connections=CLIENTS + 1, max_keepalive_connections=CLIENTS + 1)
    rows: list[dict[str, Any]] = []
    async with httpx.AsyncClient(
        base_url=serve.url, headers=headers, limits=limits, timeout=60
    ) as client:
        with psycopg.connect(database_url, autocommit=True) as conn:

            async def workflow(name: str, length: int) -> None:
                response = await client.post(
                    "/api/v1/workflows",
                    json={"id": name, "tasks": chain(length)},
                    headers={"Idempotency-Key": f"wf-{name}"},
                )
                response.raise_for_status()

            for length in CHAIN_LENGTHS:
                await workflow(f"warm-{length}", length)
                await _phase(client, conn, serve, f"warm-{length}", WARMUP)
            for rep in range(REPS):
                for length in CHAIN_LENGTHS:
                    name = f"e2e-{rep}-{length}"
                    await workflow(name, length)
                    row = await _phase(client, conn, serve, name, RUNS)
                    succeeded = row["statuses"].get("succeeded", 0)
                    row.update(
                        rep=rep,
                        tasks=length,
                        tasks_per_s=round(row["runs_per_s"] * length, 1),
                        write_transactions_per_task=round(
                            row["write_transactions"] / max(1, succeeded * length), 3
                        ),
                        serve_cpu_ms_per_task=round(
                            row["serve_cpu_s"] * 1000 / max(1, succeeded * length), 3
                        ),
                    )
                    rows.append(row)
    summary = {}
    for length in CHAIN_LENGTHS:
        mine = [r for r in rows if r["tasks"] == length]
        summary[f"tasks_{length}"] = {
            "runs_per_s": statistics.median(r["runs_per_s"] for r in mine),
            "tasks_per_s": statistics.median(r["tasks_per_s"] for r in mine),
            "tasks_per_s_each_rep": [r["tasks_per_s"] for r in mine],
            "serve_cpu_ms_per_task": statistics.median(r["serve_cpu_ms_per_task"] for r in mine),
            "write_transactions_per_task": statistics.median(
                r["write_transactions_per_task"] for r in mine
            ),
            "not_succeeded": sum(RUNS - r["statuses"].get("succeeded", 0) for r in mine),
            "undrained": sum(1 for r in mine if not r["drained"]),
        }
    return {"summary": summary, "reps": rows}


def run(database_url: str) -> dict[str, Any]:
    """Measure the commit ceiling, then serve and measure whole runs."""
    asyncio.run(migrate_up(database_url))
    baseline = commit_baseline(database_url)
    with tempfile.TemporaryDirectory(prefix="workload-e2e-bench-") as scratch:
        serve = Serve(
            database_url, Path(scratch) / "serve.log", {"WORKLOAD_OPERATOR_TOKENS": TOKEN}
        ).start()
        try:
            ready_s = serve.wait_ready()
            result = asyncio.run(_bench(serve, database_url))
        finally:
            stopped = serve.stop()
    return {
        "runs_per_phase": RUNS,
        "clients": CLIENTS,
        "reps": REPS,
        "warmup": WARMUP,
        "commit_baseline": baseline,
        "ready_s_empty": round(ready_s, 3),
        "serve_stop": stopped,
        **result,
        "server": "workload serve on 127.0.0.1, embedded PostgreSQL over a Unix socket",
    }


def main() -> None:
    with database("workload_e2e_bench") as url:
        emit("e2e_bench", run(url))


if __name__ == "__main__":
    main()
