"""The handler's span, continuing the run's trace, when OpenTelemetry's API is installed.

A claim item carries the ``traceparent`` of its attempt's span on the server (SPEC §12). With
``opentelemetry-api`` importable (``workload-worker[otel]``), each attempt runs in a
``CONSUMER`` span ``handle {action}`` (``execute_tool {tool}`` for an agent's tool call) whose
parent is that context; the handler's own spans, and the SDK's heartbeat and report requests,
are its children. The worker configures no OpenTelemetry SDK itself: the program that runs it
does (it uses the global tracer provider). Without the package: nothing. OpenTelemetry's API
is loaded by the SDK's loader (``workload_sdk._tracing``), once for both.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from workload_sdk import ClaimedAttempt
from workload_sdk._tracing import opentelemetry_api

__all__ = ["HandlerSpan", "handler_span"]

_VERSION = "0.1.0"


class HandlerSpan:
    """The span of one attempt in the worker: told how the attempt ended."""

    __slots__ = ("_span",)

    def __init__(self, span: Any = None) -> None:
        self._span = span

    def outcome(self, outcome: str, error_code: str | None = None) -> None:
        """``completed``, ``failed`` (with its code) or ``dropped`` (the lease was lost)."""
        if self._span is None:
            return
        self._span.set_attribute("workload.outcome", outcome)
        if error_code is not None:
            from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

            self._span.set_attribute("error.type", error_code)
            self._span.set_status(Status(StatusCode.ERROR, error_code))


_NOTHING = HandlerSpan()


@contextmanager
def handler_span(item: ClaimedAttempt, worker_id: str) -> Iterator[HandlerSpan]:
    """The attempt's span, a child of the claim item's ``traceparent``, current in the block."""
    api = opentelemetry_api()
    if api is None:
        yield _NOTHING
        return
    propagate, trace = api
    parent = propagate.extract({"traceparent": item.traceparent}) if item.traceparent else None
    name = f"execute_tool {item.tool}" if item.tool else f"handle {item.action}"
    attributes: dict[str, Any] = {
        "workload.run_id": item.run_id,
        "workload.task_key": item.task_key,
        "workload.attempt": item.attempt,
        "workload.attempt_id": item.attempt_id,
        "workload.action": item.action,
        "workload.queue": item.queue,
        "workload.worker_id": worker_id,
    }
    if item.tool:
        attributes["gen_ai.operation.name"] = "execute_tool"
        attributes["gen_ai.tool.name"] = item.tool
        if item.tool_call_id:
            attributes["gen_ai.tool.call.id"] = item.tool_call_id
    tracer = trace.get_tracer("workload_worker", _VERSION)
    with tracer.start_as_current_span(
        name, context=parent, kind=trace.SpanKind.CONSUMER, attributes=attributes
    ) as span:
        yield HandlerSpan(span)
