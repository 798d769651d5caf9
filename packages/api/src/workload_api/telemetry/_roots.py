"""Where a trace begins: a request's root span, decided before the SDK is asked (ADR 0045).

With SPEC §12's production sampler (``parentbased_traceidratio``) nine requests in ten are not
sampled, and each paid the SDK's whole ``start_span`` to learn it: the parent looked up, ids
drawn, the sampler's decision object, the flags, the span context, the SDK's own counters
(≈ 1.3 % of an unsampled run's instructions, ``benchmarks/instructions_bench.py``). A root's
decision is the ratio sampler's test of its trace id alone, so it is taken here first: the
trace id is drawn as the provider's id generator (:class:`DrawnIds`) draws one, a dropped root
becomes a non-recording span on that id with the SDK's flags, and a sampled one is started by
the SDK, which takes the id handed to the generator — so the SDK samples exactly the traces it
would have. A dropped root's id is never handed in: no thread-local write is made for it.

Used only where that equivalence is known: the SDK's own ``ParentBasedTraceIdRatio`` sampler,
our :class:`DrawnIds` generator, no current span (a child is the SDK's to decide), and the SDK's
internal metrics off (they count the spans it starts). This module imports the SDK: it is loaded
only with tracing on.
"""

from __future__ import annotations

import os
import threading

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import Decision, ParentBasedTraceIdRatio, TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, TraceFlags

__all__ = ["DrawnIds", "RootSampling", "root_sampling"]

_UNSAMPLED_ROOT_FLAGS = TraceFlags(TraceFlags.DEFAULT | TraceFlags.RANDOM_TRACE_ID)
"""What the SDK gives a dropped root whose trace id is random (``DrawnIds`` says it is)."""
_TRACE_ID_LIMIT = TraceIdRatioBased.TRACE_ID_LIMIT
_INTERNAL_METRICS = "OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED"


class DrawnIds(RandomIdGenerator):
    """The SDK's random ids, of which this thread's next trace id may be handed in ahead."""

    def __init__(self) -> None:
        self._drawn = threading.local()

    def hand(self, trace_id: int) -> None:
        """Make ``trace_id`` what this thread's next :meth:`generate_trace_id` returns."""
        self._drawn.trace_id = trace_id

    def forget(self) -> None:
        """Drop this thread's handed trace id, if it was not taken."""
        self._drawn.trace_id = None

    def generate_trace_id(self) -> int:
        """The trace id handed in on this thread, once; else a new random one."""
        trace_id: int | None = getattr(self._drawn, "trace_id", None)
        if trace_id is None:
            return super().generate_trace_id()
        self._drawn.trace_id = None
        return trace_id


def _bound(sampler: ParentBasedTraceIdRatio) -> int:
    """The trace ids (their low 64 bits) below which ``sampler`` samples a root: asked of it.

    A ratio sampler samples a root exactly when its trace id's low 64 bits are below a bound;
    the bound is found by bisection with the sampler's public ``should_sample``, asked in an
    empty context: given none, it would take the span current at the time as the parent, and
    decide by the parent's flags instead of the ratio.
    """
    root = otel_context.Context()

    def sampled(trace_id: int) -> bool:
        return sampler.should_sample(root, trace_id, "root").decision is Decision.RECORD_AND_SAMPLE

    low, high = 0, _TRACE_ID_LIMIT + 1  # sampled below ``low``; dropped at ``high`` and above
    if sampled(_TRACE_ID_LIMIT):
        return _TRACE_ID_LIMIT + 1
    while low < high:
        middle = (low + high) // 2
        if sampled(middle):
            low = middle + 1
        else:
            high = middle
    return low


class RootSampling:
    """Starts a request's root span, asking the SDK only for the sampled ones."""

    def __init__(self, ids: DrawnIds, bound: int) -> None:
        self._ids = ids
        self.bound = bound

    def start(self, tracer: trace.Tracer, name: str, kind: SpanKind) -> Span:
        """The root span ``name``: the SDK's when sampled, else a non-recording one of ours."""
        if trace.get_current_span().get_span_context().is_valid:  # a child: the SDK decides
            return tracer.start_span(name, kind=kind)
        ids = self._ids
        trace_id = RandomIdGenerator.generate_trace_id(ids)  # drawn, not yet handed in
        if trace_id & _TRACE_ID_LIMIT < self.bound:
            ids.hand(trace_id)
            try:
                return tracer.start_span(name, kind=kind)  # a root: it takes the drawn id
            finally:
                ids.forget()
        span_context = SpanContext(
            trace_id,
            ids.generate_span_id(),
            is_remote=False,
            trace_flags=_UNSAMPLED_ROOT_FLAGS,
        )
        return NonRecordingSpan(span_context)


def root_sampling(provider: TracerProvider) -> RootSampling | None:
    """The root decision for ``provider``, or None where only the SDK may decide (see above)."""
    sampler, ids = provider.sampler, provider.id_generator
    if type(sampler) is not ParentBasedTraceIdRatio or type(ids) is not DrawnIds:
        return None
    if os.environ.get(_INTERNAL_METRICS, "").strip().lower() == "true":
        return None
    return RootSampling(ids, _bound(sampler))
