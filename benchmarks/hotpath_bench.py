"""What one request's fixed work costs in one process (issue 31): each part alone, in a loop.

- ``authenticate``: ``Authenticator.authenticate`` of an operator bearer token among four
  configured tokens, the same token every call (what a client does).
- ``parse_body``: ``parse_json_object`` of a create-run body (inputs of a few fields, nested).
- ``render_run``: the JSON response of a run as ``GET /api/v1/runs/{id}`` answers it.
- ``render_list``: the JSON response of a page of 100 runs.

Each part runs ``WORKLOAD_BENCH_HOTPATH_ROUNDS`` rounds (default 9) of a fixed count of calls;
the figure is the median over the rounds of microseconds per call (the machine may be shared:
the rounds say how much it moved). Compare two commits by running it in each.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from pydantic import SecretStr

from benchmarks.common import emit, knob
from workload_api.auth import Authenticator, Role
from workload_api.jsonbody import parse_json_object
from workload_api.jsonresponse import JSONResponse
from workload_api.service_key import ServiceKey
from workload_engine.memory import InMemoryStore

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


def run() -> dict[str, Any]:
    page = {"items": [{**RUN, "id": f"run_{n:026d}"} for n in range(100)], "next_cursor": "c"}
    return {
        "authenticate": _authenticate(),
        "parse_body": _per_call_us(lambda: parse_json_object(BODY)),
        "render_run": _per_call_us(lambda: JSONResponse(RUN).body),
        "render_list": _per_call_us(lambda: JSONResponse(page).body, max(CALLS // 50, 2)),
        "rounds": ROUNDS,
        "calls_per_round": CALLS,
    }


def main() -> None:
    emit("hotpath_bench", {"hotpath": run()})


if __name__ == "__main__":
    main()
