"""A deadline on the time a request's body may take to arrive (slow clients, ADR 0024).

uvicorn bounds the headers (with :func:`~workload_api._http_server.guarded_httptools`, or
:func:`~workload_api._http_server.guarded_h11`) and idle kept-alive connections, but not a body:
a client sending one byte every few seconds would hold its request, and whatever the handler
holds while it reads, for ever. :class:`BodyDeadline` gives each request ``timeout`` seconds
from the moment its headers were complete until the last byte of its body. A read still waiting
then fails with 408 ``request_timeout``, a problem (or the console's error page), and the
response closes the connection (RFC 9110 §15.5.9): the rest of the body is never read.

Only reads the handler makes count: a request answered without reading its body (a console
POST without a session, say) is never waited for, and once the body is complete the deadline
is over (an event stream waiting for its client to hang up is not affected). A response that
starts while a declared body is still unread closes the connection too: the server would
otherwise read (and wait for) the rest of a body nobody wants before the next request.
"""

from __future__ import annotations

import time

import anyio
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from workload_api._asgi import HttpMiddleware
from workload_api.problems import HttpProblem, problem_response

__all__ = ["BodyDeadline", "BodyTimeout"]


class BodyTimeout(HttpProblem):
    """The request's body did not arrive in time: 408 ``request_timeout``."""

    def __init__(self, timeout: float) -> None:
        super().__init__(
            408,
            "request_timeout",
            f"the request body did not arrive within {timeout:g} seconds",
        )


class BodyDeadline(HttpMiddleware):
    """ASGI middleware: a request's body must arrive within ``timeout`` seconds of its headers."""

    def __init__(self, app: ASGIApp, *, timeout: float) -> None:
        super().__init__(app)
        self.timeout = timeout

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one HTTP request."""
        deadline = time.monotonic() + self.timeout
        body_complete = not _declares_body(scope)
        expired = False
        response_started = False

        async def bounded_receive() -> Message:
            nonlocal body_complete, expired
            if body_complete:
                return await receive()
            message: Message | None = None
            with anyio.move_on_after(deadline - time.monotonic()):
                message = await receive()
            if message is None:
                expired = True
                raise BodyTimeout(self.timeout)
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_complete = True
            return message

        async def closing_send(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
                if expired or not body_complete:
                    # The rest of the body is still on its way: this connection is done.
                    MutableHeaders(scope=message)["Connection"] = "close"
            await send(message)

        try:
            await self.app(scope, bounded_receive, closing_send)
        except BodyTimeout as timeout:
            # A read outside a handler's own problem handling (a background listener, say).
            # Once an answer has begun there is nothing more to say: the connection closes.
            if response_started:
                return
            state = scope.setdefault("state", {})
            state["error_code"] = timeout.code
            answer = problem_response(timeout, str(state.get("request_id", "-")))
            await answer(scope, receive, closing_send)


def _declares_body(scope: Scope) -> bool:
    """Whether the request's headers announce a body (a non-zero length, or chunks)."""
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding":
            return True
        if name == b"content-length":
            return value.strip() not in (b"", b"0")
    return False
