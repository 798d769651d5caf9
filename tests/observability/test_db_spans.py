"""Database statements are spans (SPEC §12), inside traced work only."""

from __future__ import annotations

from contextlib import AbstractContextManager

import psycopg
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, StatusCode, TraceFlags

from workload_api.telemetry import Metrics, ServiceTelemetry
from workload_domain.errors import WorkflowNotFound
from workload_store_postgres.store import PostgresStore

pytestmark = pytest.mark.anyio


async def test_statements_are_children_of_the_current_span(
    database_url: str, tracer_provider: TracerProvider, spans: InMemorySpanExporter
) -> None:
    telemetry = ServiceTelemetry(Metrics(), tracer_provider)
    async with PostgresStore(database_url, max_size=2, telemetry=telemetry) as store:
        spans.clear()
        with pytest.raises(WorkflowNotFound):
            await store.get_workflow("untraced")  # a background duty's read: no span
        assert spans.get_finished_spans() == ()
        tracer = tracer_provider.get_tracer("test")
        with tracer.start_as_current_span("request") as request:
            with pytest.raises(WorkflowNotFound):
                await store.get_workflow("traced")
            await store.queue_stats()
    finished = {s.name: s for s in spans.get_finished_spans()}
    assert {"get_workflow", "queue_stats", "request"} <= set(finished)
    statement = finished["get_workflow"]
    assert statement.kind is SpanKind.CLIENT
    assert statement.parent is not None
    assert statement.parent.span_id == request.get_span_context().span_id
    attributes = dict(statement.attributes or {})
    assert attributes["db.system.name"] == "postgresql"
    assert attributes["db.operation.name"] == "SELECT"
    assert attributes["db.query.summary"] == "get_workflow"  # the named query of queries.sql
    assert "traced" not in str(attributes)  # never a value


async def test_without_tracing_the_pool_uses_psycopgs_cursor(database_url: str) -> None:
    store = PostgresStore(database_url, max_size=1, telemetry=ServiceTelemetry(Metrics()))
    async with store, store._db.pool.connection() as conn:
        assert type(conn.cursor()).__name__ == "AsyncCursor"


async def test_a_failing_statement_marks_its_span_and_is_never_current(
    database_url: str, tracer_provider: TracerProvider, spans: InMemorySpanExporter
) -> None:
    telemetry = ServiceTelemetry(Metrics(), tracer_provider)
    async with PostgresStore(database_url, max_size=1, telemetry=telemetry) as store:
        tracer = tracer_provider.get_tracer("test")
        with tracer.start_as_current_span("request") as request:
            async with store._db.pool.connection() as conn:
                with telemetry.statement("divide", "SELECT 1/0") as span:
                    # Not the current span: the request stays the parent of what follows.
                    assert trace.get_current_span() is request
                    assert span is not request
                with pytest.raises(psycopg.errors.DivisionByZero):
                    await conn.execute("SELECT 1/0")
    failed = [s for s in spans.get_finished_spans() if s.name == "SELECT"]
    assert len(failed) == 1
    assert failed[0].status.status_code is StatusCode.ERROR
    assert dict(failed[0].attributes or {})["error.type"] == "DivisionByZero"
    assert failed[0].parent is not None
    assert failed[0].parent.span_id == request.get_span_context().span_id
    divide = [s for s in spans.get_finished_spans() if s.name == "divide"]
    assert len(divide) == 1
    assert divide[0].status.status_code is StatusCode.UNSET


class _NamingCounted(ServiceTelemetry):
    """The service's telemetry, keeping the name of every statement it is asked to trace."""

    def __init__(self, tracer_provider: TracerProvider) -> None:
        super().__init__(Metrics(), tracer_provider)
        self.named: list[str] = []

    def statement(self, name: str, sql: str) -> AbstractContextManager[object]:
        self.named.append(name)
        return super().statement(name, sql)


async def test_a_statement_outside_a_recording_span_is_not_named(
    database_url: str, tracer_provider: TracerProvider, spans: InMemorySpanExporter
) -> None:
    """The cursor asks ``traces_statements`` first: an untraced statement costs no naming."""
    telemetry = _NamingCounted(tracer_provider)
    tracer = tracer_provider.get_tracer("test")
    unsampled = NonRecordingSpan(SpanContext(1, 2, is_remote=False, trace_flags=TraceFlags(0)))
    async with PostgresStore(database_url, max_size=1, telemetry=telemetry) as store:
        assert not telemetry.traces_statements()
        await store.queue_stats()  # a background duty's
        with trace.use_span(unsampled):  # an unsampled request's
            assert not telemetry.traces_statements()
            await store.queue_stats()
        assert telemetry.named == []
        with tracer.start_as_current_span("request"):
            assert telemetry.traces_statements()
            await store.queue_stats()
        assert telemetry.named
        assert set(telemetry.named) == {"queue_stats"}
        telemetry.named.clear()
        async with store._db.pool.connection() as conn, conn.cursor() as cursor:
            with trace.use_span(unsampled):
                await cursor.executemany("SELECT %s::int", [(1,), (2,)])
            assert telemetry.named == []
            with tracer.start_as_current_span("request"):
                await cursor.executemany("SELECT %s::int", [(3,)])
            assert telemetry.named == ["SELECT"]
    assert [s.name for s in spans.get_finished_spans()].count("SELECT") == 1
