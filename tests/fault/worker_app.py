"""A real worker process for the fault tests: ``python -m tests.fault.worker_app``.

Configured by its environment: ``WORKLOAD_URL``, ``WORKLOAD_WORKER_TOKEN``, ``FAULT_WORKER_ID``
and ``FAULT_WORKER_DIR`` (where it leaves what a test must see: every claim answer as it came
over the wire — lease tokens included, so a test can replay a dead worker's report — and a
marker file per handler that started, finished or was cancelled).

Actions:
- ``hold``: attempt 1 runs until the file ``release`` appears in ``FAULT_WORKER_DIR`` (or until
  it is cancelled); a later attempt returns at once;
- ``echo``: returns at once;
both return ``{"by": worker id, "attempt": n}``;
- ``search`` (an agent's tool): returns ``{"hits": [...], "query": q}`` for ``{"q": q}``, and
  leaves a ``finished-<attempt id>`` marker per execution (a test counts them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import httpx

from workload_sdk import AsyncClient
from workload_worker import Context, Worker

DIRECTORY = Path(os.environ.get("FAULT_WORKER_DIR", "."))
NAME = os.environ.get("FAULT_WORKER_ID", "fault-worker")


class _Recording(httpx.AsyncBaseTransport):
    """The network, with every claim answer appended to ``claims.jsonl``."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        if request.url.path.endswith("/claim") and response.status_code == 200:
            body = await response.aread()
            with (DIRECTORY / "claims.jsonl").open("ab") as log:
                log.write(body + b"\n")
            return httpx.Response(200, headers=response.headers, content=body, request=request)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _mark(kind: str, ctx: Context) -> None:
    (DIRECTORY / f"{kind}-{ctx.attempt_id}").write_text(json.dumps({"by": NAME}))


worker = Worker(
    queues=["default"],
    concurrency=int(os.environ.get("FAULT_WORKER_CONCURRENCY", "4")),
    worker_id=NAME,
    grace_seconds=5,
    wait_seconds=2,
    backoff_initial_seconds=0.1,
    backoff_max_seconds=0.5,
    client=AsyncClient(
        base_url=os.environ.get("WORKLOAD_URL"),
        token=os.environ.get("WORKLOAD_WORKER_TOKEN"),
        transport=_Recording(),
        max_retries=0,
    ),
)


@worker.action("hold")
async def hold(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    _mark("started", ctx)
    try:
        # A file another process writes: there is nothing to wait on but the file itself.
        while ctx.attempt == 1 and not (DIRECTORY / "release").exists():  # noqa: ASYNC110
            await anyio.sleep(0.05)
    except anyio.get_cancelled_exc_class():
        _mark("cancelled", ctx)
        raise
    _mark("finished", ctx)
    return {"by": NAME, "attempt": ctx.attempt}


@worker.action("echo")
async def echo(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    _mark("finished", ctx)
    return {"by": NAME, "attempt": ctx.attempt}


@worker.action("search")
async def search(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    _mark("finished", ctx)
    query = str(input.get("q", ""))
    return {"hits": [f"{query}-1", f"{query}-2"], "query": query, "kind": ctx.kind}


if __name__ == "__main__":
    worker.run()
