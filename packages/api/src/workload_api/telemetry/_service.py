"""The telemetry port's adapter: Prometheus metrics and OpenTelemetry spans (SPEC §12).

One trace follows a run from the client to the worker::

    client span (SDK) ─► HTTP server span  POST /api/v1/workflows/{workflow_id}/versions/…/runs
                               │ traceparent stored with the run
                               ▼
                         run {workflow_id}  (child of, and linked to, the creating request)
                           ├── attempt {task_key}   local: while the executor runs
                           ├── attempt {task_key}   remote: queued → settled; the claim
                           │     │                  hands the worker this span's context
                           │     └── handle {action}   (the worker SDK)
                           └── chat {model} / execute_tool {name}   (the agent runtime)
                                 │                  in-process: while the tool runs;
                                 │                  remote: queued → ended, as an attempt
                                 └── handle {action}   (the worker SDK, a remote tool)

The run span lives while this process executes the run; after a restart the next coordinator's
run span joins the same trace (the stored context). Remote attempts' spans are ended by the
commit that settles them; one whose commit happens elsewhere (another process) is given up
after :data:`MAX_OPEN_REMOTE_SPANS` newer ones. A remote tool call's span is started by its
claim and ended with explicit timestamps (the step's) when its end is written: a worker's
report, a passed deadline, or the commit that ended its agent attempt. One that ends in a
process that did not see its claim is recorded there whole, from the step's times, under its
agent attempt's (or run's) span when this process executes the run.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
)

from workload_api.telemetry import genai
from workload_api.telemetry._metrics import Metrics
from workload_api.telemetry._spans import (
    MAX_OPEN_REMOTE_SPANS,
    AttemptScope,
    ModelCallRecord,
    RunScope,
    StatementSpan,
    ToolCallHandle,
    attempt_attributes,
    attempt_of,
    context_of,
    drops_unsampled_children,
    error_status,
    keep_open,
    mark_ended,
    ns,
    parented,
    run_attributes,
    statement_attributes,
    traceparent_of,
)
from workload_domain.agent.journal import StepRecord
from workload_domain.events import EventType
from workload_domain.records import AttemptRecord, RunCommit, RunRecord
from workload_domain.statuses import AttemptStatus, RunStatus
from workload_domain.telemetry import (
    LEASE_EXPIRED,
    TOOL_KIND,
    UNTRACED_ATTEMPT,
    AttemptSpan,
    ModelCall,
    attempt_kind,
    tool_call_end,
)
from workload_domain.workers import ClaimedAttempt

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["MAX_OPEN_REMOTE_SPANS", "ServiceTelemetry", "context_of", "traceparent_of"]

INSTRUMENTATION = "workload"
_RUN_ENDS = {
    EventType.RUN_SUCCEEDED: RunStatus.SUCCEEDED,
    EventType.RUN_FAILED: RunStatus.FAILED,
    EventType.RUN_CANCELED: RunStatus.CANCELED,
}
_ATTEMPT_ENDS = {
    EventType.ATTEMPT_SUCCEEDED: AttemptStatus.SUCCEEDED,
    EventType.ATTEMPT_FAILED: AttemptStatus.FAILED,
    EventType.ATTEMPT_TIMED_OUT: AttemptStatus.TIMED_OUT,
    EventType.ATTEMPT_CANCELED: AttemptStatus.CANCELED,
    EventType.ATTEMPT_INTERRUPTED: AttemptStatus.INTERRUPTED,
}
_MAX_STATEMENT_NAMES = 1000
_NOT_TRACED = nullcontext()
_FLUSH_MILLIS = 5000
_MAX_HANDED = 256


class ServiceTelemetry:
    """Metrics always; spans when a tracer provider is given (``OTEL_TRACES_EXPORTER`` set)."""

    def __init__(
        self,
        metrics: Metrics,
        tracer_provider: TracerProvider | None = None,
        *,
        endpoint_providers: Mapping[str, str] | None = None,
    ) -> None:
        self.metrics = metrics
        self._endpoint_providers = dict(endpoint_providers or {})
        """Each configured model endpoint's provider kind (``local`` → ``openai``)."""
        self.provider = tracer_provider
        self._tracer = (
            None if tracer_provider is None else tracer_provider.get_tracer(INSTRUMENTATION)
        )
        self._drops_unsampled = tracer_provider is not None and drops_unsampled_children(
            tracer_provider.sampler
        )
        self._runs: dict[str, Span] = {}
        self._statements: dict[str, dict[str, str]] = {}
        self._remote: OrderedDict[tuple[str, str, int], Span] = OrderedDict()
        self._tools: OrderedDict[str, Span] = OrderedDict()
        """Remote tool calls' spans by step id: started by the claim, ended with the step."""
        self._attempts: dict[tuple[str, str, int], Span] = {}
        """Local attempts' spans while they execute (a remote tool call's parent)."""
        self._handed: dict[str, SpanContext] = {}
        """Unsampled contexts handed to new runs by :meth:`current_traceparent`, by their
        ``traceparent``: the run's scope takes its context here instead of parsing it back."""

    @property
    def endpoint_providers(self) -> dict[str, str]:
        """Each configured model endpoint's provider kind, as the spans name it."""
        return dict(self._endpoint_providers)

    @property
    def tracing(self) -> bool:
        """Whether spans are recorded."""
        return self._tracer is not None

    @property
    def tracer(self) -> trace.Tracer:
        """The service's tracer (a no-op one when tracing is off)."""
        return self._tracer or trace.NoOpTracer()

    def unsampled(self, parent: SpanContext | None) -> bool:
        """Whether the sampler would drop a child of ``parent`` — decided without asking it.

        Such a child gets no span (its parent's context goes on): an unsampled request costs
        its root's sampling decision and no SDK call after it (SPEC §12, ADR 0031).
        """
        return (
            self._drops_unsampled
            and parent is not None
            and parent.is_valid
            and not parent.trace_flags.sampled
        )

    def flush(self) -> None:
        """Export the spans still buffered (the lifecycle calls it when the service stops)."""
        if self.provider is not None:
            self.provider.force_flush(_FLUSH_MILLIS)

    # -- commits: counters, and the ends of remote attempts and runs ------------------------

    def committed(self, commit: RunCommit) -> None:
        """Count what the commit's events say happened; end the spans that ended."""
        metrics = self.metrics
        run_id = commit.run.run_id
        for event in commit.events:
            kind = event.type
            if kind is EventType.RUN_STARTED:
                metrics.runs_started.inc()
            elif kind in _RUN_ENDS:
                metrics.run_finished(_RUN_ENDS[kind].value)
                self._run_ended(run_id, _RUN_ENDS[kind])
            elif kind in _ATTEMPT_ENDS and event.task_key is not None:
                attempt = attempt_of(commit, event.task_key, event.attempt)
                if attempt is None:  # pragma: no cover - a commit always carries its attempts
                    continue
                status = _ATTEMPT_ENDS[kind]
                code = None if attempt.error is None else attempt.error.code
                self._count_attempt(status, attempt_kind(attempt.action), code)
                self._remote_ended(run_id, attempt, status, code)

    def _count_attempt(self, status: AttemptStatus | str, kind: str, code: str | None) -> None:
        """An attempt (or a tool call: ``kind`` ``tool``) finished; a lease expiry counts too."""
        value = status.value if isinstance(status, AttemptStatus) else status
        self.metrics.attempt_finished(value, kind)
        if value == AttemptStatus.INTERRUPTED.value and code == LEASE_EXPIRED:
            self.metrics.leases_expired.inc()

    def _run_ended(self, run_id: str, status: RunStatus) -> None:
        span = self._runs.get(run_id)
        if span is None:
            return
        span.set_attribute("workload.run.status", status.value)
        if status is RunStatus.FAILED:
            span.set_status(Status(StatusCode.ERROR, "the run failed"))

    def _remote_ended(
        self, run_id: str, attempt: AttemptRecord, status: AttemptStatus, code: str | None
    ) -> None:
        span = self._remote.pop((run_id, attempt.task_key, attempt.attempt), None)
        if span is None:
            return
        span.set_attribute("workload.attempt.status", status.value)
        if code is not None:
            error_status(span, code)
        span.end(ns(attempt.finished_at))

    # -- runs and local attempts --------------------------------------------------------------

    def run(self, run: RunRecord) -> AbstractContextManager[None]:
        """The run's span, current while this process executes the run."""
        if self._tracer is None:
            return _NOT_TRACED
        handed = None if run.traceparent is None else self._handed.pop(run.traceparent, None)
        creator = handed or context_of(run.traceparent)
        span: Span
        if creator is not None and (handed is not None or self.unsampled(creator)):
            span = NonRecordingSpan(creator)
        else:
            span = self._tracer.start_span(
                f"run {run.workflow_id}",
                context=parented(creator),
                links=[] if creator is None else [Link(creator, {"workload.link": "created_by"})],
            )
        if span.is_recording():  # an unsampled run: no attribute is built (ADR 0031)
            span.set_attributes(run_attributes(run))
        return RunScope(self._runs, run.run_id, span)

    def attempt(
        self, run_id: str, task_key: str, attempt: int, action: str
    ) -> AbstractContextManager[AttemptSpan]:
        """A local attempt's span (a child of the current run span), current in the block."""
        if self._tracer is None or self.unsampled(trace.get_current_span().get_span_context()):
            return UNTRACED_ATTEMPT
        span = self._tracer.start_span(f"attempt {task_key}")
        if span.is_recording():
            span.set_attributes(attempt_attributes(run_id, task_key, attempt, action))
        return AttemptScope(self._attempts, (run_id, task_key, attempt), span)

    # -- remote attempts ---------------------------------------------------------------------

    def claimed(self, worker_id: str, claimed: ClaimedAttempt, now: datetime) -> str | None:
        """Observe schedule-to-start; start the attempt's span; its context for the worker."""
        if claimed.queued_at is not None:
            waited = max((now - claimed.queued_at).total_seconds(), 0.0)
            self.metrics.claimed(claimed.queue, waited)
        if self._tracer is None:
            return claimed.traceparent
        if claimed.kind == "tool_call":
            return self._tool_claimed(worker_id, claimed, now)
        run_span = self._runs.get(claimed.run_id)
        parent = (
            run_span.get_span_context() if run_span is not None else context_of(claimed.traceparent)
        )
        if parent is not None and self.unsampled(parent):
            return traceparent_of(parent)
        span = self._tracer.start_span(
            f"attempt {claimed.task_key}",
            context=parented(parent),
            start_time=ns(claimed.queued_at),
        )
        if span.is_recording():
            attributes: dict[str, Any] = attempt_attributes(
                claimed.run_id, claimed.task_key, claimed.attempt, claimed.action
            )
            attributes.update({"workload.queue": claimed.queue, "workload.worker_id": worker_id})
            span.set_attributes(attributes)
            span.add_event("claimed", {"workload.worker_id": worker_id}, timestamp=ns(now))
        keep_open(self._remote, (claimed.run_id, claimed.task_key, claimed.attempt), span)
        return traceparent_of(span.get_span_context()) or claimed.traceparent

    # -- remote tool calls ---------------------------------------------------------------------

    def _tool_parent(self, run_id: str, task_key: str, attempt: int) -> SpanContext | None:
        """A tool call's parent: its agent attempt's span, else its run's, in this process."""
        span = self._attempts.get((run_id, task_key, attempt)) or self._runs.get(run_id)
        return None if span is None else span.get_span_context()

    def _tool_claimed(self, worker_id: str, claimed: ClaimedAttempt, now: datetime) -> str | None:
        """Start a remote tool call's ``execute_tool`` span; its context for the worker."""
        assert self._tracer is not None
        parent = self._tool_parent(claimed.run_id, claimed.task_key, claimed.attempt)
        parent = parent or context_of(claimed.traceparent)
        if parent is not None and self.unsampled(parent):
            return traceparent_of(parent)
        span = genai.start_tool_span(
            self._tracer,
            name=claimed.tool or claimed.action,
            call_id=claimed.tool_call_id,
            context=parented(parent),
            start_time=ns(claimed.queued_at),
        )
        span.set_attributes(
            {
                **attempt_attributes(
                    claimed.run_id, claimed.task_key, claimed.attempt, claimed.action
                ),
                "workload.attempt.kind": TOOL_KIND,
                "workload.queue": claimed.queue,
                "workload.worker_id": worker_id,
            }
        )
        span.add_event("claimed", {"workload.worker_id": worker_id}, timestamp=ns(now))
        keep_open(self._tools, claimed.attempt_id, span)
        return traceparent_of(span.get_span_context()) or claimed.traceparent

    def tool_call_ended(self, step: StepRecord, closed_by: AttemptRecord | None = None) -> None:
        """A remote tool call ended: a ``tool`` attempt finished; its span ends at its end.

        Its span is the one its claim started here; else (claimed elsewhere, before a restart,
        or never claimed) it is recorded now, whole, with the step's times, under its agent
        attempt's or run's span when this process executes the run.
        """
        status, code = tool_call_end(step, closed_by)
        self._count_attempt(status, TOOL_KIND, code)
        span = self._tools.pop(step.step_id, None)
        if span is None and self._tracer is not None:
            parent = self._tool_parent(step.run_id, step.task_key, step.attempt)
            if parent is None or self.unsampled(parent):
                return  # no trace of this run is known here, or it is not sampled
            span = genai.start_tool_span(
                self._tracer,
                name=str(step.request.get("tool", step.action or "")),
                call_id=step.tool_call_id,
                context=parented(parent),
                start_time=ns(step.started_at),
            )
            span.set_attributes(
                {
                    **attempt_attributes(
                        step.run_id, step.task_key, step.attempt, step.action or ""
                    ),
                    "workload.attempt.kind": TOOL_KIND,
                }
            )
            if step.claimed_at is not None:
                attributes = {"workload.worker_id": step.worker_id or ""}
                span.add_event("claimed", attributes, timestamp=ns(step.claimed_at))
        if span is None:
            return
        mark_ended(span, status.value, code)
        span.end(ns(step.finished_at))

    # -- requests and statements ---------------------------------------------------------------

    def current_traceparent(self) -> str | None:
        """The current context's ``traceparent`` (the request's span, or the caller's).

        An unsampled one is also kept, a few hundred at most, for the run it is stored with:
        the run's scope, in this process, takes the context as it is (≈ 19,000 instructions
        of parsing saved a run). Only where children of an unsampled parent are dropped
        whether it is remote or not (:meth:`unsampled`), so the copy's ``is_remote`` is moot.
        """
        context = trace.get_current_span().get_span_context()
        traceparent = traceparent_of(context)
        if traceparent is not None and self.unsampled(context):
            handed = self._handed
            handed[traceparent] = context
            if len(handed) > _MAX_HANDED:  # runs created here and executed elsewhere
                del handed[next(iter(handed))]
        return traceparent

    def traces_statements(self) -> bool:
        """Whether a statement run now would be a span: within a recording span only."""
        return self._tracer is not None and trace.get_current_span().is_recording()

    def statement(self, name: str, sql: str) -> AbstractContextManager[object]:
        """A database statement's span, within a traced request, run or attempt only.

        Background duties (the lease reaper, the sweep, the lock check) poll: their statements
        would be a root trace each, every second. The span names the statement's named query
        (``db.query.summary``; its text is in ``queries.sql``): the text itself is not copied
        into every span, which would double what a trace costs to export.
        """
        if not self.traces_statements():
            return _NOT_TRACED
        assert self._tracer is not None  # traces_statements: a tracer is set
        attributes = self._statements.get(name)
        if attributes is None:
            attributes = statement_attributes(name, sql)
            if len(self._statements) < _MAX_STATEMENT_NAMES:
                self._statements[name] = attributes
        return StatementSpan(
            self._tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes)
        )

    # -- the agent runtime's hooks -------------------------------------------------------------

    @contextmanager
    def model_call(
        self, *, provider: str, model: str, operation: str = "chat"
    ) -> Iterator[ModelCall]:
        """A model call: a GenAI span, ``workload_model_calls_total`` and the tokens.

        ``provider`` is the model name's prefix, the endpoint: the metrics count per endpoint
        (ADR 0027); the span names the endpoint's provider kind as ``gen_ai.provider.name``
        and the endpoint as ``workload.model.endpoint``.
        """
        call = ModelCallRecord()
        kind = self._endpoint_providers.get(provider, provider)
        with genai.chat_span(
            self.tracer, provider=kind, model=model, operation=operation, endpoint=provider
        ) as span:
            try:
                yield call
            except BaseException as exc:
                call.result = call.result or type(exc).__name__
                raise
            finally:
                outcome = call.result or "ok"
                genai.record_usage(
                    span, input_tokens=call.input_tokens, output_tokens=call.output_tokens
                )
                if outcome != "ok":
                    genai.failed(span, outcome)
                self.metrics.model_call(
                    provider,
                    "ok" if outcome == "ok" else "error",
                    call.input_tokens,
                    call.output_tokens,
                )

    @contextmanager
    def tool_call(self, name: str, *, call_id: str | None = None) -> Iterator[AttemptSpan]:
        """A tool call: an ``execute_tool {name}`` span; its end counts as a ``tool`` attempt."""
        with genai.tool_span(self.tracer, name=name, call_id=call_id) as span:
            handle = ToolCallHandle(span if span.is_recording() else None)
            yield handle
        if handle.status is not None:
            self._count_attempt(handle.status, TOOL_KIND, None)
