"""What observability costs (SPEC §12): create-run throughput with telemetry off, with metrics,
with metrics and traces exported over OTLP to a local dummy collector, and the same with 10 % of
the traces sampled (``parentbased_traceidratio``, 0.1).

Each configuration runs the real service (``Coordinator``: uvicorn, the PostgreSQL store, the
engine) in a process of its own on an ephemeral loopback port, against a fresh database of the
same embedded PostgreSQL (or ``WORKLOAD_BENCH_DATABASE_URL``), and 8 clients create runs of a
one-task mock workflow. Two measures per configuration:

- throughput (runs created per second) — what SPEC §12's issue asks for, but on a machine
  shared with other work it moves by ±20 % from one round to the next;
- the service process's CPU time per run (``/proc/<pid>/stat``, from before the first request
  until every run is terminal: the request, the run's execution, the span export thread) —
  the service is bound by one core (the GIL), so this is its throughput's inverse, and much
  steadier.

The configurations alternate for ``WORKLOAD_BENCH_TELEMETRY_ROUNDS`` rounds (default 5); the
cost of a configuration is the median over the rounds of its measure against "off" in the same
round. Traces go to a collector this module serves on 127.0.0.1 (it answers every export 200
and counts the spans); the console exporter is off. Every loop is bounded in count and time.

It also measures the floor under the cost of tracing every run: the spans a run makes (counted
by the collector) times what one span costs the OpenTelemetry SDK in a tight loop of this
process — created, ended, batched, encoded and exported to the same collector — against the CPU
a run costs with telemetry off.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from dependency_injector import providers
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

from benchmarks.api_bench import CONCURRENT_CLIENTS, TIME_LIMIT_SECONDS, TOKEN
from benchmarks.common import (
    database_server,
    emit,
    knob,
    process_cpu_seconds,
    throughput_stats,
)
from workload_api import eventloop
from workload_api.container import Container
from workload_api.settings import Settings
from workload_domain.telemetry import NO_TELEMETRY
from workload_store_postgres.migrations import migrate_up

OPS_PER_CLIENT = knob("WORKLOAD_BENCH_TELEMETRY_OPS", 150, 5)
WARM_UP_PER_CLIENT = 10
"""Runs each client creates before measuring: the first requests of a process import, compile
and fill caches."""
ROUNDS = knob("WORKLOAD_BENCH_TELEMETRY_ROUNDS", 5, 1)
MODES = ("off", "metrics", "metrics+traces", "metrics+traces@10%")
FLOOR_SPANS = 20_000
"""Spans of the SDK floor's loop (flushed every thousand, so none is dropped)."""
SAMPLED = {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"}
_keys = itertools.count()


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that accepts every export (an empty ExportTraceServiceResponse)."""

    exports = 0
    received_bytes = 0
    spans = 0

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        request = ExportTraceServiceRequest.FromString(body)
        type(self).exports += 1
        type(self).received_bytes += len(body)
        type(self).spans += sum(
            len(scope.spans) for spans in request.resource_spans for scope in spans.scope_spans
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        del format, args


@contextlib.contextmanager
def dummy_collector() -> Iterator[str]:
    """A collector on 127.0.0.1 for the duration; yields its endpoint."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _container(database_url: str, mode: str) -> Container:
    settings = Settings(database_url=database_url, operator_tokens=TOKEN, pool_max_size=10)
    container = Container(settings=settings)
    if mode == "off":
        container.telemetry.override(providers.Object(NO_TELEMETRY))
    return container


def serve(database_url: str, mode: str) -> int:
    """The child process: serve until SIGTERM; print the URL once ready."""
    coordinator = _container(database_url, mode).coordinator(
        host="127.0.0.1", port=0, on_ready=lambda url: print(f"READY {url}", flush=True)
    )
    return int(eventloop.serve(coordinator.run()))


async def _create_workflow(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        created = await client.post(
            "/api/v1/workflows",
            json={"id": "bench", "tasks": [{"key": "a", "action": "mock"}]},
            headers={"Idempotency-Key": f"bench-workflow-{next(_keys)}", **_auth()},
        )
        if created.status_code != 201:
            raise RuntimeError(f"create-workflow answered {created.status_code}")


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


async def _create_runs(base_url: str, per_client: int) -> dict[str, float]:
    clients = [
        httpx.AsyncClient(base_url=base_url, headers=_auth(), timeout=30)
        for _ in range(CONCURRENT_CLIENTS)
    ]
    try:
        latencies: list[float] = []
        deadline = time.perf_counter() + TIME_LIMIT_SECONDS

        async def client_loop(client: httpx.AsyncClient) -> None:
            for _ in range(per_client):
                if time.perf_counter() > deadline:
                    return
                start = time.perf_counter()
                response = await client.post(
                    "/api/v1/workflows/bench/versions/1/runs",
                    headers={"Idempotency-Key": f"bench-{next(_keys)}"},
                )
                if response.status_code != 202:
                    raise RuntimeError(f"create-run answered {response.status_code}")
                latencies.append(time.perf_counter() - start)

        began = time.perf_counter()
        await asyncio.gather(*(client_loop(c) for c in clients))
        return throughput_stats(latencies, time.perf_counter() - began)
    finally:
        for client in clients:
            await client.aclose()


def _wait_idle(base_url: str) -> None:
    """Until every run is terminal (GET /api/v1/status), at most TIME_LIMIT_SECONDS."""
    deadline = time.monotonic() + TIME_LIMIT_SECONDS
    while time.monotonic() < deadline:
        status = httpx.get(f"{base_url}/api/v1/status", headers=_auth(), timeout=10).json()
        if status["runs_active"] == 0:
            return
        time.sleep(0.05)
    raise RuntimeError("runs were still active after the time limit")


def _measure(database_url: str, mode: str, env: dict[str, str]) -> dict[str, float]:
    asyncio.run(migrate_up(database_url))
    child = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.telemetry_bench", "serve", database_url, mode],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        if not line.startswith("READY "):
            raise RuntimeError(f"the service did not start ({line!r})")
        url = line.split()[1]
        asyncio.run(_create_workflow(url))
        asyncio.run(_create_runs(url, WARM_UP_PER_CLIENT))
        _wait_idle(url)
        cpu_before = process_cpu_seconds(child.pid)
        result = asyncio.run(_create_runs(url, OPS_PER_CLIENT))
        _wait_idle(url)
        cpu = process_cpu_seconds(child.pid) - cpu_before
        return {**result, "service_cpu_ms_per_run": round(cpu / result["ops"] * 1000, 3)}
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=30)


def _thread_cpu() -> float:
    """CPU time of this process (every thread: the span export thread too)."""
    times = os.times()
    return times.user + times.system


def sdk_floor_us_per_span(endpoint: str) -> float:
    """What one span costs the OpenTelemetry SDK, all in: start, end, batch, encode, export.

    A statement-like span (a client span with three attributes, a child of a current span),
    in a tight loop of this process, exported over OTLP/HTTP to ``endpoint``.
    """
    provider = TracerProvider()
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"))
    )
    tracer = provider.get_tracer("floor")
    attributes = {
        "db.system.name": "postgresql",
        "db.operation.name": "UPDATE",
        "db.query.summary": "commit_run",
    }
    parent = tracer.start_span("parent")
    token = otel_context.attach(trace.set_span_in_context(parent))
    try:
        began = _thread_cpu()
        for _ in range(FLOOR_SPANS // 1000):
            for _ in range(1000):
                tracer.start_span("commit_run", kind=SpanKind.CLIENT, attributes=attributes).end()
            provider.force_flush()
        return round((_thread_cpu() - began) / FLOOR_SPANS * 1_000_000, 1)
    finally:
        otel_context.detach(token)
        parent.end()
        provider.shutdown()


def _spans_measured(database_url: str, mode: str, env: dict[str, str]) -> dict[str, float]:
    """:func:`_measure`, with the spans the collector received per run while it measured."""
    before = _Collector.spans
    result = _measure(database_url, mode, env)
    # The service flushes its spans when it stops: its last ones are in by now. They are the
    # spans of every run it made (the warm-up's too) and of the workflow's creation (a few).
    runs = result["ops"] + WARM_UP_PER_CLIENT * CONCURRENT_CLIENTS
    return {**result, "spans_per_run": round((_Collector.spans - before) / runs, 2)}


def _cost(measures: list[float], off: list[float], *, higher_is_better: bool) -> float:
    """The median over rounds of a measure's cost against "off" in the same round, in %."""
    ratios = [m / o for m, o in zip(measures, off, strict=True)]
    costs = [(1 - r) if higher_is_better else (r - 1) for r in ratios]
    return round(statistics.median(costs) * 100, 1)


def run(new_database: Callable[[str], str]) -> dict[str, Any]:
    """Alternate the modes for ``ROUNDS`` rounds, each on a database of its own."""
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    with dummy_collector() as endpoint:
        floor = sdk_floor_us_per_span(endpoint)
        traced = {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        }
        for round_number in range(ROUNDS):
            for mode in MODES:
                name = "".join(c if c.isalnum() else "_" for c in mode)
                url = new_database(f"telemetry_{round_number}_{name}")
                env = {"OTEL_TRACES_EXPORTER": "none"}
                if mode.startswith("metrics+traces"):
                    env = {**traced, **(SAMPLED if mode.endswith("@10%") else {})}
                results[mode].append(_spans_measured(url, mode, env))
    throughput_off = [r["throughput_per_s"] for r in results["off"]]
    cpu_off = [r["service_cpu_ms_per_run"] for r in results["off"]]
    summary: dict[str, Any] = {}
    for mode in MODES:
        throughput = [r["throughput_per_s"] for r in results[mode]]
        cpu = [r["service_cpu_ms_per_run"] for r in results[mode]]
        summary[mode] = {
            "create_run_throughput_per_s": round(statistics.median(throughput), 1),
            "throughput_cost_vs_off_percent": _cost(
                throughput, throughput_off, higher_is_better=True
            ),
            "service_cpu_ms_per_run": round(statistics.median(cpu), 3),
            "cpu_cost_vs_off_percent": _cost(cpu, cpu_off, higher_is_better=False),
            "p50_ms": round(statistics.median(r["p50_ms"] for r in results[mode]), 3),
            "p99_ms": round(statistics.median(r["p99_ms"] for r in results[mode]), 3),
            "throughput_rounds": throughput,
            "cpu_ms_rounds": cpu,
        }
    spans_per_run = statistics.median(r["spans_per_run"] for r in results["metrics+traces"])
    floor_ms_per_run = spans_per_run * floor / 1000
    return {
        "create_run_8_clients": summary,
        "every_trace_floor": {
            "spans_per_run": spans_per_run,
            "sdk_us_per_span": floor,
            "sdk_ms_per_run": round(floor_ms_per_run, 3),
            "percent_of_off_cpu_per_run": round(
                floor_ms_per_run / statistics.median(cpu_off) * 100, 1
            ),
        },
        "runs_per_round": OPS_PER_CLIENT * CONCURRENT_CLIENTS,
        "rounds": ROUNDS,
        "otlp_exports_received": _Collector.exports,
        "otlp_bytes_received": _Collector.received_bytes,
        "otlp_spans_received": _Collector.spans,
    }


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        sys.exit(serve(sys.argv[2], sys.argv[3]))
    url = os.environ.get("WORKLOAD_BENCH_DATABASE_URL")
    if url:
        emit("telemetry_bench", {"telemetry_overhead": run(lambda _: url)})
        return
    with database_server("workload-telemetry-bench") as new_database:
        result = run(new_database)
        result["server"] = "uvicorn on 127.0.0.1, embedded PostgreSQL over a Unix socket"
        emit("telemetry_bench", {"telemetry_overhead": result})


if __name__ == "__main__":
    main()
