"""API benchmark over loopback: create-run and get-run latency (serial) and throughput (8 clients).

Starts the real service (uvicorn, the PostgreSQL store, the engine) on an ephemeral loopback port
against a throwaway embedded PostgreSQL (or ``WORKLOAD_BENCH_DATABASE_URL``), and prints JSON.
Runs use a one-task mock workflow, so the engine's work stays small next to the HTTP path. Every
loop is bounded in count and time.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import psycopg

from benchmarks.common import commit_baseline, database, emit, knob, throughput_stats
from benchmarks.rawhttp import RawHttp
from workload_api import eventloop
from workload_api.container import Container
from workload_api.settings import Settings
from workload_store_postgres.migrations import migrate_up

SERIAL_OPS = knob("WORKLOAD_BENCH_API_OPS", 300, 10)
CONCURRENT_CLIENTS = 8
CONCURRENT_OPS_PER_CLIENT = knob("WORKLOAD_BENCH_API_CONCURRENT_OPS", 100, 5)
TIME_LIMIT_SECONDS = 60.0
TOKEN = "bench-operator-token"
_keys = itertools.count()


async def _measure(
    clients: list[httpx.AsyncClient], ops: int, op: Callable[[httpx.AsyncClient], Awaitable[None]]
) -> dict[str, float]:
    latencies: list[float] = []
    deadline = time.perf_counter() + TIME_LIMIT_SECONDS

    async def worker(client: httpx.AsyncClient) -> None:
        for _ in range(ops):
            if time.perf_counter() > deadline:
                return
            start = time.perf_counter()
            await op(client)
            latencies.append(time.perf_counter() - start)

    began = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in clients))
    return throughput_stats(latencies, time.perf_counter() - began)


async def _bench(base_url: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    clients = [
        httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30)
        for _ in range(CONCURRENT_CLIENTS)
    ]
    try:
        first = clients[0]
        created = await first.post(
            "/api/v1/workflows",
            json={"id": "bench", "tasks": [{"key": "a", "action": "mock"}]},
            headers={"Idempotency-Key": "bench-workflow"},
        )
        created.raise_for_status()
        run_ids: list[str] = []

        async def create_run(client: httpx.AsyncClient) -> None:
            response = await client.post(
                "/api/v1/workflows/bench/versions/1/runs",
                headers={"Idempotency-Key": f"bench-{next(_keys)}"},
            )
            if response.status_code != 202:
                raise RuntimeError(f"create-run answered {response.status_code}")
            run_ids.append(response.json()["run_id"])

        async def get_run(client: httpx.AsyncClient) -> None:
            response = await client.get(f"/api/v1/runs/{run_ids[next(_keys) % len(run_ids)]}")
            if response.status_code != 200:
                raise RuntimeError(f"get-run answered {response.status_code}")

        async def livez(client: httpx.AsyncClient) -> None:
            response = await client.get("/livez")
            if response.status_code != 200:
                raise RuntimeError(f"livez answered {response.status_code}")

        # Request by request, httpx and the raw client in turn: both in the same conditions
        # (the runs created before still executing), a connection of each per operation.
        serial: dict[str, dict[str, float]] = {}
        serial_raw: dict[str, dict[str, float]] = {}
        host, port = first.base_url.host, first.base_url.port or 80
        for name, op, method, path in (
            ("create_run", create_run, "POST", "/api/v1/workflows/bench/versions/1/runs"),
            ("get_run", get_run, "GET", None),
            ("livez", livez, "GET", "/livez"),
        ):
            with RawHttp(host, port, headers) as raw:
                serial[name], serial_raw[name] = await _measure_pair(
                    first, op, raw, method, path, run_ids
                )
        return {
            "serial": serial,
            "serial_raw_client": serial_raw,
            f"concurrent_{CONCURRENT_CLIENTS}_clients": {
                "create_run": await _measure(clients, CONCURRENT_OPS_PER_CLIENT, create_run),
                "get_run": await _measure(clients, CONCURRENT_OPS_PER_CLIENT, get_run),
            },
        }
    finally:
        for client in clients:
            await client.aclose()


async def _measure_pair(
    client: httpx.AsyncClient,
    op: Callable[[httpx.AsyncClient], Awaitable[None]],
    raw: RawHttp,
    method: str,
    path: str | None,
    run_ids: list[str],
) -> tuple[dict[str, float], dict[str, float]]:
    """Serial requests, ``op`` by httpx and the same by the raw client (:mod:`benchmarks.rawhttp`)
    in turn; ``path`` None reads the runs created so far."""
    by_httpx: list[float] = []
    by_raw: list[float] = []
    expected = 202 if method == "POST" else 200
    deadline = time.perf_counter() + TIME_LIMIT_SECONDS
    for _ in range(SERIAL_OPS):
        if time.perf_counter() > deadline:
            break
        start = time.perf_counter()
        await op(client)
        by_httpx.append(time.perf_counter() - start)
        n = next(_keys)
        target = path or f"/api/v1/runs/{run_ids[n % len(run_ids)]}"
        headers = {"Idempotency-Key": f"bench-{n}"} if method == "POST" else None
        seconds, status, _ = raw.timed(method, target, headers)
        if status != expected:
            raise RuntimeError(f"{method} {target} answered {status}, not {expected}")
        by_raw.append(seconds)
    # Interleaved, each client's throughput is over the time its own requests took.
    return (
        throughput_stats(by_httpx, sum(by_httpx)),
        throughput_stats(by_raw, sum(by_raw)),
    )


async def _baseline(database_url: str) -> dict[str, float]:
    """A single-row INSERT+COMMIT on the same server, serial: the floor of any durable write."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        await conn.execute("CREATE TABLE IF NOT EXISTS bench_baseline (id bigserial PRIMARY KEY)")
        await conn.commit()
        latencies: list[float] = []
        began = time.perf_counter()
        for _ in range(SERIAL_OPS):
            start = time.perf_counter()
            await conn.execute("INSERT INTO bench_baseline DEFAULT VALUES")
            await conn.commit()
            latencies.append(time.perf_counter() - start)
        return throughput_stats(latencies, time.perf_counter() - began)


