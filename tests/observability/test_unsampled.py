"""An unsampled request records no span and builds no attribute (SPEC §12, ADR 0031).

The service runs with the sampler SPEC §12 recommends, ``parentbased_traceidratio``: at ratio 0
a request, the run it creates, its local and remote attempts and the worker's calls export no
span at all, and not one attribute dictionary is built for them; at ratio 1 they are all there.
At ratio 0 the service asks the SDK for a span only where a trace would begin (a request that
carries no trace context): the children of an unsampled parent are decided without it.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from dependency_injector import providers
from opentelemetry.sdk.trace import Tracer, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBasedTraceIdRatio, Sampler
from opentelemetry.trace import get_current_span

from tests.plugins.live_api import WORKER_TOKEN, LiveApi, in_process, settings
from workload_api.container import Container, use_memory_store
from workload_api.telemetry import _http, _service
from workload_api.telemetry._spans import drops_unsampled_children
from workload_worker import Context, Worker

V1 = "/api/v1"
_keys = itertools.count()
BUILDERS = (
    (_service, "run_attributes"),
    (_service, "attempt_attributes"),
    (_http, "_request_attributes"),
)


@pytest.fixture(params=[0.0, 1.0], ids=["ratio-0", "ratio-1"])
def ratio(request: pytest.FixtureRequest) -> float:
    value: float = request.param
    return value


@pytest.fixture
def tracer_provider(ratio: float) -> Iterator[TracerProvider]:
    provider = TracerProvider(sampler=ParentBasedTraceIdRatio(ratio))
    yield provider
    provider.shutdown()


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool | None]]:
    """The service tracer's calls into the SDK: each span's name, whether its parent is sampled."""
    calls: list[tuple[str, bool | None]] = []
    original = Tracer.start_span

    def recording(self: Tracer, name: str, context: Any = None, *args: Any, **kwargs: Any) -> Any:
        scope = self.instrumentation_info
        if scope is not None and scope.name == _service.INSTRUMENTATION:
            parent = get_current_span(kwargs.get("context", context)).get_span_context()
            calls.append((name, parent.trace_flags.sampled if parent.is_valid else None))
        return original(self, name, context, *args, **kwargs)

    monkeypatch.setattr(Tracer, "start_span", recording)
    return calls


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many times each attribute builder of the service's spans was called."""
    counts = dict.fromkeys((name for _, name in BUILDERS), 0)
    for module, name in BUILDERS:
        original = getattr(module, name)

        def counting(*args: Any, _name: str = name, _original: Any = original) -> Any:
            counts[_name] += 1
            return _original(*args)

        monkeypatch.setattr(module, name, counting)
    return counts


