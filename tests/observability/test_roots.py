"""A request's root span decided before the SDK is asked, exactly as the SDK decides (ADR 0045).

With SPEC §12's ``parentbased_traceidratio`` a root is sampled when its trace id's low 64 bits
are below the ratio's bound. ``RootSampling`` draws the trace id as the provider's ``DrawnIds``
would, makes a dropped root a non-recording span with the SDK's flags, and hands a sampled
one's id to ``DrawnIds`` for the SDK to start it on: the traces sampled are the SDK's, one for one.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, ParentBasedTraceIdRatio, TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from workload_api.telemetry._config import tracer_provider_from_env
from workload_api.telemetry._roots import DrawnIds, RootSampling, root_sampling


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    made = TracerProvider(sampler=ParentBasedTraceIdRatio(0.5), id_generator=DrawnIds())
    yield made
    made.shutdown()


def _roots(provider: TracerProvider) -> RootSampling:
    roots = root_sampling(provider)
    assert roots is not None
    return roots


@pytest.mark.parametrize("rate", [0.0, 0.1, 0.5, 1.0, 1e-9])
def test_the_bound_is_the_samplers_own(rate: float) -> None:
    made = TracerProvider(sampler=ParentBasedTraceIdRatio(rate), id_generator=DrawnIds())
    try:
        assert _roots(made).bound == TraceIdRatioBased.get_bound_for_rate(rate)
    finally:
        made.shutdown()


@pytest.mark.parametrize("current", ["sampled", "unsampled"])
def test_the_bound_does_not_depend_on_the_span_current_when_it_is_found(current: str) -> None:
    # The middleware is built lazily, by whatever call comes first: a span may be current then.
    made = TracerProvider(sampler=ParentBasedTraceIdRatio(0.1), id_generator=DrawnIds())
    flags = TraceFlags(TraceFlags.SAMPLED if current == "sampled" else TraceFlags.DEFAULT)
    parent = NonRecordingSpan(
        SpanContext(7, 9, is_remote=current == "unsampled", trace_flags=flags)
    )
    try:
        with trace.use_span(parent):
            assert _roots(made).bound == TraceIdRatioBased.get_bound_for_rate(0.1)
    finally:
        made.shutdown()


def test_roots_are_sampled_one_for_one_as_the_sdk_samples_them(provider: TracerProvider) -> None:
    exported = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    tracer = provider.get_tracer("test")
    roots = _roots(provider)
    random.seed(20261204)  # the SDK draws ids from ``random``: the same draws every time
    sampled_ids = []
    for _ in range(200):
        span = roots.start(tracer, "GET", SpanKind.SERVER)
        context = span.get_span_context()
        decided = provider.sampler.should_sample(None, context.trace_id, "GET").decision
        assert context.is_valid
        sampled = decided is Decision.RECORD_AND_SAMPLE
        assert span.is_recording() is sampled is context.trace_flags.sampled
        if span.is_recording():
            sampled_ids.append(context.trace_id)
        span.end()
    assert 60 < len(sampled_ids) < 140, len(sampled_ids)  # both kinds, about half each
    # Each sampled root is the SDK's span, on the very trace id the decision was made on.
    assert [s.context.trace_id for s in exported.get_finished_spans()] == sampled_ids
    assert all(s.parent is None for s in exported.get_finished_spans())


def test_a_dropped_root_carries_what_the_sdk_gives_one() -> None:
    ours = TracerProvider(sampler=ParentBasedTraceIdRatio(0.0), id_generator=DrawnIds())
    sdks = TracerProvider(sampler=ParentBasedTraceIdRatio(0.0))
    try:
        mine = _roots(ours).start(ours.get_tracer("test"), "GET", SpanKind.SERVER)
        theirs = sdks.get_tracer("test").start_span("GET", kind=SpanKind.SERVER)
        mine_context, their_context = mine.get_span_context(), theirs.get_span_context()
        assert not mine.is_recording()
        assert not theirs.is_recording()
        assert mine_context.trace_flags == their_context.trace_flags
        assert mine_context.trace_state == their_context.trace_state
        assert mine_context.is_remote is their_context.is_remote is False
        assert mine_context.is_valid
        assert their_context.is_valid
    finally:
        ours.shutdown()
        sdks.shutdown()


def test_no_drawn_id_is_left_for_the_next_root(provider: TracerProvider) -> None:
    tracer, roots = provider.get_tracer("test"), _roots(provider)
    ids = provider.id_generator
    assert isinstance(ids, DrawnIds)
    drawn = []
    for _ in range(20):  # dropped and sampled ones alike
        span = roots.start(tracer, "GET", SpanKind.SERVER)
        drawn.append(span.get_span_context().trace_id)
        span.end()
    assert ids.generate_trace_id() not in drawn
    forgotten, handed = 2**100 + 7, 2**100 + 9
    ids.hand(forgotten)
    ids.forget()
    assert ids.generate_trace_id() != forgotten
    ids.hand(handed)
    assert ids.generate_trace_id() == handed  # taken once …
    assert ids.generate_trace_id() != handed  # … and then a new one


class _HandsCounted(DrawnIds):
    """``DrawnIds`` keeping every trace id handed to it."""

    def __init__(self) -> None:
        super().__init__()
        self.handed: list[int] = []

    def hand(self, trace_id: int) -> None:
        self.handed.append(trace_id)
        super().hand(trace_id)


def test_only_a_sampled_roots_id_is_handed_to_the_generator() -> None:
    """A dropped root touches neither the SDK nor the generator's thread-local store."""
    ids = _HandsCounted()
    made = TracerProvider(sampler=ParentBasedTraceIdRatio(0.5), id_generator=ids)
    plain = TracerProvider(sampler=ParentBasedTraceIdRatio(0.5), id_generator=DrawnIds())
    try:
        # root_sampling takes DrawnIds itself only: the same decision, on the counting one.
        tracer, roots = made.get_tracer("test"), RootSampling(ids, _roots(plain).bound)
        random.seed(11)
        sampled: list[int] = []
        dropped: list[int] = []
        for _ in range(40):
            span = roots.start(tracer, "GET", SpanKind.SERVER)
            (sampled if span.is_recording() else dropped).append(span.get_span_context().trace_id)
            span.end()
        assert sampled
        assert dropped
        assert ids.handed == sampled
    finally:
        made.shutdown()
        plain.shutdown()


