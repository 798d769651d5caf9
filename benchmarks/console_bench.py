"""Console benchmark: a run page with forty ~1 MiB outputs, rendered on a thread or on the loop.

Issue 33 (D3) measured a 40 MiB run page and ``/livez`` taking 1.36 s while six such pages
rendered. This benchmark builds that run with the service in process, on an embedded PostgreSQL
(or ``WORKLOAD_BENCH_DATABASE_URL``): forty remote tasks, each completed by a worker with an
output of about 1 MiB. Then, for the page rendered on a worker thread (the console's way) and
on the event loop (``Console(threaded=False)``), it prints:

- ``run_page``: the run page's size and its serial read latency;
- ``lag_during_renders``: how late a 5 ms timer on the event loop fires while six clients read
  the run page at once, over the same time (p50/p95/p99 and the worst, in ms) — the delay every
  other request, stream and claim of the process sees;
- ``small_page``: the serial read latency of a small page (the runs list of one run), where a
  thread's hand-off is the whole difference.

Run: ``uv run nox -s bench -- console`` (named only), or ``python -m benchmarks.console_bench``.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import httpx

from benchmarks.common import database, emit, knob, percentiles_ms
from workload_api.container import Container
from workload_api.settings import Settings
from workload_store_postgres.migrations import migrate_up

TASKS = 40
BIG = 1_000_000
READS = knob("WORKLOAD_BENCH_CONSOLE_READS", 30, 3)
PARALLEL = 6
LAG_SECONDS = 0.005
TIME_LIMIT_SECONDS = 60.0
OPERATOR = "bench-operator-token"
WORKER = "bench-worker-token"


async def _big_run(client: httpx.AsyncClient) -> str:
    operator = {"Authorization": f"Bearer {OPERATOR}"}
    worker = {"Authorization": f"Bearer {WORKER}"}
    tasks = [{"key": f"t{n:02d}", "action": "resize"} for n in range(TASKS)]
    created = await client.post(
        "/api/v1/workflows",
        json={"id": "big", "tasks": tasks},
        headers={**operator, "Idempotency-Key": "bench-workflow"},
    )
    created.raise_for_status()
    started = await client.post(
        "/api/v1/workflows/big/versions/1/runs",
        headers={**operator, "Idempotency-Key": "bench-run"},
    )
    started.raise_for_status()
    run_id: str = started.json()["run_id"]
    done = 0
    deadline = time.perf_counter() + TIME_LIMIT_SECONDS
    while done < TASKS and time.perf_counter() < deadline:
        body = {"queues": ["default"], "actions": ["resize"], "max_attempts": 10}
        claimed = await client.post("/api/v1/workers/bench/claim", json=body, headers=worker)
        claimed.raise_for_status()
        for item in claimed.json()["attempts"]:
            report = {"lease_token": item["lease_token"], "output": {"blob": "x" * BIG}}
            sent = await client.post(
                f"/api/v1/attempts/{item['attempt_id']}/complete", json=report, headers=worker
            )
            sent.raise_for_status()
            done += 1
    return run_id


async def _reads(client: httpx.AsyncClient, path: str, count: int) -> tuple[list[float], int]:
    latencies: list[float] = []
    size = 0
    deadline = time.perf_counter() + TIME_LIMIT_SECONDS
    for _ in range(count):
        if time.perf_counter() > deadline:
            break
        began = time.perf_counter()
        answer = await client.get(path)
        latencies.append(time.perf_counter() - began)
        answer.raise_for_status()
        size = len(answer.content)
    return latencies, size


async def _lag_during(client: httpx.AsyncClient, path: str) -> dict[str, Any]:
    stop = asyncio.Event()
    lags: list[float] = []

    async def ticker() -> None:
        while not stop.is_set():
            began = time.perf_counter()
            await asyncio.sleep(LAG_SECONDS)
            lags.append(time.perf_counter() - began - LAG_SECONDS)

    ticking = asyncio.create_task(ticker())
    began = time.perf_counter()
    await asyncio.gather(*(_reads(client, path, max(READS // 3, 2)) for _ in range(PARALLEL)))
    elapsed = time.perf_counter() - began
    stop.set()
    await ticking
    return {
        "seconds": round(elapsed, 3),
        "ticks": len(lags),
        **percentiles_ms(lags),
        "max_ms": round(max(lags) * 1000, 3),
    }


async def _mode(url: str, threaded: bool, run_id: str | None) -> tuple[str, dict[str, Any]]:
    settings = Settings(
        database_url=url, operator_tokens=OPERATOR, worker_tokens=WORKER, max_concurrent_attempts=16
    )
    container = Container(settings=settings)
    service = container.service()
    async with service.running():
        console = container.console()
        console.threaded = threaded
        transport = httpx.ASGITransport(app=container.app())
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", timeout=120
        ) as client:
            if run_id is None:
                run_id = await _big_run(client)
            principal = await container.authenticator().identify(OPERATOR)
            assert principal is not None
            client.cookies.set("workload_session", await container.sessions().issue(principal))
            page = f"/ui/runs/{run_id}"
            await _reads(client, page, 1)  # the templates load at the first page
            latencies, size = await _reads(client, page, READS)
            small, small_size = await _reads(client, "/ui/runs", READS * 5)
            lag = await _lag_during(client, page)
    return run_id, {
        "run_page": {"bytes": size, "reads": len(latencies), **percentiles_ms(latencies)},
        "lag_during_renders": lag,
        "small_page": {
            "bytes": small_size,
            "reads": len(small),
            **percentiles_ms(small),
            "mean_ms": round(statistics.fmean(small) * 1000, 3),
        },
    }


def main() -> None:
    """Measure both ways of rendering (one run, one database) and print JSON."""
    with database("workload_console_bench") as url:
        asyncio.run(migrate_up(url))
        run_id, threaded = asyncio.run(_mode(url, True, None))
        _, on_the_loop = asyncio.run(_mode(url, False, run_id))
    result = {
        "tasks": TASKS,
        "output_bytes": BIG,
        "parallel_readers": PARALLEL,
        "threaded": threaded,
        "on_the_loop": on_the_loop,
    }
    emit("console_bench", result)


if __name__ == "__main__":
    main()