def _ratios(result: dict[str, Any], base: dict[str, float]) -> dict[str, float]:
    serial = result["serial"]
    return {
        "create_run_p50": round(serial["create_run"]["p50_ms"] / base["p50_ms"], 2),
        "get_run_p50": round(serial["get_run"]["p50_ms"] / base["p50_ms"], 2),
        "create_run_throughput": round(
            serial["create_run"]["throughput_per_s"] / base["throughput_per_s"], 3
        ),
    }


def run(database_url: str) -> dict[str, Any]:
    """Serve on an ephemeral port and measure, next to a PostgreSQL commit baseline."""
    asyncio.run(migrate_up(database_url))
    base = asyncio.run(_baseline(database_url))
    ceiling = commit_baseline(database_url)
    container = Container(
        settings=Settings(database_url=database_url, operator_tokens=TOKEN, pool_max_size=10)
    )
    # The service exactly as `workload serve` runs it (lock, store, engine, uvicorn), on port 0.
    ready = threading.Event()
    coordinator = container.coordinator(
        host="127.0.0.1", port=0, on_ready=lambda _: ready.set(), handle_signals=False
    )
    thread = threading.Thread(target=lambda: eventloop.run(coordinator.run()), daemon=True)
    thread.start()
    if not ready.wait(timeout=30) or coordinator.url is None:
        raise RuntimeError("the service did not start")
    try:
        result = asyncio.run(_bench(coordinator.url))
        result["baseline_insert_commit"] = base
        result["commit_baseline"] = ceiling
        result["ratio_to_baseline"] = _ratios(result, base)
        return result
    finally:
        coordinator.stop()
        thread.join(timeout=30)


def main() -> None:
    with database("workload_api_bench") as url:
        result = run(url)
        result["server"] = "uvicorn on 127.0.0.1, PostgreSQL over a Unix socket"
        emit("api_bench", result)


if __name__ == "__main__":
    main()