def test_a_child_of_the_current_span_is_the_sdks_to_decide(provider: TracerProvider) -> None:
    tracer, roots = provider.get_tracer("test"), _roots(provider)
    random.seed(3)
    parent = tracer.start_span("parent")
    while not parent.is_recording():
        parent = tracer.start_span("parent")
    with trace.use_span(parent, end_on_exit=True):
        child = roots.start(tracer, "GET", SpanKind.SERVER)
        assert child.get_span_context().trace_id == parent.get_span_context().trace_id
        assert child.is_recording()
        child.end()


def test_only_the_sdks_ratio_sampler_with_drawn_ids_is_decided_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cases = [
        TracerProvider(id_generator=DrawnIds()),  # parentbased_always_on: the SDK's default
        TracerProvider(sampler=ParentBasedTraceIdRatio(0.1)),  # the SDK's own id generator
    ]
    try:
        assert [root_sampling(made) for made in cases] == [None, None]
        monkeypatch.setenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", "true")
        made = TracerProvider(sampler=ParentBasedTraceIdRatio(0.1), id_generator=DrawnIds())
        cases.append(made)
        assert root_sampling(made) is None  # the SDK counts the spans it starts
    finally:
        for made in cases:
            made.shutdown()


def test_the_service_provider_draws_its_ids_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.1")
    made = tracer_provider_from_env({"OTEL_TRACES_EXPORTER": "console"})
    assert made is not None
    try:
        assert isinstance(made.id_generator, DrawnIds)
        assert _roots(made).bound == TraceIdRatioBased.get_bound_for_rate(0.1)
    finally:
        made.shutdown()
