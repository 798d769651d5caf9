"""OpenTelemetry traces (SPEC §12): one trace from the SDK through the run to the worker.

The spans are recorded in memory (``conftest.py``); the service runs in-process with the
same tracer provider as the SDK and the worker SDK in this test.
"""

from __future__ import annotations

import io
import itertools
import json
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.observability.scrape import parse
from tests.plugins.live_api import WORKER_TOKEN, LiveApi
from tests.waiting import wait_until
from workload_api.container import Container, use_memory_store
from workload_api.context import ACCESS_LOGGER, JsonFormatter
from workload_api.settings import Settings
from workload_api.telemetry import Metrics, ServiceTelemetry, traceparent_of
from workload_domain.records import RunRecord
from workload_domain.statuses import RunStatus
from workload_worker import Context, Worker

V1 = "/api/v1"
RUNS_ROUTE = f"{V1}/workflows/{{workflow_id}}/versions/{{version}}/runs"
CLIENT_TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
_keys = itertools.count()


def idem() -> dict[str, str]:
    return {"Idempotency-Key": f"tracing-{next(_keys)}"}


def named(spans: Sequence[ReadableSpan], name: str, kind: SpanKind | None = None) -> ReadableSpan:
    found = [s for s in spans if s.name == name and (kind is None or s.kind is kind)]
    assert len(found) == 1, f"{len(found)} spans named {name!r}: {[s.name for s in spans]}"
    return found[0]


def parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.trace_id)


@contextmanager
def worker_serving(api: LiveApi, worker: Worker) -> Iterator[None]:
    thread = threading.Thread(target=worker.run, name="traced-worker")
    thread.start()
    try:
        yield
    finally:
        worker.stop()
        thread.join(15)
        assert not thread.is_alive()


