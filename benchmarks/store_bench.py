"""Store benchmark: create-run and commit-transition against a single-row INSERT+COMMIT baseline.

Runs on a throwaway embedded PostgreSQL (or ``WORKLOAD_BENCH_DATABASE_URL``), with 1 and 4
concurrent connections, and prints one JSON document: p50/p95/p99 latency (ms), throughput
(ops/s) and each operation's ratio to the baseline measured in the same run on the same server.
Every loop is bounded in count and time.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from benchmarks.common import database, emit, knob, throughput_stats
from workload_domain.compiler import compile_definition
from workload_domain.events import EventType
from workload_domain.ids import uuid7
from workload_domain.records import (
    EventRecord,
    NewRun,
    RunCommit,
    RunRecord,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.statuses import RunStatus, TaskStatus
from workload_store_postgres.migrations import migrate_up
from workload_store_postgres.store import PostgresStore

OPS_PER_WORKER = knob("WORKLOAD_BENCH_OPS", 400, 10)
TIME_LIMIT_SECONDS = 30.0
WORKFLOW = compile_definition(
    {
        "id": "bench",
        "tasks": [
            {"key": f"t{i}", "action": "mock", "depends_on": [f"t{i - 1}"] if i else []}
            for i in range(5)
        ],
    }
)
_ids = itertools.count(1)


def new_run() -> NewRun:
    now = datetime.now(UTC)
    run_id = uuid7(int(now.timestamp() * 1000), next(_ids).to_bytes(10, "big"))
    run = RunRecord(run_id, "bench", 1, RunStatus.PENDING, 1, {"n": 1}, False, now, now)
    tasks = tuple(
        TaskRecord(t.key, i, TaskStatus.PENDING, tuple(t.depends_on), 0, 1)
        for i, t in enumerate(WORKFLOW.tasks)
    )
    return NewRun(run, tasks, (EventRecord(1, EventType.RUN_CREATED, now),))


async def measure(workers: int, op: Callable[[int, int], Awaitable[None]]) -> dict[str, float]:
    latencies: list[float] = []
    deadline = time.perf_counter() + TIME_LIMIT_SECONDS

    async def worker(w: int) -> None:
        for i in range(OPS_PER_WORKER):
            if time.perf_counter() > deadline:
                return
            start = time.perf_counter()
            await op(w, i)
            latencies.append(time.perf_counter() - start)

    began = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(workers)))
    return throughput_stats(latencies, time.perf_counter() - began)


async def bench(url: str) -> dict[str, Any]:
    await migrate_up(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_baseline (id bigserial PRIMARY KEY, v int)")
    results: dict[str, Any] = {"ops_per_worker": OPS_PER_WORKER}
    async with PostgresStore(url, max_size=4) as store:
        now = datetime.now(UTC)
        await store.create_workflow(
            WorkflowRecord("bench", 1, "", now, now),
            VersionRecord("bench", 1, WORKFLOW.definition_hash, 5, now, WORKFLOW.document()),
        )
        for workers in (1, 4):
            conns = [await psycopg.AsyncConnection.connect(url) for _ in range(workers)]

            async def baseline(w: int, i: int, conns: list[Any] = conns) -> None:
                await conns[w].execute("INSERT INTO bench_baseline (v) VALUES (%s)", (i,))
                await conns[w].commit()

            base = await measure(workers, baseline)
            for c in conns:
                await c.close()

            async def create(w: int, i: int) -> None:
                await store.create_run(new_run())

            created = await measure(workers, create)

            snapshots = {}
            for w in range(workers):
                run = new_run()
                await store.create_run(run)
                snapshots[w] = await store.load_run(run.run.run_id)

            async def transition(w: int, i: int, snapshots: dict[int, Any] = snapshots) -> None:
                snap = snapshots[w]
                stamp = datetime.now(UTC) + timedelta(microseconds=i)
                commit = RunCommit(
                    expected_revision=snap.run.revision,
                    run=replace(snap.run, revision=snap.run.revision + 1, updated_at=stamp),
                    events=(EventRecord(snap.last_sequence + 1, EventType.RUN_RECOVERED, stamp),),
                )
                await store.commit(commit)
                snapshots[w] = replace(snap, run=commit.run, last_sequence=snap.last_sequence + 1)

            committed = await measure(workers, transition)
            results[f"connections_{workers}"] = {
                "baseline_insert_commit": base,
                "create_run": created,
                "commit_transition": committed,
                "ratio_to_baseline": {
                    "create_run_p50": round(created["p50_ms"] / base["p50_ms"], 2),
                    "commit_transition_p50": round(committed["p50_ms"] / base["p50_ms"], 2),
                    "create_run_throughput": round(
                        created["throughput_per_s"] / base["throughput_per_s"], 3
                    ),
                    "commit_transition_throughput": round(
                        committed["throughput_per_s"] / base["throughput_per_s"], 3
                    ),
                },
            }
    return results


def main() -> None:
    with database("workload_bench") as url:
        result = asyncio.run(bench(url))
        result["server"] = "PostgreSQL over a Unix socket (embedded unless configured)"
        emit("store_bench", result)


if __name__ == "__main__":
    main()
