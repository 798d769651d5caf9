"""An unsampled request records no span and builds no attribute (SPEC §12, ADR 0031).

The service runs with the sampler SPEC §12 recommends, ``parentbased_traceidratio``: at ratio 0
a request, the run it creates, its local and remote attempts and the worker's calls export no
span at all, and not one attribute dictionary is built for them; at ratio 1 they are all there.
At ratio 0 the service asks the SDK for a request's, run's, attempt's or claim's span only where
a trace would begin (a request that carries no trace context): the children of an unsampled
parent are decided without it.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from dependency_injector import providers
from opentelemetry.sdk.trace import Tracer, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    DEFAULT_OFF,
    DEFAULT_ON,
    ParentBased,
    ParentBasedTraceIdRatio,
    Sampler,
    TraceIdRatioBased,
)
from opentelemetry.trace import get_current_span

from tests.plugins.live_api import WORKER_TOKEN, LiveApi, in_process, settings
from workload_api.container import Container, use_memory_store
from workload_api.telemetry import Metrics, _http, _service
from workload_api.telemetry._roots import DrawnIds
from workload_api.telemetry._spans import drops_unsampled_children
from workload_domain.agent.journal import StepKind, StepRecord, StepStatus
from workload_domain.records import RunRecord
from workload_domain.statuses import RunStatus
from workload_domain.workers import ClaimedAttempt
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


@pytest.fixture(params=["drawn", "sdk"], ids=["drawn-ids", "sdk-ids"])
def ids(request: pytest.FixtureRequest) -> str:
    """The service's id generator (roots decided before the SDK, ADR 0045), or the SDK's own."""
    value: str = request.param
    return value


@pytest.fixture
def tracer_provider(ratio: float, ids: str) -> Iterator[TracerProvider]:
    generator = DrawnIds() if ids == "drawn" else None
    provider = TracerProvider(sampler=ParentBasedTraceIdRatio(ratio), id_generator=generator)
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
    ids: str,
) -> None:
    _run_a_local_and_a_remote_task(traced_api)
    tracer_provider.force_flush()
    names = {span.name for span in spans.get_finished_spans()}
    if ratio == 0 and ids == "drawn":
        assert names == set(), names
        assert built == dict.fromkeys(built, 0)
        # The service's roots are decided before the SDK, their children without it (ADR
        # 0031): the SDK is asked for nothing at all.
        assert asked == []
    elif ratio == 0:
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


def test_a_sampler_that_samples_an_unsampled_parents_children_is_asked() -> None:
    # ParentBased, but sampling the children of unsampled remote parents.
    provider = TracerProvider(sampler=ParentBased(ALWAYS_ON, remote_parent_not_sampled=ALWAYS_ON))
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


class _Decides(ParentBased):
    """A ParentBased subclass outside the SDK: it may override how it decides."""


@pytest.mark.parametrize(
    ("sampler", "drops"),
    [
        (ParentBasedTraceIdRatio(0.1), True),
        (ParentBasedTraceIdRatio(1.0), True),
        (ParentBasedTraceIdRatio(0.0), True),
        (DEFAULT_ON, True),
        (DEFAULT_OFF, True),
        (ParentBased(TraceIdRatioBased(0.5)), True),
        (ALWAYS_ON, False),
        (TraceIdRatioBased(0.1), False),
        (ParentBased(ALWAYS_ON, remote_parent_not_sampled=ALWAYS_ON), False),
        (ParentBased(ALWAYS_ON, local_parent_not_sampled=ALWAYS_ON), False),
        (ParentBased(ALWAYS_ON, remote_parent_not_sampled=TraceIdRatioBased(0.5)), False),
        (ParentBased(ALWAYS_ON, local_parent_not_sampled=TraceIdRatioBased(1e-9)), False),
        (
            ParentBased(
                ALWAYS_ON,
                remote_parent_not_sampled=ALWAYS_ON,
                local_parent_sampled=ParentBased(ALWAYS_ON),
            ),
            False,
        ),
        (_Decides(ALWAYS_ON), False),
    ],
    ids=repr,
)
def test_which_samplers_drop_an_unsampled_parents_children(sampler: Sampler, drops: bool) -> None:
    assert drops_unsampled_children(sampler) is drops


RUN_ID = "0194d6a3-0e5c-7b8e-9c2d-4f6a8b0c1d2e"


def _a_run(traceparent: str) -> RunRecord:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    record = RunRecord(RUN_ID, "wf", 1, RunStatus.RUNNING, 1, {}, False, now, now)
    return dataclasses.replace(record, traceparent=traceparent)


@pytest.mark.parametrize("sampled", [False, True], ids=["unsampled-parent", "sampled-parent"])
def test_a_remote_tool_call_under_an_unsampled_parent_is_not_asked(
    asked: list[tuple[str, bool | None]], sampled: bool
) -> None:
    """Its claim hands the worker the parent's context; its end records nothing (no SDK call)."""
    provider = TracerProvider(sampler=ParentBasedTraceIdRatio(1.0))
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = _service.ServiceTelemetry(Metrics(), provider)
    parent = f"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0{int(sampled)}"
    now = datetime.now(UTC)
    claimed = ClaimedAttempt(
        attempt_id="step-1", run_id=RUN_ID, workflow_id="wf", version=1, task_key="agent",
        attempt=1, queue="default", action="search", input={}, run_input={}, upstream={},
        lease_expires_at=now, timeout_at=now, heartbeat_timeout_seconds=30.0, token_index=0,
        kind="tool_call", tool_call_id="call-1", tool="search", queued_at=now, traceparent=parent,
    )  # fmt: skip
    handed = telemetry.claimed("w-1", claimed, now)
    step = StepRecord(
        run_id=RUN_ID, task_key="agent", attempt=1, sequence=1, kind=StepKind.TOOL_CALL,
        status=StepStatus.SUCCEEDED, request={"tool": "search"}, request_hash="h",
        started_at=now, finished_at=now, tool_call_id="call-2", action="search",
    )  # fmt: skip
    with telemetry.run(_a_run(parent)):  # the run executes here: the call's end has a parent
        telemetry.tool_call_ended(step)
    provider.force_flush()
    names = [name for name, _ in asked]
    try:
        if sampled:
            assert handed != parent  # the claim's own span's context
            assert names == ["execute_tool search", "run wf", "execute_tool search"], names
        else:
            assert handed == parent  # the caller's context, unchanged
            assert names == [], names
            assert exporter.get_finished_spans() == ()
    finally:
        provider.shutdown()