def test_one_trace_from_the_sdk_through_the_run_to_the_worker(
    traced_api: LiveApi, spans: InMemorySpanExporter
) -> None:
    definition = {
        "id": "traced",
        "tasks": [
            {"key": "prep", "action": "mock"},
            {"key": "r", "action": "resize", "depends_on": ["prep"]},
        ],
    }
    worker = Worker(client=traced_api.async_sdk(WORKER_TOKEN), worker_id="w-traced", wait_seconds=1)
    seen: list[str | None] = []

    @worker.action("resize")
    async def resize(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        seen.append(ctx.traceparent)
        return {"resized": True}

    with traced_api.sdk() as client, worker_serving(traced_api, worker):
        client.workflows.create(definition)
        run = client.runs.start("traced", version=1)
        assert client.wait_for_run(run.run_id, timeout=20).status == "succeeded"

    def run_span_ended() -> Sequence[ReadableSpan] | None:
        finished = spans.get_finished_spans()
        return finished if any(s.name == "run traced" for s in finished) else None

    finished = wait_until(run_span_ended, message="the run's span never ended")
    sdk = named(finished, f"POST {RUNS_ROUTE}", SpanKind.CLIENT)
    server = named(finished, f"POST {RUNS_ROUTE}", SpanKind.SERVER)
    run_span = named(finished, "run traced")
    local = named(finished, "attempt prep")
    remote = named(finished, "attempt r")
    handler = named(finished, "handle resize", SpanKind.CONSUMER)
    chain = [sdk, server, run_span, local, remote, handler]
    assert len({trace_id(s) for s in chain}) == 1, "not one trace"

    # SDK request → HTTP server → run (its child, and linked to it) → attempts → the handler.
    assert parent_of(sdk) is None
    assert parent_of(server) == span_id(sdk)
    assert parent_of(run_span) == span_id(server)
    assert [link.context.span_id for link in run_span.links] == [span_id(server)]
    assert dict(run_span.links[0].attributes or {}) == {"workload.link": "created_by"}
    assert parent_of(local) == span_id(run_span)
    assert parent_of(remote) == span_id(run_span)
    assert parent_of(handler) == span_id(remote)
    assert remote.context is not None
    assert seen == [traceparent_of(remote.context)]

    # The worker's report is the handler's child, on both sides of the wire.
    report_route = f"POST {V1}/attempts/{{attempt_id}}/complete"
    report = named(finished, report_route, SpanKind.CLIENT)
    received = named(finished, report_route, SpanKind.SERVER)
    assert parent_of(report) == span_id(handler)
    assert parent_of(received) == span_id(report)

    attributes = {s.name: dict(s.attributes or {}) for s in (server, run_span, remote, handler)}
    assert attributes[f"POST {RUNS_ROUTE}"]["http.route"] == RUNS_ROUTE
    assert attributes[f"POST {RUNS_ROUTE}"]["http.response.status_code"] == 202
    assert attributes["run traced"]["workload.run_id"] == run.run_id
    assert attributes["run traced"]["workload.run.status"] == "succeeded"
    assert attributes["attempt r"]["workload.worker_id"] == "w-traced"
    assert attributes["attempt r"]["workload.attempt.status"] == "succeeded"
    assert attributes["handle resize"]["workload.outcome"] == "completed"
    assert [e.name for e in remote.events] == ["claimed"]
    assert dict(local.attributes or {})["workload.attempt.status"] == "succeeded"


def test_a_failed_attempt_marks_its_span(traced_api: LiveApi, spans: InMemorySpanExporter) -> None:
    body = {
        "id": "broken",
        "tasks": [{"key": "a", "action": "mock", "input": {"fail_always": True}}],
    }
    assert traced_api.operator.post(f"{V1}/workflows", json=body, headers=idem()).status_code == 201
    started = traced_api.operator.post(f"{V1}/workflows/broken/versions/1/runs", headers=idem())
    assert traced_api.wait_for_run(started.json()["run_id"])["status"] == "failed"
    finished = wait_until(
        lambda: [s for s in spans.get_finished_spans() if s.name == "run broken"],
        message="the run's span never ended",
    )
    run_span = finished[0]
    attempt = named(spans.get_finished_spans(), "attempt a")
    assert attempt.status.status_code is StatusCode.ERROR
    assert dict(attempt.attributes or {})["error.type"] == "mock_failure"
    assert run_span.status.status_code is StatusCode.ERROR


# -- traceparent accepted on requests --------------------------------------------------------


def _claim_remote(api: LiveApi, headers: dict[str, str]) -> dict[str, Any]:
    body = {"id": f"tp-{next(_keys)}", "tasks": [{"key": "r", "action": "resize"}]}
    assert api.operator.post(f"{V1}/workflows", json=body, headers=idem()).status_code == 201
    url = f"{V1}/workflows/{body['id']}/versions/1/runs"
    assert api.operator.post(url, headers={**idem(), **headers}).status_code == 202
    claim = {"queues": ["default"], "actions": ["resize"], "wait_seconds": 5}

    def claimed() -> list[dict[str, Any]]:
        answer = api.worker.post(f"{V1}/workers/w1/claim", json=claim, timeout=30)
        items: list[dict[str, Any]] = answer.json()["attempts"]
        return items

    (item,) = wait_until(claimed, message="nothing to claim")
    return item


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"traceparent": CLIENT_TRACEPARENT}, CLIENT_TRACEPARENT),
        ({"traceparent": "00-not-a-trace-context-01"}, None),
        ({"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, None),
        ({}, None),
    ],
    ids=["valid", "malformed", "zero-trace-id", "absent"],
)
def test_without_tracing_the_callers_context_reaches_the_worker(
    live_api: LiveApi, headers: dict[str, str], expected: str | None
) -> None:
    item = _claim_remote(live_api, headers)
    assert item["traceparent"] == expected


def test_with_tracing_the_worker_continues_the_attempt_span(
    traced_api: LiveApi, spans: InMemorySpanExporter
) -> None:
    item = _claim_remote(traced_api, {"traceparent": CLIENT_TRACEPARENT})
    version, trace_hex, parent_hex, flags = item["traceparent"].split("-")
    assert (version, trace_hex, flags) == ("00", CLIENT_TRACEPARENT.split("-")[1], "01")
    server = next(s for s in spans.get_finished_spans() if s.name == f"POST {RUNS_ROUTE}")
    assert server.parent is not None
    assert f"{server.parent.span_id:016x}" == CLIENT_TRACEPARENT.split("-")[2]
    assert parent_hex != CLIENT_TRACEPARENT.split("-")[2]  # the attempt's own span


# -- logs carry the trace ------------------------------------------------------------------------


def _formatted(message: str) -> dict[str, Any]:
    record = logging.LogRecord("workload.test", logging.INFO, __file__, 1, message, None, None)
    entry: dict[str, Any] = json.loads(JsonFormatter().format(record))
    return entry


def test_log_lines_carry_the_current_span(tracer_provider: TracerProvider) -> None:
    outside = _formatted("outside")
    assert "trace_id" not in outside
    assert "span_id" not in outside
    tracer = tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("work") as span:
        entry = _formatted("inside")
    context = span.get_span_context()
    assert entry["trace_id"] == f"{context.trace_id:032x}"
    assert entry["span_id"] == f"{context.span_id:016x}"
    assert {"time", "level", "logger", "message"} <= set(entry)


