"""Readiness and memory benchmark (SPEC §15): ``/readyz`` after a restart with a backlog of
non-terminal runs, and the service's memory per active run.

The method of the peer harness's ``workload_ready_bench.py``, self-contained: a throwaway
embedded PostgreSQL (or ``WORKLOAD_BENCH_DATABASE_URL``), real ``workload serve`` processes on
loopback ports, stopped by their pid.

1. The one-connection ``INSERT``+``COMMIT`` on the same server (the run's commit baseline).
2. ``workload serve`` with ``WORKLOAD_MAX_CONCURRENT_ATTEMPTS=1`` → seconds from spawn to
   ``/readyz`` 200 with an empty database, and its RSS.
3. 8 clients submit ``WORKLOAD_BENCH_READY_RUNS`` (5,000) runs of a 1-task mock workflow whose
   task sleeps ``WORKLOAD_BENCH_READY_SLEEP_MS`` (10 minutes): one attempt at a time, so every
   run stays non-terminal, held in memory by the service → RSS again. Memory per active run =
   the RSS growth ÷ the runs unfinished (the harness's figure; it also counts what serving
   5,000 requests left behind in the allocator).
4. SIGTERM (the graceful stop), then the runs are counted by status in the database.
5. ``workload serve`` again with the default settings → seconds from spawn to ``/readyz`` 200
   with the backlog (the "ready" log line says how many runs it recovered), RSS at ready and
   ``WORKLOAD_BENCH_READY_SETTLE_S`` later; memory per recovered run = that RSS minus step 2's,
   ÷ the runs unfinished (no requests served in between). Then SIGTERM; the backlog is not
   drained (the database is thrown away).

Prints JSON; every loop is bounded in count and time.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

from benchmarks.common import Serve, commit_baseline, database, emit, knob
from workload_store_postgres.migrations import migrate_up

RUNS = knob("WORKLOAD_BENCH_READY_RUNS", 5000, 40)
SLEEP_MS = knob("WORKLOAD_BENCH_READY_SLEEP_MS", 600_000, 600_000)
SETTLE_SECONDS = knob("WORKLOAD_BENCH_READY_SETTLE_S", 3, 1)
CLIENTS = 8
PHASE_TIMEOUT_SECONDS = 600.0
TOKEN = "bench-operator-token"
WORKFLOW = "backlog"
_keys = itertools.count()


def _counts(database_url: str) -> dict[str, int]:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT status, count(*) FROM workflow_runs WHERE workflow_id = %s GROUP BY status",
            (WORKFLOW,),
        ).fetchall()
    return {str(status): int(n) for status, n in rows}


def _unfinished(counts: dict[str, int]) -> int:
    return sum(n for s, n in counts.items() if s not in ("succeeded", "failed", "canceled"))


async def _submit(url: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    remaining = RUNS
    accepted = 0
    errors: dict[str, int] = {}
    deadline = time.monotonic() + PHASE_TIMEOUT_SECONDS
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=60) as c:
        response = await c.post(
            "/api/v1/workflows",
            json={
                "id": WORKFLOW,
                "tasks": [{"key": "a", "action": "mock", "input": {"sleep_ms": SLEEP_MS}}],
            },
            headers={"Idempotency-Key": "wf-backlog"},
        )
        response.raise_for_status()

        async def caller() -> None:
            nonlocal remaining, accepted
            while remaining > 0 and time.monotonic() < deadline:
                remaining -= 1
                answer = await c.post(
                    f"/api/v1/workflows/{WORKFLOW}/versions/1/runs",
                    headers={"Idempotency-Key": f"ready-{next(_keys)}"},
                )
                if answer.status_code == 202:
                    accepted += 1
                else:
                    errors[str(answer.status_code)] = errors.get(str(answer.status_code), 0) + 1

        began = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(CLIENTS)))
        elapsed = time.perf_counter() - began
    return {"accepted": accepted, "errors": errors, "req_per_s": round(accepted / elapsed, 1)}


def run(database_url: str) -> dict[str, Any]:
    """Build the backlog, restart, and measure readiness and memory."""
    asyncio.run(migrate_up(database_url))
    result: dict[str, Any] = {"runs": RUNS, "sleep_ms": SLEEP_MS, "clients": CLIENTS}
    result["commit_baseline"] = commit_baseline(database_url)
    with tempfile.TemporaryDirectory(prefix="workload-ready-bench-") as scratch:
        log = Path(scratch) / "serve.log"
        env = {"WORKLOAD_OPERATOR_TOKENS": TOKEN}
        first = Serve(database_url, log, {**env, "WORKLOAD_MAX_CONCURRENT_ATTEMPTS": "1"}).start()
        try:
            result["ready_s_empty"] = round(first.wait_ready(), 3)
            time.sleep(SETTLE_SECONDS)
            rss_empty = first.rss_kb()
            result["submit"] = asyncio.run(_submit(first.url))
            time.sleep(SETTLE_SECONDS)
            rss_backlog = first.rss_kb()
            in_memory = _unfinished(_counts(database_url))
        finally:
            result["stop_first"] = first.stop()
        counts = _counts(database_url)
        unfinished = _unfinished(counts)
        second = Serve(database_url, log, env).start()
        try:
            result["ready_s_with_backlog"] = round(second.wait_ready(), 3)
            rss_ready = second.rss_kb()
            time.sleep(SETTLE_SECONDS)
            rss_settled = second.rss_kb()
            ready = second.ready_line() or {}
        finally:
            result["stop_second"] = second.stop()
    result.update(
        {
            "statuses_at_restart": counts,
            "unfinished_at_restart": unfinished,
            "recovered_runs": ready.get("recovered_runs"),
            "rss_kb": {
                "ready_empty": rss_empty,
                "with_backlog_submitted": rss_backlog,
                "restarted_at_ready": rss_ready,
                "restarted_settled": rss_settled,
            },
            # KiB → KB (1,000 bytes) per run, as SPEC §15 states the target in KB.
            "memory_kb_per_active_run": round(
                (rss_backlog - rss_empty) * 1.024 / max(1, in_memory), 2
            ),
            "memory_kb_per_recovered_run": round(
                (rss_settled - rss_empty) * 1.024 / max(1, unfinished), 2
            ),
            "server": "workload serve on 127.0.0.1, embedded PostgreSQL over a Unix socket",
        }
    )
    return result


def main() -> None:
    with database("workload_ready_bench") as url:
        emit("ready_bench", run(url))


if __name__ == "__main__":
    main()
