"""Spans recorded in memory (OpenTelemetry's ``InMemorySpanExporter``), for one test at a time.

``spans`` puts an in-memory tracer provider in place as OpenTelemetry's global one for the test
(the SDK and the worker SDK use the global provider, as instrumented libraries do) and restores
the previous one afterwards; ``traced_api`` serves the service in-process with the same
provider given to its container.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dependency_injector import providers
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.plugins.live_api import LiveApi, in_process, settings
from workload_api.container import Container, use_memory_store


@pytest.fixture
def tracer_provider() -> Iterator[TracerProvider]:
    provider = TracerProvider()
    yield provider
    provider.shutdown()


@pytest.fixture
def spans(tracer_provider: TracerProvider, monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    # What opentelemetry-test-utils' reset_trace_globals does, undone after the test.
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", tracer_provider)
    return exporter


@pytest.fixture
def traced_api(tracer_provider: TracerProvider, spans: InMemorySpanExporter) -> Iterator[LiveApi]:
    container = use_memory_store(Container(settings=settings()))
    container.tracer_provider.override(providers.Object(tracer_provider))
    with in_process(container) as api:
        yield api
