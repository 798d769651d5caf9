"""What one request's fixed work costs in one process (issue 31): each part alone, in a loop.

- ``authenticate``: ``Authenticator.authenticate`` of an operator bearer token among four
  configured tokens, the same token every call (what a client does).
- ``parse_body``: ``parse_json_object`` of a create-run body (inputs of a few fields, nested).
- ``render_run``: the JSON response of a run as ``GET /api/v1/runs/{id}`` answers it.
- ``render_list``: the JSON response of a page of 100 runs.
- ``row_json_stdlib`` and ``row_json_orjson``: the JSON row arrays one commit of a 1-task run
  sends (its task, attempt and two events: ids, datetimes, nested JSONB), encoded by the
  stdlib's encoder the store used before ADR 0038 and by ``workload_store_postgres._json.dumps``.
- ``replace_run`` and ``evolve_run``: a run record copied with two changes (its revision and
  ``updated_at``, as every commit's plan does) by ``dataclasses.replace`` and by
  ``workload_domain.evolve.evolve``.
- ``http_h11`` and ``http_httptools``: one kept-alive ``GET`` with a bearer token through the
  service's guarded uvicorn protocol of each parser (``WORKLOAD_HTTP_PARSER``, ADR 0036), to an
  app that answers a small JSON at once: parsing the request, the ASGI task, writing the
  response, on an in-memory transport (no socket).

Each part runs ``WORKLOAD_BENCH_HOTPATH_ROUNDS`` rounds (default 9) of a fixed count of calls;
the figure is the median over the rounds of microseconds per call (the machine may be shared:
the rounds say how much it moved). Compare two commits by running it in each.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import uvicorn
from psycopg.types.json import Jsonb
from pydantic import SecretStr
from uvicorn.server import ServerState

from benchmarks.common import emit, knob
from workload_api._http_server import HttpParser, guarded_protocol
from workload_api.auth import Authenticator, Role
from workload_api.jsonbody import parse_json_object
from workload_api.jsonresponse import JSONResponse
from workload_api.service_key import ServiceKey
from workload_domain.evolve import evolve
from workload_domain.records import RunRecord
from workload_domain.statuses import RunStatus
from workload_engine.memory import InMemoryStore
from workload_store_postgres._json import dumps as row_dumps
from workload_store_postgres._json import stdlib_dumps

ROUNDS = knob("WORKLOAD_BENCH_HOTPATH_ROUNDS", 9, 2)
CALLS = knob("WORKLOAD_BENCH_HOTPATH_CALLS", 10_000, 100)
"""Calls per round (a page of 100 runs: a fiftieth of them)."""

RUN: dict[str, Any] = {
    "id": "run_01JD6Z8Q3W9V5X2K7M4N8P0R1S",
    "workflow_id": "nightly-report",
    "workflow_version": 3,
    "status": "succeeded",
    "inputs": {"date": "2026-12-01", "regions": ["eu", "us", "ap"], "limit": 100},
    "outputs": {"report": {"rows": 1234, "url": "s3://bucket/reports/2026-12-01.csv"}},
    "created_at": "2026-12-01T10:00:00.123456Z",
    "started_at": "2026-12-01T10:00:00.223456Z",
    "finished_at": "2026-12-01T10:00:03.923456Z",
    "revision": 7,
    "error": None,
    "labels": {"team": "data", "note": "naïve café ✓"},
}
BODY = json.dumps(
    {
        "inputs": {"date": "2026-12-01", "regions": ["eu", "us", "ap"], "limit": 100},
        "labels": {"team": "data"},
        "priority": 5,
    }
)

_AT = datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC)
_RUN_ID = uuid.UUID("0193a2b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b")
ROWS: list[dict[str, Any]] = [
    {
        "run_id": _RUN_ID,
        "key": "summarize",
        "status": "succeeded",
        "attempts": 1,
        "created_at": _AT,
        "updated_at": _AT + timedelta(milliseconds=40),
        "output": Jsonb({"summary": "3 rows, naïve café ✓", "rows": [1, 2, 3]}),
        "error": None,
    },
    {
        "run_id": _RUN_ID,
        "task_key": "summarize",
        "attempt": 1,
        "status": "succeeded",
        "started_at": _AT,
        "ended_at": _AT + timedelta(milliseconds=40),
        "lease_expires_at": None,
        "executed_by": "replica-1",
        "error": None,
    },
    *(
        {
            "run_id": _RUN_ID,
            "seq": n,
            "type": kind,
            "at": _AT + timedelta(milliseconds=40),
            "data": Jsonb({"task_key": "summarize", "attempt": 1}),
            "epoch": 3,
        }
        for n, kind in ((4, "task.succeeded"), (5, "run.succeeded"))
    ),
]


RECORD = RunRecord(
    run_id=str(_RUN_ID),
    workflow_id="nightly-report",
    version=3,
    status=RunStatus.RUNNING,
    revision=6,
    input={"date": "2026-12-01"},
    cancel_requested=False,
    created_at=_AT,
    updated_at=_AT,
    started_at=_AT,
    traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
)


def _stdlib_rows() -> str:
    """The row arrays' encoder before ADR 0038."""
    return stdlib_dumps(ROWS)


