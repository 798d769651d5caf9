"""The service's ASGI middlewares act on HTTP requests only (``HttpMiddleware``).

A scope of any other type (the server's ``lifespan``, a ``websocket``) reaches the wrapped
application as it came, with the same ``receive`` and ``send``, and the middleware adds nothing;
an HTTP request goes through the middleware's own ``http``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from workload_api._asgi import HttpMiddleware
from workload_api._body_deadline import BodyDeadline
from workload_api.console._headers import SecurityHeaders
from workload_api.container import Container, use_memory_store
from workload_api.context import RequestContext
from workload_api.settings import Settings
from workload_api.telemetry import HttpTelemetry, ServiceTelemetry

pytestmark = pytest.mark.anyio


@functools.cache
def _telemetry() -> ServiceTelemetry:
    """One service's telemetry, made at first use (its metrics are read by the HTTP test)."""
    telemetry: ServiceTelemetry = use_memory_store(
        Container(settings=Settings.model_construct())
    ).telemetry()
    return telemetry


MIDDLEWARES: dict[str, Callable[[ASGIApp], HttpMiddleware]] = {
    "request-context": RequestContext,
    "security-headers": SecurityHeaders,
    "body-deadline": lambda app: BodyDeadline(app, timeout=5),
    "http-telemetry": lambda app: HttpTelemetry(app, _telemetry()),
}


class Recorder:
    """An ASGI app that records what reached it and answers an HTTP request 204."""

    def __init__(self) -> None:
        self.calls: list[tuple[Scope, Receive, Send]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.calls.append((scope, receive, send))
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})


@pytest.mark.parametrize("name", MIDDLEWARES)
@pytest.mark.parametrize("kind", ["lifespan", "websocket"])
async def test_a_scope_that_is_not_http_passes_through_untouched(name: str, kind: str) -> None:
    inner = Recorder()
    scope: dict[str, Any] = {"type": kind, "path": "/ui/runs", "headers": []}
    before = dict(scope)
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": f"{kind}.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await MIDDLEWARES[name](inner)(scope, receive, send)

    assert len(inner.calls) == 1
    seen, seen_receive, seen_send = inner.calls[0]
    assert seen is scope
    assert seen == before
    assert (seen_receive, seen_send) == (receive, send)
    assert sent == []


def _did_its_part(name: str, sent: list[Message], receive: Receive, seen: Receive) -> bool:
    (start,) = [m for m in sent if m["type"] == "http.response.start"]
    headers = {k.decode().lower() for k, _ in start["headers"]}
    if name == "request-context":
        return "x-request-id" in headers
    if name == "security-headers":
        return "content-security-policy" in headers
    if name == "body-deadline":
        return seen is not receive  # the body is read against the deadline
    return b'workload_http_requests_total{method="GET"' in _telemetry().metrics.exposition()


@pytest.mark.parametrize("name", MIDDLEWARES)
async def test_an_http_request_goes_through_the_middleware(name: str) -> None:
    inner = Recorder()
    scope: dict[str, Any] = {
        "type": "http",
        "method": "GET",
        "path": "/ui/runs",
        "raw_path": b"/ui/runs",
        "query_string": b"",
        "headers": [],
        "state": {},
    }
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await MIDDLEWARES[name](inner)(scope, receive, send)

    assert len(inner.calls) == 1
    (start,) = [m for m in sent if m["type"] == "http.response.start"]
    assert start["status"] == 204
    assert _did_its_part(name, sent, receive, inner.calls[0][1])