def test_the_access_line_carries_the_requests_trace(
    traced_api: LiveApi, spans: InMemorySpanExporter
) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    access = logging.getLogger(ACCESS_LOGGER)
    level = access.level
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    try:
        response = traced_api.viewer.get(f"{V1}/workflows", headers={"X-Request-ID": "trace-me"})
    finally:
        access.removeHandler(handler)
        access.setLevel(level)
    assert response.status_code == 200
    (line,) = [json.loads(x) for x in stream.getvalue().splitlines()]
    server = named(spans.get_finished_spans(), f"GET {V1}/workflows", SpanKind.SERVER)
    assert line["trace_id"] == f"{trace_id(server):032x}"
    assert line["span_id"] == f"{span_id(server):016x}"
    # The access line keeps every field it had.
    assert {k: line[k] for k in ("request_id", "method", "route", "status")} == {
        "request_id": "trace-me",
        "method": "GET",
        "route": f"{V1}/workflows",
        "status": 200,
    }
    assert {"duration_ms", "error_code"} <= set(line)


# -- the agent runtime's hooks: GenAI and tool spans ---------------------------------------------


def _run_record() -> RunRecord:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return RunRecord(
        "0194d6a3-0e5c-7b8e-9c2d-4f6a8b0c1d2e",
        "agentic",
        1,
        RunStatus.PENDING,
        1,
        {},
        False,
        now,
        now,
    )


def test_a_model_call_is_a_genai_span_with_its_usage(
    tracer_provider: TracerProvider, spans: InMemorySpanExporter
) -> None:
    metrics = Metrics()
    telemetry = ServiceTelemetry(metrics, tracer_provider)
    with (
        telemetry.run(_run_record()),
        telemetry.attempt(_run_record().run_id, "agent", 1, "agent"),
        telemetry.model_call(provider="mock", model="mock-1") as call,
    ):
        call.usage(input_tokens=12, output_tokens=5)
    chat = named(spans.get_finished_spans(), "chat mock-1")
    attempt = named(spans.get_finished_spans(), "attempt agent")
    assert chat.kind is SpanKind.CLIENT
    assert parent_of(chat) == span_id(attempt)
    assert dict(chat.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "mock",
        "gen_ai.system": "mock",
        "gen_ai.request.model": "mock-1",
        "workload.model.endpoint": "mock",
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 5,
    }
    samples = parse(metrics.exposition().decode())
    assert samples[("workload_model_calls_total", (("outcome", "ok"), ("provider", "mock")))] == 1
    tokens = {
        dict(labels)["direction"]: value
        for (name, labels), value in samples.items()
        if name == "workload_model_tokens_total"
    }
    assert tokens == {"input": 12, "output": 5}


@pytest.mark.parametrize(
    ("how", "error_type"),
    [("outcome", "model_unavailable"), ("raise", "TimeoutError")],
    ids=["reported", "raised"],
)
def test_a_failed_model_call_is_an_error(
    tracer_provider: TracerProvider, spans: InMemorySpanExporter, how: str, error_type: str
) -> None:
    metrics = Metrics()
    telemetry = ServiceTelemetry(metrics, tracer_provider)
    expected = pytest.raises(TimeoutError) if how == "raise" else _nothing()
    with expected, telemetry.model_call(provider="openai", model="gpt-x") as call:
        if how == "raise":
            raise TimeoutError("the model did not answer")
        call.outcome("model_unavailable")
    chat = named(spans.get_finished_spans(), "chat gpt-x")
    assert chat.status.status_code is StatusCode.ERROR
    assert dict(chat.attributes or {})["error.type"] == error_type
    samples = parse(metrics.exposition().decode())
    assert (
        samples[("workload_model_calls_total", (("outcome", "error"), ("provider", "openai")))] == 1
    )


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def test_a_model_call_s_span_names_its_endpoint_s_provider_and_the_metrics_its_endpoint(
    tracer_provider: TracerProvider, spans: InMemorySpanExporter
) -> None:
    """Two endpoints of one kind: the span says ``openai`` for both, and which endpoint."""
    metrics = Metrics()
    telemetry = ServiceTelemetry(
        metrics, tracer_provider, endpoint_providers={"local": "openai", "claude": "anthropic"}
    )
    for endpoint, model in (("local", "llama3"), ("claude", "claude-x"), ("gone", "m")):
        with telemetry.model_call(provider=endpoint, model=model):
            pass
    attributes = {
        name: dict(named(spans.get_finished_spans(), name).attributes or {})
        for name in ("chat llama3", "chat claude-x", "chat m")
    }
    assert [
        (a["gen_ai.provider.name"], a["gen_ai.system"], a["workload.model.endpoint"])
        for a in attributes.values()
    ] == [
        ("openai", "openai", "local"),
        ("anthropic", "anthropic", "claude"),
        ("gone", "gone", "gone"),
    ]
    samples = parse(metrics.exposition().decode())
    for endpoint in ("local", "claude", "gone"):
        labels = (("outcome", "ok"), ("provider", endpoint))
        assert samples[("workload_model_calls_total", labels)] == 1


