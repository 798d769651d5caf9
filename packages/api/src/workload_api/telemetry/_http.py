"""ASGI middleware: the HTTP server span and the HTTP metrics of every request (SPEC §12).

It sits outside :class:`~workload_api.context.RequestContext`, so the access log line is
written inside the request's span (it carries ``trace_id``/``span_id``) and the metrics see the
status that middleware decided (a 499 for a client that hung up, a 500 or 503 it answered).

A W3C ``traceparent`` header is accepted on every request: with tracing on, the server span is
its child; with tracing off, its context is still made current, so that a run created by the
request keeps the caller's trace context (and hands it to workers).
"""

from __future__ import annotations

import time
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from workload_api._asgi import HttpMiddleware
from workload_api.telemetry._metrics import http_method
from workload_api.telemetry._service import ServiceTelemetry

__all__ = ["UNMATCHED_ROUTE", "HttpTelemetry"]

UNMATCHED_ROUTE = "<unmatched>"
"""The ``route`` of a request no route matched (one label value for every such path)."""
_TRACE_HEADERS = frozenset({b"traceparent", b"tracestate"})


def _carrier(scope: Scope) -> dict[str, str] | None:
    """The trace headers of a request, or None when it sends none (the common, cheap case)."""
    found: dict[str, str] | None = None
    for name, value in scope["headers"]:
        if name in _TRACE_HEADERS:
            found = found or {}
            found[name.decode("latin-1")] = value.decode("latin-1")
    return found


class HttpTelemetry(HttpMiddleware):
    """Times, counts and traces every HTTP request."""

    def __init__(self, app: ASGIApp, telemetry: ServiceTelemetry) -> None:
        super().__init__(app)
        self._telemetry = telemetry
        self._metrics = telemetry.metrics
        self._roots = None
        if telemetry.provider is not None:  # the SDK is loaded: tracing is on
            from workload_api.telemetry._roots import root_sampling  # noqa: PLC0415

            self._roots = root_sampling(telemetry.provider)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one HTTP request."""
        started = time.perf_counter()
        state: dict[str, Any] = scope.setdefault("state", {})
        carrier = _carrier(scope)
        parent = None if carrier is None else propagate.extract(carrier)
        method = scope["method"]
        telemetry = self._telemetry
        tracer = telemetry.tracer if telemetry.tracing else None
        if parent is not None and telemetry.unsampled(
            trace.get_current_span(parent).get_span_context()
        ):
            tracer = None  # the caller's unsampled context goes on, with no span of ours
        span = None
        if tracer is not None:
            if parent is None and self._roots is not None:  # a root: decided before the SDK
                span = self._roots.start(tracer, http_method(method), SpanKind.SERVER)
            else:
                span = tracer.start_span(http_method(method), context=parent, kind=SpanKind.SERVER)
            if span.is_recording():  # an unsampled request: no attribute is built (ADR 0031)
                span.set_attributes(_request_attributes(scope, method))
            token = otel_context.attach(trace.set_span_in_context(span, parent))
        elif parent is not None:
            token = otel_context.attach(parent)
        else:
            token = None
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = state.get("route", UNMATCHED_ROUTE)
            status = state.get("status", status)
            self._metrics.request(route, method, status, time.perf_counter() - started)
            if span is not None and span.is_recording():
                span.update_name(f"{http_method(method)} {route}")
                span.set_attribute("http.route", route)
                span.set_attribute("http.response.status_code", status)
                request_id = state.get("request_id")
                if request_id is not None:
                    span.set_attribute("workload.request_id", request_id)
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
                    span.set_attribute("error.type", str(status))
            if span is not None:
                span.end()
            if token is not None:
                otel_context.detach(token)


def _request_attributes(scope: Scope, method: str) -> dict[str, Any]:
    return {
        "http.request.method": http_method(method),
        "url.path": scope["path"],
        "url.scheme": scope.get("scheme", "http"),
    }
