"""Where execution off the API's event loop pays (issue 31, scope 3): create and read latency
while runs execute, with the API and the engine in one process or in two.

Three configurations on an embedded PostgreSQL 18 of its own (never
``WORKLOAD_BENCH_DATABASE_URL``: each configuration and round needs a fresh database):

- ``idle``: one ``workload serve``; no other load. The floor of a request's latency.
- ``one``: one ``workload serve`` that both serves the API and executes; a background load
  creates one-task runs through it at a fixed rate, so it executes them meanwhile.
- ``split``: the same ``workload serve`` executes, and a second one started with
  ``WORKLOAD_STANDBY=true`` (SPEC §14: serves the whole API, executes nothing) takes every
  request — the background load's and the prober's. The executing process learns of each run
  by ``LISTEN/NOTIFY``, as it does today of runs created through a standby.

The background load is open-loop (a fixed ``WORKLOAD_BENCH_SPLIT_RATE`` runs/s over 4 clients in
a process of its own), so both configurations execute the same work. The prober, in this
process, creates a run and then reads it, one request at a time, and times each. Reported per
configuration: create and read p50/p95, the background rate achieved, and each serve process's
CPU per background run. Every loop is bounded in count and time.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from benchmarks.common import Serve, database_server, emit, knob, percentiles_ms
from workload_store_postgres.migrations import migrate_up

PROBES = knob("WORKLOAD_BENCH_SPLIT_PROBES", 400, 20)
RATE = knob("WORKLOAD_BENCH_SPLIT_RATE", 120, 20)
ROUNDS = knob("WORKLOAD_BENCH_SPLIT_ROUNDS", 3, 1)
BACKGROUND_CLIENTS = 4
TIME_LIMIT_SECONDS = 120.0
TOKEN = "bench-operator-token"
WORKFLOW = "split-bench"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
_keys = itertools.count()


def _background(url: str, rate: int, stop: Any, counts: Any) -> None:
    """Create one-task runs through ``url`` at ``rate`` runs/s until ``stop`` is set."""

    async def client(n: int) -> None:
        interval = BACKGROUND_CLIENTS / rate
        next_at = time.perf_counter() + n * interval / BACKGROUND_CLIENTS
        deadline = time.perf_counter() + TIME_LIMIT_SECONDS
        async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=30) as c:
            i = 0
            while not stop.is_set() and time.perf_counter() < deadline:
                delay = next_at - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                next_at += interval
                i += 1
                answer = await c.post(
                    f"/api/v1/workflows/{WORKFLOW}/versions/1/runs",
                    headers={"Idempotency-Key": f"bg-{n}-{i}"},
                )
                with counts.get_lock():
                    counts[0 if answer.status_code == 202 else 1] += 1

    async def main() -> None:
        await asyncio.gather(*(client(n) for n in range(BACKGROUND_CLIENTS)))

    asyncio.run(main())


def _define(url: str) -> None:
    with httpx.Client(base_url=url, headers=HEADERS, timeout=30) as c:
        answer = c.post(
            "/api/v1/workflows",
            json={"id": WORKFLOW, "tasks": [{"key": "a", "action": "mock", "input": {}}]},
            headers={"Idempotency-Key": "split-bench-workflow"},
        )
        answer.raise_for_status()


def _probe(url: str) -> dict[str, Any]:
    creates: list[float] = []
    reads: list[float] = []
    deadline = time.perf_counter() + TIME_LIMIT_SECONDS
    with httpx.Client(base_url=url, headers=HEADERS, timeout=30) as c:
        for _ in range(PROBES):
            if time.perf_counter() > deadline:
                break
            began = time.perf_counter()
            created = c.post(
                f"/api/v1/workflows/{WORKFLOW}/versions/1/runs",
                headers={"Idempotency-Key": f"probe-{next(_keys)}"},
            )
            creates.append(time.perf_counter() - began)
            created.raise_for_status()
            began = time.perf_counter()
            c.get(f"/api/v1/runs/{created.json()['run_id']}").raise_for_status()
            reads.append(time.perf_counter() - began)
    return {"create_ms": percentiles_ms(creates), "read_ms": percentiles_ms(reads)}


@contextlib.contextmanager
def _serving(database_url: str, scratch: Path, standby: bool) -> Iterator[list[Serve]]:
    env = {"WORKLOAD_OPERATOR_TOKENS": TOKEN}
    started: list[Serve] = []
    try:
        leader = Serve(database_url, scratch / "leader.log", env).start()
        started.append(leader)
        leader.wait_ready()
        if standby:
            second = Serve(
                database_url, scratch / "standby.log", {**env, "WORKLOAD_STANDBY": "true"}
            ).start()
            started.append(second)
            second.wait_ready()
        yield started
    finally:
        for serve in started:
            serve.stop()


def _configuration(new_database: Any, name: str, round_: int) -> dict[str, Any]:
    url = new_database(f"split_{name}_{round_}")
    asyncio.run(migrate_up(url))
    with (
        tempfile.TemporaryDirectory(prefix="workload-split-bench-") as scratch,
        _serving(url, Path(scratch), standby=name == "split") as serves,
    ):
        api = serves[-1].url
        _define(api)
        _probe(api)  # warm: connections, prepared statements, imports on first use
        cpu_before = [s.cpu_seconds() for s in serves]
        stop = multiprocessing.Event()
        counts = multiprocessing.Array("l", 2)
        background = None
        if name != "idle":
            background = multiprocessing.Process(
                target=_background, args=(api, RATE, stop, counts), daemon=True
            )
            background.start()
            time.sleep(2.0)  # the load reaches its rate before probing
        began = time.perf_counter()
        with counts.get_lock():
            accepted_before = counts[0]
        result = _probe(api)
        elapsed = time.perf_counter() - began
        with counts.get_lock():
            accepted = counts[0] - accepted_before
            refused = counts[1]
        stop.set()
        if background is not None:
            background.join(timeout=30)
        cpu = [s.cpu_seconds() - b for s, b in zip(serves, cpu_before, strict=True)]
    result["background_runs_per_s"] = round(accepted / elapsed, 1)
    result["background_refused"] = refused
    result["serve_cpu_s"] = [round(c, 2) for c in cpu]
    return result


def run() -> dict[str, Any]:
    """Every configuration, alternating, ``ROUNDS`` times."""
    rounds: dict[str, list[dict[str, Any]]] = {"idle": [], "one": [], "split": []}
    with database_server("workload-split-bench") as new_database:
        for round_ in range(ROUNDS):
            for name, results in rounds.items():
                results.append(_configuration(new_database, name, round_))
    return {
        "probes": PROBES,
        "background_rate": RATE,
        "rounds": rounds,
        "server": "workload serve on 127.0.0.1 (split: a standby takes the requests), "
        "embedded PostgreSQL over a Unix socket",
    }


def main() -> None:
    emit("split_bench", run())


if __name__ == "__main__":
    main()
