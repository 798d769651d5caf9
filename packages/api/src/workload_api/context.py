"""Request ids and the access log: one JSON line per request, never tokens or bodies."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import anyio
from opentelemetry import trace
from starlette.datastructures import MutableHeaders
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from workload_api._asgi import HttpMiddleware
from workload_api.problems import HttpProblem, problem_response
from workload_api.telemetry import UNMATCHED_ROUTE

__all__ = [
    "ACCESS_LOGGER",
    "CLIENT_CLOSED_REQUEST",
    "JsonFormatter",
    "OneSegmentIds",
    "RequestContext",
    "configure_logging",
    "log_request",
    "new_request_id",
]

CLIENT_CLOSED_REQUEST = 499
"""The status logged for a request whose client hung up before the answer (nginx's 499): the
client's doing, never a server error."""

ACCESS_LOGGER = "workload.access"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_log = logging.getLogger(ACCESS_LOGGER)
_errors = logging.getLogger("workload.errors")


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object; structured fields come from ``extra={"fields": …}``.

    A line written while a span is current carries its ``trace_id`` and ``span_id`` (SPEC §12):
    the request's, the run's or the attempt's, as the trace backend shows them (in an unsampled
    trace, which records nothing, the nearest parent's: ADR 0031).
    """

    def format(self, record: logging.LogRecord) -> str:
        """One line of JSON."""
        instant = datetime.fromtimestamp(record.created, UTC)
        entry: dict[str, Any] = {
            "time": instant.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}))
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            entry["trace_id"] = f"{span.trace_id:032x}"
            entry["span_id"] = f"{span.span_id:016x}"
        if record.exc_info and record.exc_info[0] is not None:
            entry["exception"] = record.exc_info[0].__name__
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure_logging(level: str = "INFO") -> None:
    """Send the service's logs (ours, uvicorn's, psycopg's, OpenTelemetry's) to stderr as JSON.

    Idempotent; libraries' warnings keep their level, ours follow ``level``. OpenTelemetry's
    warnings about a ``tracestate`` it drops (``opentelemetry.trace.span``) quote a header any
    client writes, once per request: they are not logged.
    """
    logging.getLogger("opentelemetry.trace.span").setLevel(logging.ERROR)
    for name in ("workload", "uvicorn", "psycopg", "opentelemetry"):
        logger = logging.getLogger(name)
        logger.setLevel(
            level.upper() if name == "workload" else max(logging.WARNING, _level(level))
        )
        if not any(isinstance(h.formatter, JsonFormatter) for h in logger.handlers):
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(JsonFormatter())
            logger.addHandler(handler)
        logger.propagate = False


def _level(name: str) -> int:
    value = logging.getLevelName(name.upper())
    return value if isinstance(value, int) else logging.INFO


class RequestContext(HttpMiddleware):
    """ASGI middleware: request ids, the access log, and a problem for any escaped error.

    Every response carries ``X-Request-ID``; every request logs one JSON line; an error that
    escapes a handler becomes a 500 problem (never a traceback); a client that hangs up
    mid-request is logged as 499, not as a server error; a request the server cancels (its
    shutdown grace ended) is answered 503.
    """

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one HTTP request."""
        request_id = _request_id(scope)
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        started = time.perf_counter()
        status = 500
        response_started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                response_started = True
                status = message["status"]
                MutableHeaders(scope=message)["X-Request-ID"] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except ClientDisconnect:
            # The client hung up while sending its body: nobody is left to answer.
            if not response_started:
                status = CLIENT_CLOSED_REQUEST
                state["error_code"] = "client_closed_request"
        except anyio.get_cancelled_exc_class():
            # The server cancelled this request: its shutdown grace ended (after a fail-stop:
            # the request was waiting on a database that is gone). The service is unavailable,
            # not broken: answer 503, and end the request here.
            if not response_started:
                state["error_code"] = "unavailable"
                problem = HttpProblem(503, "unavailable", "the service is stopping; try again")
                with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await problem_response(problem, request_id)(scope, receive, send_with_id)
        except Exception:
            _errors.exception("unhandled error", extra={"fields": {"request_id": request_id}})
            if not response_started:
                state["error_code"] = "internal"
                problem = HttpProblem(
                    500,
                    "internal",
                    "an internal error occurred; it was logged with this request id",
                )
                await problem_response(problem, request_id)(scope, receive, send_with_id)
        finally:
            state["status"] = status  # what the HTTP metrics count (499 included)
            log_request(
                request_id,
                method=scope["method"],
                route=state.get("route", UNMATCHED_ROUTE),
                status=status,
                seconds=time.perf_counter() - started,
                error_code=state.get("error_code"),
            )


def log_request(
    request_id: str,
    *,
    method: str,
    route: str,
    status: int,
    seconds: float,
    error_code: str | None,
) -> None:
    """The access log's line of one request (never its body, its query or its tokens)."""
    _log.info(
        "request",
        extra={
            "fields": {
                "request_id": request_id,
                "method": method,
                "route": route,
                "status": status,
                "duration_ms": round(seconds * 1000, 3),
                "error_code": error_code,
            }
        },
    )


def new_request_id() -> str:
    """A request id for a request that did not send a valid one."""
    return uuid.uuid4().hex


class OneSegmentIds:
    """ASGI middleware: a path with an encoded ``/`` (``%2F``) names no resource (404).

    The server decodes the path before routing, so ``/workflows/a%2Fversions`` — an id holding a
    ``/``, escaped as a client must — would reach ``/workflows/a/versions``: another resource.
    No id of ours may hold a ``/`` (workflow ids, task keys and worker ids exclude it; run,
    attempt, approval and draft ids are UUIDs), so such a path is no resource's.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 404 for a path with an encoded slash; pass anything else on."""
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw is not None and b"%2f" in raw.lower():
            state = scope.setdefault("state", {})
            state["error_code"] = "not_found"
            problem = HttpProblem(404, "not_found", "no such resource")
            request_id = str(state.get("request_id", ""))
            await problem_response(problem, request_id)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _request_id(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            candidate: str = value.decode("latin-1")
            if _REQUEST_ID.fullmatch(candidate):
                return candidate
            break
    return new_request_id()