def _run_a_local_and_a_remote_task(api: LiveApi) -> None:
    worker = Worker(client=api.async_sdk(WORKER_TOKEN), worker_id="w-sampled", wait_seconds=1)

    @worker.action("remote")
    async def remote(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        return {"done": True}

    thread = threading.Thread(target=worker.run, name="sampled-worker")
    thread.start()
    try:
        created = api.operator.post(
            f"{V1}/workflows",
            json={
                "id": "sampled",
                "tasks": [
                    {"key": "local", "action": "mock"},
                    {"key": "far", "action": "remote", "depends_on": ["local"]},
                ],
            },
            headers={"Idempotency-Key": f"w-{next(_keys)}"},
        )
        assert created.status_code == 201, created.text
        started = api.operator.post(
            f"{V1}/workflows/sampled/versions/1/runs",
            headers={"Idempotency-Key": f"r-{next(_keys)}"},
        )
        assert started.status_code == 202, started.text
        assert api.wait_for_run(started.json()["run_id"])["status"] == "succeeded"
    finally:
        worker.stop()
        thread.join(15)
        assert not thread.is_alive()


def test_an_unsampled_request_records_no_span_and_builds_no_attribute(
    traced_api: LiveApi,
    spans: InMemorySpanExporter,
    tracer_provider: TracerProvider,
    built: dict[str, int],
    asked: list[tuple[str, bool | None]],
    ratio: float,
) -> None:
    _run_a_local_and_a_remote_task(traced_api)
    tracer_provider.force_flush()
    names = {span.name for span in spans.get_finished_spans()}
    if ratio == 0:
        assert names == set(), names
        assert built == dict.fromkeys(built, 0)
        # Only roots were decided by the SDK: no run, attempt or claim span was asked for.
        assert asked, "no request was decided"
        assert all(flags is None for _, flags in asked), asked
    else:
        expected = {
            "POST /api/v1/workflows/{workflow_id}/versions/{version}/runs",
            "run sampled",
            "attempt local",
            "attempt far",
        }
        assert expected <= names, names
        assert all(count > 0 for count in built.values()), built
        assert any(name.startswith("run ") and flags is True for name, flags in asked), asked


@pytest.mark.parametrize("ratio", [0.0])
def test_a_request_of_an_unsampled_trace_is_not_given_to_the_sdk(
    traced_api: LiveApi, spans: InMemorySpanExporter, asked: list[tuple[str, bool | None]]
) -> None:
    unsampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    response = traced_api.operator.get(f"{V1}/runs", headers={"traceparent": unsampled})
    assert response.status_code == 200, response.text
    assert asked == []
    assert spans.get_finished_spans() == ()


class _AlwaysOn(Sampler):
    """Samples every span, an unsampled parent's children too (not ``ParentBased``)."""

    def should_sample(self, *args: Any, **kwargs: Any) -> Any:
        return ALWAYS_ON.should_sample(*args, **kwargs)

    def get_description(self) -> str:
        return "AlwaysOnEvenUnderUnsampledParents"


def test_a_sampler_that_samples_an_unsampled_parents_children_is_asked() -> None:
    provider = TracerProvider(sampler=_AlwaysOn())
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    container = use_memory_store(Container(settings=settings()))
    container.tracer_provider.override(providers.Object(provider))
    try:
        with in_process(container) as api:
            unsampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
            response = api.operator.get(f"{V1}/runs", headers={"traceparent": unsampled})
            assert response.status_code == 200, response.text
        provider.force_flush()
        (span,) = [s for s in exporter.get_finished_spans() if s.name == "GET /api/v1/runs"]
        assert span.parent is not None
        assert span.parent.span_id == 0xB7AD6B7169203331
    finally:
        provider.shutdown()


def _described(sampler: Sampler) -> str:
    return sampler.get_description()


@pytest.mark.parametrize(
    ("description", "drops"),
    [
        (_described(ParentBasedTraceIdRatio(0.1)), True),
        (_described(ParentBasedTraceIdRatio(1.0)), True),
        (_described(ALWAYS_ON), False),
        ("TraceIdRatioBased{0.1}", False),
        (
            "ParentBased{root:AlwaysOnSampler,remoteParentSampled:AlwaysOnSampler,"
            "remoteParentNotSampled:AlwaysOnSampler,localParentSampled:AlwaysOnSampler,"
            "localParentNotSampled:AlwaysOffSampler}",
            False,
        ),
        (
            "ParentBased{root:ParentBased{root:AlwaysOnSampler,remoteParentSampled:AlwaysOnSampler,"
            "remoteParentNotSampled:AlwaysOffSampler,localParentSampled:AlwaysOnSampler,"
            "localParentNotSampled:AlwaysOffSampler},remoteParentSampled:AlwaysOnSampler,"
            "remoteParentNotSampled:AlwaysOnSampler,localParentSampled:AlwaysOnSampler,"
            "localParentNotSampled:AlwaysOffSampler}",
            False,
        ),
        ("ParentBased{", False),
        ("", False),
    ],
)
def test_which_samplers_drop_an_unsampled_parents_children(description: str, drops: bool) -> None:
    assert drops_unsampled_children(description) is drops
