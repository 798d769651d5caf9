"""The run's and attempt's span scopes, and the metrics' labelled children kept at hand.

``ServiceTelemetry.run`` and ``.attempt`` return small classes (not ``@contextmanager``
generators: an unsampled run's whole cost is theirs, SPEC §12); these tests pin what the
generators did: the span is current inside and known by its key, the context is restored
after, an interruption or an attempt left unfinished is said on the span, and the untraced
paths hand out a shared scope that any number of attempts may enter at once.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBasedTraceIdRatio

from workload_api.telemetry import Metrics
from workload_api.telemetry._service import _MAX_HANDED, ServiceTelemetry
from workload_api.telemetry._spans import context_of
from workload_domain.records import RunRecord
from workload_domain.statuses import RunStatus
from workload_domain.telemetry import NO_TELEMETRY, UNTRACED_ATTEMPT

NOW = datetime(2026, 12, 4, tzinfo=UTC)
UNSAMPLED_PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


class Interrupted(BaseException):
    """Not an ``Exception``: as a cancellation or a shutdown is."""


@pytest.fixture
def exported() -> Iterator[tuple[ServiceTelemetry, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ParentBasedTraceIdRatio(1.0))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield ServiceTelemetry(Metrics(), provider), exporter
    provider.shutdown()


def record(traceparent: str | None = None) -> RunRecord:
    return RunRecord(
        run_id="run-1",
        workflow_id="wf",
        version=1,
        status=RunStatus.PENDING,
        revision=0,
        input={},
        cancel_requested=False,
        created_at=NOW,
        updated_at=NOW,
        traceparent=traceparent,
    )


def only(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    spans = [span for span in exporter.get_finished_spans() if span.name == name]
    assert len(spans) == 1, [span.name for span in exporter.get_finished_spans()]
    return spans[0]


def test_the_run_span_is_current_inside_and_forgotten_after(
    exported: tuple[ServiceTelemetry, InMemorySpanExporter],
) -> None:
    telemetry, exporter = exported
    before = trace.get_current_span()
    with telemetry.run(record()):
        current = trace.get_current_span()
        assert current.is_recording()
        assert telemetry._runs == {"run-1": current}
        with telemetry.attempt("run-1", "a", 1, "mock") as attempt:
            inner = trace.get_current_span()
            assert inner is not current
            assert telemetry._attempts == {("run-1", "a", 1): inner}
            attempt.finished("succeeded", None)
        assert trace.get_current_span() is current
        assert telemetry._attempts == {}
    assert trace.get_current_span() is before
    assert telemetry._runs == {}
    run_span = only(exporter, "run wf")
    attempt_span = only(exporter, "attempt a")
    assert attempt_span.parent is not None
    assert attempt_span.parent.span_id == run_span.context.span_id
    assert attempt_span.attributes is not None
    assert attempt_span.attributes["workload.attempt.status"] == "succeeded"
    assert "workload.attempt.stopped" not in attempt_span.attributes
    assert run_span.attributes is not None
    assert "workload.run.interrupted" not in run_span.attributes


def test_an_interruption_is_said_on_both_spans_and_goes_on(
    exported: tuple[ServiceTelemetry, InMemorySpanExporter],
) -> None:
    telemetry, exporter = exported
    before = trace.get_current_span()
    with (
        pytest.raises(Interrupted),
        telemetry.run(record()),
        telemetry.attempt("run-1", "a", 1, "mock"),
    ):
        raise Interrupted
    assert trace.get_current_span() is before
    assert telemetry._runs == {}
    assert telemetry._attempts == {}
    run_attributes = only(exporter, "run wf").attributes
    attempt_attributes = only(exporter, "attempt a").attributes
    assert run_attributes is not None
    assert attempt_attributes is not None
    assert run_attributes["workload.run.interrupted"] is True
    assert attempt_attributes["workload.attempt.stopped"] is True
    assert "workload.attempt.status" not in attempt_attributes


def test_an_unsampled_run_is_current_but_records_nothing(
    exported: tuple[ServiceTelemetry, InMemorySpanExporter],
) -> None:
    telemetry, exporter = exported
    with telemetry.run(record(UNSAMPLED_PARENT)):
        current = trace.get_current_span()
        assert not current.is_recording()
        assert f"{current.get_span_context().trace_id:032x}" == UNSAMPLED_PARENT[3:35]
        assert telemetry._runs == {"run-1": current}
        scope = telemetry.attempt("run-1", "a", 1, "mock")
        assert scope is UNTRACED_ATTEMPT
        with scope as first, scope as second:  # two attempts at once share it
            first.finished("succeeded", None)
            second.finished("failed", "boom")
            assert trace.get_current_span() is current
    assert trace.get_current_span() is not current
    assert not trace.get_current_span().get_span_context().is_valid
    assert telemetry._runs == {}
    assert exporter.get_finished_spans() == ()


def test_without_a_tracer_provider_the_scopes_are_shared_and_empty() -> None:
    telemetry = ServiceTelemetry(Metrics())
    before = trace.get_current_span()
    for source in (telemetry, NO_TELEMETRY):
        with source.run(record()) as entered:
            assert entered is None
            assert trace.get_current_span() is before
            with source.attempt("run-1", "a", 1, "mock") as attempt:
                attempt.finished("succeeded", None)
        assert source.run(record()) is source.run(record())
        assert source.attempt("run-1", "a", 1, "mock") is UNTRACED_ATTEMPT
    assert telemetry._runs == {}


def sample(metrics: Metrics, name: str, labels: dict[str, str]) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_the_kept_children_are_the_registrys_own() -> None:
    metrics = Metrics()
    metrics.runs_finished.labels("succeeded").inc()
    metrics.run_finished("succeeded")
    metrics.run_finished("succeeded")
    metrics.run_finished("failed")
    metrics.attempt_finished("succeeded", "remote")
    metrics.attempts_finished.labels("succeeded", "remote").inc()
    metrics.claimed("gpu", 0.02)
    metrics.claimed("gpu", 7.0)
    metrics.model_call("local", "ok", 12, None)
    metrics.model_call("local", "ok", 3, 4)
    metrics.request("/api/v1/runs/{run_id}", "GET", 200, 0.002)
    metrics.request("/api/v1/runs/{run_id}", "BREW", 404, 0.002)
    metrics.request("/api/v1/runs/{run_id}", "GET", 200, 0.5)

    assert sample(metrics, "workload_runs_finished_total", {"status": "succeeded"}) == 3
    assert sample(metrics, "workload_runs_finished_total", {"status": "failed"}) == 1
    assert sample(metrics, "workload_runs_finished_total", {"status": "canceled"}) == 0
    remote = {"status": "succeeded", "kind": "remote"}
    assert sample(metrics, "workload_attempts_finished_total", remote) == 2
    gpu = {"queue": "gpu"}
    assert sample(metrics, "workload_schedule_to_start_seconds_count", gpu) == 2
    assert sample(metrics, "workload_schedule_to_start_seconds_bucket", {**gpu, "le": "5.0"}) == 1
    local = {"provider": "local"}
    assert sample(metrics, "workload_model_calls_total", {**local, "outcome": "ok"}) == 2
    assert sample(metrics, "workload_model_tokens_total", {**local, "direction": "input"}) == 15
    assert sample(metrics, "workload_model_tokens_total", {**local, "direction": "output"}) == 4
    route = {"route": "/api/v1/runs/{run_id}"}
    ok = {**route, "method": "GET", "status_class": "2xx"}
    other = {**route, "method": "other", "status_class": "4xx"}
    assert sample(metrics, "workload_http_requests_total", ok) == 2
    assert sample(metrics, "workload_http_requests_total", other) == 1
    get = {**route, "method": "GET"}
    assert sample(metrics, "workload_http_request_duration_seconds_count", get) == 2
    assert (
        sample(metrics, "workload_http_request_duration_seconds_bucket", {**get, "le": "0.25"}) == 1
    )


def test_a_scope_is_entered_once(
    exported: tuple[ServiceTelemetry, InMemorySpanExporter],
) -> None:
    telemetry, _ = exported
    run_scope = telemetry.run(record())
    with run_scope:
        with pytest.raises(RuntimeError, match="entered once"), run_scope:
            pass
        attempt_scope = telemetry.attempt("run-1", "a", 1, "mock")
        with attempt_scope, pytest.raises(RuntimeError, match="entered once"), attempt_scope:
            pass
    assert telemetry._runs == {}
    assert telemetry._attempts == {}


def test_an_ending_scope_leaves_a_newer_one_of_the_same_key(
    exported: tuple[ServiceTelemetry, InMemorySpanExporter],
) -> None:
    """Two scopes of one run (or attempt) overlap in two tasks: the older ends first."""
    telemetry, _ = exported
    older, newer = contextvars.copy_context(), contextvars.copy_context()
    older_run, newer_run = telemetry.run(record()), telemetry.run(record())
    older.run(older_run.__enter__)
    newer.run(newer_run.__enter__)
    newer_span = telemetry._runs["run-1"]
    older_attempt = older.run(telemetry.attempt, "run-1", "a", 1, "mock")
    newer_attempt = newer.run(telemetry.attempt, "run-1", "a", 1, "mock")
    older.run(older_attempt.__enter__)
    newer.run(newer_attempt.__enter__)
    latest = telemetry._attempts[("run-1", "a", 1)]
    older.run(older_attempt.__exit__, None, None, None)
    older.run(older_run.__exit__, None, None, None)
    assert telemetry._attempts == {("run-1", "a", 1): latest}
    assert telemetry._runs == {"run-1": newer_span}
    newer.run(newer_attempt.__exit__, None, None, None)
    newer.run(newer_run.__exit__, None, None, None)
    assert telemetry._attempts == {}
    assert telemetry._runs == {}


def test_the_no_op_telemetrys_agent_hooks_are_shared_too() -> None:
    model_call = NO_TELEMETRY.model_call(provider="p", model="m")
    assert model_call is NO_TELEMETRY.model_call(provider="q", model="n", operation="embed")
    with model_call as call, model_call as other:
        call.usage(input_tokens=1, output_tokens=2)
        other.outcome("error")
    assert NO_TELEMETRY.tool_call("t", call_id="c") is UNTRACED_ATTEMPT


@pytest.fixture
def unsampled() -> Iterator[ServiceTelemetry]:
    provider = TracerProvider(sampler=ParentBasedTraceIdRatio(0.0))
    yield ServiceTelemetry(Metrics(), provider)
    provider.shutdown()


def request_span(telemetry: ServiceTelemetry) -> trace.Span:
    return telemetry.tracer.start_span("POST", kind=trace.SpanKind.SERVER)


def test_a_run_takes_the_unsampled_context_its_request_handed_it(
    unsampled: ServiceTelemetry,
) -> None:
    request = request_span(unsampled)
    assert not request.is_recording()
    with trace.use_span(request, end_on_exit=True):
        traceparent = unsampled.current_traceparent()
    assert traceparent is not None
    assert unsampled._handed == {traceparent: request.get_span_context()}
    with unsampled.run(record(traceparent)):
        current = trace.get_current_span()
        assert current.get_span_context() is request.get_span_context()
        assert not current.is_recording()
    assert unsampled._handed == {}
    # A run of the same traceparent that comes later (a restart, a replay) parses it.
    with unsampled.run(record(traceparent)):
        parsed = trace.get_current_span().get_span_context()
    assert parsed == context_of(traceparent)
    assert parsed.is_remote


def test_a_sampled_context_is_not_handed(
    exported: tuple[ServiceTelemetry, InMemorySpanExporter],
) -> None:
    telemetry, _ = exported
    request = request_span(telemetry)
    assert request.is_recording()
    with trace.use_span(request, end_on_exit=True):
        assert telemetry.current_traceparent() is not None
    assert telemetry._handed == {}


def test_contexts_handed_to_runs_executed_elsewhere_are_bounded(
    unsampled: ServiceTelemetry,
) -> None:
    handed = []
    for _ in range(_MAX_HANDED + 10):
        with trace.use_span(request_span(unsampled), end_on_exit=True):
            handed.append(unsampled.current_traceparent())
    assert list(unsampled._handed) == handed[10:]