def test_the_service_s_telemetry_knows_each_configured_endpoint_s_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLAUDE_KEY", "sk-ant-test")
    endpoints = {
        "local": {"provider": "openai", "base_url": "http://127.0.0.1:9/v1"},
        "claude": {"provider": "anthropic", "api_key_env": "CLAUDE_KEY"},
    }
    container = use_memory_store(
        Container(settings=Settings(model_endpoints=json.dumps(endpoints)))
    )
    telemetry = container.telemetry()
    assert isinstance(telemetry, ServiceTelemetry)
    assert telemetry.endpoint_providers == {"local": "openai", "claude": "anthropic"}


def test_a_tool_call_is_an_execute_tool_span_and_a_tool_attempt(
    tracer_provider: TracerProvider, spans: InMemorySpanExporter
) -> None:
    metrics = Metrics()
    telemetry = ServiceTelemetry(metrics, tracer_provider)
    with telemetry.tool_call("search_docs", call_id="call-1") as call:
        call.finished("succeeded", None)
    span = named(spans.get_finished_spans(), "execute_tool search_docs")
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search_docs",
        "gen_ai.tool.call.id": "call-1",
        "workload.attempt.status": "succeeded",
    }
    samples = parse(metrics.exposition().decode())
    key = ("workload_attempts_finished_total", (("kind", "tool"), ("status", "succeeded")))
    assert samples[key] == 1


def test_hooks_count_without_tracing() -> None:
    metrics = Metrics()
    telemetry = ServiceTelemetry(metrics)
    with telemetry.model_call(provider="mock", model="m") as call:
        call.usage(input_tokens=3, output_tokens=None)
    samples = parse(metrics.exposition().decode())
    assert (
        samples[("workload_model_tokens_total", (("direction", "input"), ("provider", "mock")))]
        == 3
    )
    assert trace.get_current_span().get_span_context().is_valid is False


def test_an_agent_runs_model_and_tool_calls_as_genai_spans_in_its_attempt(
    traced_api: LiveApi, spans: InMemorySpanExporter
) -> None:
    script = [
        {"tool_calls": [{"name": "calc", "arguments": {"output": {"n": 1}}}]},
        {"content": "done"},
    ]
    spec = {
        "model": "mock",
        "prompt": "go",
        "tools": [{"name": "calc", "action": "mock"}],
        "script": script,
    }
    definition = {"id": "agentic", "tasks": [{"key": "agent", "action": "agent", "input": spec}]}
    with traced_api.sdk() as client:
        client.workflows.create(definition)
        run = client.runs.start("agentic", version=1)
        assert client.wait_for_run(run.run_id, timeout=20).status == "succeeded"

    def ended() -> Sequence[ReadableSpan] | None:
        finished = spans.get_finished_spans()
        return finished if any(s.name == "run agentic" for s in finished) else None

    finished = wait_until(ended, message="the run's span never ended")
    attempt = named(finished, "attempt agent")
    chats = [s for s in finished if s.name == "chat mock"]
    tool = named(finished, "execute_tool calc")
    assert len(chats) == 2
    assert all(parent_of(c) == span_id(attempt) for c in chats)
    assert parent_of(tool) == span_id(attempt)
    first = dict(chats[0].attributes or {})
    assert first["gen_ai.provider.name"] == "mock"
    assert first["gen_ai.request.model"] == "mock"
    assert isinstance(first["gen_ai.usage.input_tokens"], int)
    assert isinstance(first["gen_ai.usage.output_tokens"], int)
    assert first["gen_ai.usage.input_tokens"] > 0
    assert first["gen_ai.usage.output_tokens"] > 0
    assert dict(tool.attributes or {})["gen_ai.tool.call.id"] == "call_1_1"
