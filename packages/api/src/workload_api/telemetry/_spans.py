"""The pieces of the service's spans: trace contexts, attributes, and the handles it returns.

``traceparent_of`` and ``context_of`` convert between a span context and the W3C
``traceparent`` stored with a run; the handles (:class:`AttemptHandle`, :class:`StatementSpan`,
:class:`ModelCallRecord`) are what :class:`~workload_api.telemetry._service.ServiceTelemetry`
hands the engine, the store and the agent runtime. No state: the service keeps it.
"""

from __future__ import annotations

from collections import OrderedDict
from contextvars import Token
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, Status, StatusCode, TraceFlags

from workload_domain.records import AttemptRecord, RunCommit, RunRecord
from workload_domain.statuses import RunStatus
from workload_domain.telemetry import attempt_kind, valid_traceparent

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.sampling import Sampler

__all__ = [
    "MAX_OPEN_REMOTE_SPANS",
    "AttemptHandle",
    "AttemptScope",
    "ModelCallRecord",
    "RunScope",
    "StatementSpan",
    "ToolCallHandle",
    "attempt_attributes",
    "attempt_of",
    "context_of",
    "drops_unsampled_children",
    "error_status",
    "keep_open",
    "mark_ended",
    "ns",
    "parented",
    "run_attributes",
    "statement_attributes",
    "traceparent_of",
]

MAX_OPEN_REMOTE_SPANS = 10_000
"""Remote attempts' (and tool calls') spans kept open at most, awaiting their ends."""
_K = TypeVar("_K")


def ns(instant: datetime | None) -> int | None:
    return None if instant is None else int(instant.timestamp() * 1_000_000_000)


def traceparent_of(span_context: SpanContext) -> str | None:
    """The W3C ``traceparent`` of a span context (None for an invalid one)."""
    if not span_context.is_valid:
        return None
    flags = int(span_context.trace_flags)
    return f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{flags:02x}"


def context_of(traceparent: str | None) -> SpanContext | None:
    """The remote span context a stored ``traceparent`` names (None: none, or malformed)."""
    valid = valid_traceparent(traceparent)
    if valid is None:
        return None
    _, trace_id, span_id, flags = valid.split("-")
    return SpanContext(
        int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16))
    )


_PROBED_TRACE_IDS = (1, 2**128 - 1)
"""The lowest and highest trace ids: a ratio sampler keeps one of them unless it keeps none."""


def drops_unsampled_children(sampler: Sampler) -> bool:
    """Whether ``sampler`` drops every child of an unsampled parent, remote or local.

    Only the SDK's own ``ParentBased`` samplers are trusted — SPEC §12's
    ``parentbased_traceidratio`` and the SDK's default ``parentbased_always_on`` are — and each
    is asked once, for a child of an unsampled remote and local parent with the lowest and the
    highest trace id: with their default settings they drop all four. A subclass of another
    module, or any other sampler, may decide otherwise, and is asked for every span.
    """
    # The SDK is loaded only with tracing on, which is when a sampler exists to ask.
    from opentelemetry.sdk.trace.sampling import Decision, ParentBased  # noqa: PLC0415

    if not isinstance(sampler, ParentBased) or type(sampler).__module__ != ParentBased.__module__:
        return False
    for remote in (True, False):
        for trace_id in _PROBED_TRACE_IDS:
            parent = SpanContext(trace_id, 1, is_remote=remote, trace_flags=TraceFlags(0))
            decided = sampler.should_sample(parented(parent), trace_id, "probe")
            if decided.decision is not Decision.DROP:
                return False
    return True


def parented(parent: SpanContext | None) -> Context:
    """A context whose parent is ``parent`` — never the caller's current span (a root if None).

    Tasks inherit the context they were started from; a runner started by a request must not
    make its run a child of whatever that request's span is.
    """
    if parent is None:
        return Context()
    return trace.set_span_in_context(NonRecordingSpan(parent), Context())


def error_status(span: Span, code: str) -> None:
    span.set_attribute("error.type", code)
    span.set_status(Status(StatusCode.ERROR, code))


def mark_ended(span: Span, status: str, error_code: str | None) -> None:
    """How an attempt's (or a tool call's) span ended: its status, and its error if any."""
    span.set_attribute("workload.attempt.status", status)
    if error_code is not None:
        error_status(span, error_code)


def keep_open(spans: OrderedDict[_K, Span], key: _K, span: Span) -> None:
    """Keep a remote span until its end is written; give up the oldest beyond the bound."""
    spans[key] = span
    while len(spans) > MAX_OPEN_REMOTE_SPANS:
        _, oldest = spans.popitem(last=False)
        oldest.set_attribute("workload.attempt.abandoned", True)
        oldest.end()