def _per_call_us(call: Callable[[], object], calls: int = CALLS) -> dict[str, Any]:
    call()
    rounds: list[float] = []
    for _ in range(ROUNDS):
        began = time.perf_counter()
        for _ in range(calls):
            call()
        rounds.append((time.perf_counter() - began) / calls * 1_000_000)
    return {
        "us_per_call": round(statistics.median(rounds), 2),
        "rounds_us": [round(r, 2) for r in rounds],
    }


def _authenticate() -> dict[str, Any]:
    authenticator = Authenticator(
        viewers=[SecretStr("v" * 40)],
        operators=[SecretStr("o" * 40), SecretStr("p" * 40)],
        workers=[SecretStr("w" * 40)],
        key=ServiceKey(InMemoryStore(), SecretStr("k" * 32)),
    )
    header = "Bearer " + "o" * 40

    async def loop() -> dict[str, Any]:
        await authenticator.authenticate(header, Role.OPERATOR)
        rounds: list[float] = []
        for _ in range(ROUNDS):
            began = time.perf_counter()
            for _ in range(CALLS):
                await authenticator.authenticate(header, Role.OPERATOR)
            rounds.append((time.perf_counter() - began) / CALLS * 1_000_000)
        return {
            "us_per_call": round(statistics.median(rounds), 2),
            "rounds_us": [round(r, 2) for r in rounds],
        }

    return asyncio.run(loop())


REQUEST = (
    b"GET /api/v1/runs/run_01JD6Z8Q3W9V5X2K7M4N8P0R1S HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
    b"Accept: */*\r\nAccept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\n"
    b"User-Agent: python-httpx/0.28.1\r\nAuthorization: Bearer " + b"o" * 40 + b"\r\n\r\n"
)


class _Transport(asyncio.Transport):
    """A connected socket's transport, in memory: what the server writes is counted."""

    def __init__(self) -> None:
        super().__init__()
        self.written = 0
        self._closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name in ("peername", "sockname"):
            return ("127.0.0.1", 8080)
        return {"socket": None}.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += len(data)

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    body = b'{"id":"run_01JD6Z8Q3W9V5X2K7M4N8P0R1S","status":"succeeded"}'
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _http(parser: HttpParser) -> dict[str, Any]:
    async def loop() -> dict[str, Any]:
        config = uvicorn.Config(_app, lifespan="off", log_config=None, access_log=False)
        config.load()
        state = ServerState()
        protocol = guarded_protocol(parser, 10.0)(  # type: ignore[call-arg]
            config=config, server_state=state, app_state={}
        )
        transport = _Transport()
        protocol.connection_made(transport)

        async def one() -> None:
            protocol.data_received(REQUEST)
            await asyncio.gather(*state.tasks)

        await one()
        rounds: list[float] = []
        for _ in range(ROUNDS):
            began = time.perf_counter()
            for _ in range(CALLS):
                await one()
            rounds.append((time.perf_counter() - began) / CALLS * 1_000_000)
        assert not transport.is_closing(), "the connection was closed"
        protocol.connection_lost(None)
        return {
            "us_per_call": round(statistics.median(rounds), 2),
            "rounds_us": [round(r, 2) for r in rounds],
        }

    return asyncio.run(loop())


def run() -> dict[str, Any]:
    page = {"items": [{**RUN, "id": f"run_{n:026d}"} for n in range(100)], "next_cursor": "c"}
    return {
        "authenticate": _authenticate(),
        "parse_body": _per_call_us(lambda: parse_json_object(BODY)),
        "render_run": _per_call_us(lambda: JSONResponse(RUN).body),
        "render_list": _per_call_us(lambda: JSONResponse(page).body, max(CALLS // 50, 2)),
        "row_json_stdlib": _per_call_us(_stdlib_rows),
        "row_json_orjson": _per_call_us(lambda: row_dumps(ROWS)),
        "replace_run": _per_call_us(
            lambda: dataclasses.replace(RECORD, revision=7, updated_at=_AT)
        ),
        "evolve_run": _per_call_us(lambda: evolve(RECORD, revision=7, updated_at=_AT)),
        "http_h11": _http("h11"),
        "http_httptools": _http("httptools"),
        "rounds": ROUNDS,
        "calls_per_round": CALLS,
    }


def main() -> None:
    emit("hotpath_bench", {"hotpath": run()})


if __name__ == "__main__":
    main()
