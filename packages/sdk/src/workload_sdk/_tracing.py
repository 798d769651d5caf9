"""Trace context for requests, when OpenTelemetry's API is installed (``workload-sdk[otel]``).

The SDK depends on httpx and pydantic only. When ``opentelemetry-api`` can be imported, each
API call is a ``CLIENT`` span (``POST /api/v1/workflows/{workflow_id}/versions/{version}/runs``)
and its requests carry the W3C ``traceparent`` of that span — or of the caller's current span
when no OpenTelemetry SDK is configured — so the server continues the caller's trace (SPEC
§12). Without the package nothing happens, at no cost. OpenTelemetry is imported on the first
request, never by ``import workload_sdk``.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

from workload_sdk._version import __version__

__all__ = ["RequestSpan", "opentelemetry_api", "request_span", "route_of"]

_PREFIX = "/api/v1/"
_IDS = {
    "workflows": "{workflow_id}",
    "versions": "{version}",
    "runs": "{run_id}",
    "tasks": "{task_key}",
    "workers": "{worker_id}",
    "attempts": "{attempt_id}",
}
_UNSET: Any = object()
_api: Any = _UNSET


def route_of(path: str) -> str:
    """The route template of an API path (``/api/v1/runs/{run_id}/cancel``).

    The API's paths alternate a collection and an id after ``/api/v1``: every second segment
    is an id, named after the collection before it.
    """
    if not path.startswith(_PREFIX):
        return path
    parts = path[len(_PREFIX) :].split("/")
    for i in range(1, len(parts), 2):
        parts[i] = _IDS.get(parts[i - 1], "{id}")
    return _PREFIX + "/".join(parts)


def opentelemetry_api() -> Any:
    """``(propagate, trace)`` of OpenTelemetry's API, or None when it is not installed.

    Imported once, on first use; the worker package loads it through here too.
    """
    global _api  # noqa: PLW0603 - loaded once, on first use
    if _api is _UNSET:
        try:
            from opentelemetry import propagate, trace  # noqa: PLC0415
        except ImportError:
            _api = None
        else:
            _api = (propagate, trace)
    return _api


class RequestSpan:
    """The span of one API call: puts its context on each request, records the answer."""

    __slots__ = ("_propagate", "_span")

    def __init__(self, span: Any = None, propagate: Any = None) -> None:
        self._span = span
        self._propagate = propagate

    def inject(self, headers: MutableMapping[str, str]) -> None:
        """Add ``traceparent`` (and ``tracestate``) for the current context to ``headers``."""
        if self._propagate is not None:
            self._propagate.inject(headers)

    def answered(self, status: int) -> None:
        """The server answered with ``status``."""
        if self._span is not None:
            self._span.set_attribute("http.response.status_code", status)
            if status >= 500:
                from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

                self._span.set_status(Status(StatusCode.ERROR))
                self._span.set_attribute("error.type", str(status))


_NOTHING = RequestSpan()


@contextmanager
def request_span(method: str, path: str, base_url: str) -> Iterator[RequestSpan]:
    """A ``CLIENT`` span around one API call (retries included), current within the block."""
    api = opentelemetry_api()
    if api is None:
        yield _NOTHING
        return
    propagate, trace = api
    route = route_of(path)
    tracer = trace.get_tracer("workload_sdk", __version__)
    attributes = {
        "http.request.method": method,
        "url.template": route,
        "url.full": f"{base_url}{path}",
    }
    with tracer.start_as_current_span(
        f"{method} {route}", kind=trace.SpanKind.CLIENT, attributes=attributes
    ) as span:
        yield RequestSpan(span, propagate)