class AttemptHandle:
    __slots__ = ("ended", "span")

    def __init__(self, span: Span | None) -> None:
        self.span = span
        self.ended = False

    def finished(self, status: str, error_code: str | None) -> None:
        self.ended = True
        if self.span is None:
            return
        mark_ended(self.span, status, error_code)


class ToolCallHandle(AttemptHandle):
    __slots__ = ("status",)

    def __init__(self, span: Span | None) -> None:
        super().__init__(span)
        self.status: str | None = None

    def finished(self, status: str, error_code: str | None) -> None:
        super().finished(status, error_code)
        self.status = status


class StatementSpan:
    """A statement's span: ended when the statement is, never made current.

    A statement has no children, so its span is not attached to the context (which
    ``start_as_current_span`` does, at a cost measurable per run); a statement that raises
    marks its span as failed with the exception's type.
    """

    __slots__ = ("_span",)

    def __init__(self, span: Span) -> None:
        self._span = span

    def __enter__(self) -> Span:
        return self._span

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is not None:
            error_status(self._span, kind.__qualname__)
        self._span.end()


class _CurrentSpan(Generic[_K]):
    """A span current (and known by its key) within a ``with`` block, entered once.

    A class, not a ``@contextmanager`` generator: a run and each local attempt enter one, and an
    unsampled run's whole cost is what they do (SPEC §12). An ending scope removes only its own
    registration (another scope of the same key may have replaced it, in another task).
    """

    __slots__ = ("_key", "_spans", "_token", "span")

    def __init__(self, spans: dict[_K, Span], key: _K, span: Span) -> None:
        self._spans = spans
        self._key = key
        self.span = span
        self._token: Token[Context] | None = None

    def _attach(self) -> None:
        if self._token is not None:
            raise RuntimeError("a span's scope is entered once")
        self._spans[self._key] = self.span
        self._token = otel_context.attach(trace.set_span_in_context(self.span))

    def _ending(self, interrupted: bool) -> None:
        """Say on the span how it ended, before it ends (``interrupted``: by an exception)."""

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        span = self.span
        self._ending(kind is not None)
        if self._token is not None:
            otel_context.detach(self._token)
        if self._spans.get(self._key) is span:
            del self._spans[self._key]
        span.end()


class RunScope(_CurrentSpan[str]):
    """A run's span while this process executes the run, by run id."""

    __slots__ = ()

    def __enter__(self) -> None:
        self._attach()

    def _ending(self, interrupted: bool) -> None:
        if interrupted:  # interruption (shutdown, fail-stop) writes nothing; the span says so
            self.span.set_attribute("workload.run.interrupted", True)


class AttemptScope(_CurrentSpan[tuple[str, str, int]]):
    """A local attempt's span while it executes, by (run id, task key, attempt)."""

    __slots__ = ("_handle",)

    def __init__(
        self, attempts: dict[tuple[str, str, int], Span], key: tuple[str, str, int], span: Span
    ) -> None:
        super().__init__(attempts, key, span)
        self._handle = AttemptHandle(span)

    def __enter__(self) -> AttemptHandle:
        self._attach()
        return self._handle

    def _ending(self, interrupted: bool) -> None:
        if not self._handle.ended:
            self.span.set_attribute("workload.attempt.stopped", True)


class ModelCallRecord:
    __slots__ = ("input_tokens", "output_tokens", "result")

    def __init__(self) -> None:
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.result: str | None = None

    def usage(self, *, input_tokens: int | None, output_tokens: int | None) -> None:
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens

    def outcome(self, outcome: str) -> None:
        self.result = outcome


def run_attributes(run: RunRecord) -> dict[str, Any]:
    return {
        "workload.run_id": run.run_id,
        "workload.workflow_id": run.workflow_id,
        "workload.workflow_version": run.version,
        "workload.run.recovered": run.status is not RunStatus.PENDING,
    }


def statement_attributes(name: str, sql: str) -> dict[str, str]:
    """A database statement's span attributes: its named query, never its text."""
    return {
        "db.system.name": "postgresql",
        "db.operation.name": sql.split(None, 1)[0].upper() if sql.strip() else name,
        "db.query.summary": name,
    }


def attempt_attributes(run_id: str, task_key: str, attempt: int, action: str) -> dict[str, Any]:
    return {
        "workload.run_id": run_id,
        "workload.task_key": task_key,
        "workload.attempt": attempt,
        "workload.action": action,
        "workload.attempt.kind": attempt_kind(action),
    }


def attempt_of(commit: RunCommit, task_key: str, number: int | None) -> AttemptRecord | None:
    for attempt in commit.attempts:
        if attempt.task_key == task_key and attempt.attempt == number:
            return attempt
    return None
