"""A zero-work worker process for the worker benchmark: ``python -m benchmarks.worker_app``.

Settings from the environment: ``WORKLOAD_URL``, ``WORKLOAD_WORKER_TOKEN``,
``BENCH_WORKER_ID``, ``BENCH_CONCURRENCY``.
"""

from __future__ import annotations

import os
from typing import Any

from workload_worker import Context, Worker

worker = Worker(
    queues=["default"],
    concurrency=int(os.environ.get("BENCH_CONCURRENCY", "16")),
    worker_id=os.environ.get("BENCH_WORKER_ID", "bench"),
    wait_seconds=5,
)


@worker.action("noop")
async def noop(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    return {}


if __name__ == "__main__":
    worker.run()
