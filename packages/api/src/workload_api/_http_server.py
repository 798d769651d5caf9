"""uvicorn as the service runs it: our signals, bounded shutdowns, and slow clients timed out.

- :class:`HttpServer` leaves signals to the coordinator (so SIGTERM exits 0, not −15) and bounds
  the graceful shutdown: ``shutdown_grace`` on a stop, ``FAIL_STOP_GRACE`` on a fail-stop (the
  database is known dead: in-flight requests must not be waited for). Requests still running
  when the grace ends are cancelled then, with a warning (each is answered 503 by
  :class:`~workload_api.context.RequestContext`), and not waited for much longer: a bounded stop
  is the design, not an error (uvicorn's own timeout, which logs one, is left as a backstop).
- :func:`guarded_h11` makes uvicorn's h11 protocol close a connection whose request headers
  have not all arrived within ``header_timeout`` seconds of its first byte (or of the
  connection, for one that sends nothing). uvicorn alone closes only *idle keep-alive*
  connections; a client sending headers at one byte a second would hold its connection forever.
  The timer stops once the headers are complete, so long-polls and event streams, which wait
  after their request, are not affected; a head pipelined behind an answer and not whole when
  that answer ends is timed from then. A request that is not valid HTTP/1.1 (a raw byte
  outside ASCII in its target, a malformed header, a negative ``Content-Length``) is answered
  as every other 400: a problem with a request id, logged in the access log (uvicorn's own
  answer is a bare text with neither).
- :func:`guarded_httptools` does the same for uvicorn's httptools protocol (llhttp, in C), the
  default parser (ADR 0036; ``WORKLOAD_HTTP_PARSER=h11`` keeps h11). llhttp keeps no limit of
  its own on a request head, so the guard adds one: the target and the header names and values
  together at most :data:`MAX_HEAD_BYTES`, at most :data:`MAX_HEADERS` header lines, and at
  most twice :data:`MAX_HEAD_BYTES` received while a head is incomplete (the memory bound for
  one header sent without end). A request past either is answered 400, as a malformed one is.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from workload_api.context import log_request, new_request_id
from workload_api.problems import HttpProblem, problem_response
from workload_api.telemetry import UNMATCHED_ROUTE

if TYPE_CHECKING:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = [
    "FAIL_STOP_GRACE",
    "MAX_HEADERS",
    "MAX_HEAD_BYTES",
    "HttpParser",
    "HttpServer",
    "guarded_h11",
    "guarded_httptools",
    "guarded_protocol",
]

HttpParser = Literal["httptools", "h11"]
"""The HTTP/1.1 parsers the service can run (``WORKLOAD_HTTP_PARSER``)."""
MAX_HEAD_BYTES = 64 * 1024
"""The most a request's target and header names and values may hold together (httptools)."""
MAX_HEADERS = 100
"""The most header lines a request may have (httptools)."""

FAIL_STOP_GRACE = 1
"""Seconds in-flight requests get once the service has failed (their database is gone)."""
_SETTLE_SECONDS = 0.5
"""How long requests cancelled at the end of the grace get to answer before the stop goes on."""
_BACKSTOP_SECONDS = 5
"""uvicorn's own bound, after the grace: never reached unless the event loop is stuck."""

_log = logging.getLogger("workload.http")


class HttpServer(uvicorn.Server):
    """uvicorn without its own signal handling, with a graceful shutdown the caller bounds."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    _shutting_down = False
    """Set once the shutdown began: its grace is fixed then (the timers below bound it)."""

    def stop(self, *, grace: int | None = None) -> None:
        """Stop accepting and serving; wait at most ``grace`` seconds for in-flight requests.

        A stop once the shutdown began changes nothing: it would lower uvicorn's own bound,
        the backstop, to the grace (a fail-stop is often reported twice, by execution and by the
        lock check), and uvicorn would cancel the requests itself with an error line.
        """
        if grace is not None and not self._shutting_down:
            current = self.config.timeout_graceful_shutdown
            self.config.timeout_graceful_shutdown = (
                grace if current is None else min(current, grace)
            )
        self.should_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Shut down as uvicorn does; requests still running when the grace ends are cancelled."""
        self._shutting_down = True
        grace = self.config.timeout_graceful_shutdown
        if grace is None:
            await super().shutdown(sockets)
            return
        loop = asyncio.get_running_loop()
        timers = [
            loop.call_later(grace, self._cancel_requests, grace),
            loop.call_later(grace + _SETTLE_SECONDS, self._stop_waiting),
        ]
        self.config.timeout_graceful_shutdown = grace + _BACKSTOP_SECONDS
        try:
            await super().shutdown(sockets)
        finally:
            for timer in timers:
                timer.cancel()

    def _cancel_requests(self, grace: int) -> None:
        running = list(self.server_state.tasks)
        if not running:
            return
        _log.warning(
            "cancelled the requests still running at the end of the shutdown grace",
            extra={"fields": {"requests": len(running), "grace_seconds": grace}},
        )
        for task in running:
            task.cancel(msg="the shutdown grace ended")

    def _stop_waiting(self) -> None:
        # A request cancelled inside a database that stopped answering waits while psycopg
        # tries to cancel its query on the server (seconds more): the stop goes on without it,
        # as it does after uvicorn's own timeout. It answers when the event loop ends.
        if self.server_state.tasks:
            self.force_exit = True


class _HeaderGuard(asyncio.Protocol, abc.ABC):
    """The header timer of both guarded protocols, placed before uvicorn's protocol class.

    The timer starts with the connection (one that sends nothing is closed too) and, once it has
    stopped, again when a request head begins while the connection is :meth:`_idle`; the protocol
    stops it when the head is complete (:meth:`_disarm`). If it ends while the connection is
    still idle, the connection is closed.
    """

    _header_timeout: ClassVar[float]
    """Seconds a request's headers may take (each guard's factory sets it)."""
    _header_timer: asyncio.TimerHandle | None = None

    # Set by uvicorn's protocol (declared here with its types, for the timer's use).
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    @abc.abstractmethod
    def _idle(self) -> bool:
        """The connection waits for a request head (it may be partly received), answering none."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _head_begins(self) -> None:
        """A request head begins: it is timed, unless the timer runs or a request is answered."""
        if self._header_timer is None and self._idle():
            self._arm()

    def _arm(self) -> None:
        self._header_timer = self.loop.call_later(self._header_timeout, self._expire)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expire(self) -> None:
        self._header_timer = None
        if self._idle() and not self.transport.is_closing():
            _log.info(
                "closed a connection whose request headers took too long",
                extra={"fields": {"header_timeout_seconds": self._header_timeout}},
            )
            self.transport.close()


def guarded_h11(header_timeout: float) -> type[H11Protocol]:
    """Uvicorn's h11 protocol with a bound on the time a request's headers may take."""

    class GuardedH11Protocol(_HeaderGuard, H11Protocol):
        _header_timeout = header_timeout

        def data_received(self, data: bytes) -> None:
            self._head_begins()  # the first byte of the next request on a kept-alive connection
            super().data_received(data)
            if not self._idle():
                self._disarm()  # the headers are complete

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._idle() and self.conn.trailing_data[0] and not self.transport.is_closing():
                # A pipelined head, begun while the answer before it was sent and still not
                # whole: timed from now (the keep-alive timer alone would give it 75 s).
                self._head_begins()

        def send_400_response(self, msg: str) -> None:
            """The request is not valid HTTP/1.1: a problem, then the connection is closed."""
            if self.conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
                # A response had begun (the body broke the protocol): nothing more can be said;
                # the request's own access-log line is the app's.
                self.transport.close()
                return
            started = time.perf_counter()
            request_id, headers, body = _refusal(_NOT_HTTP)
            for event in (
                h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event) or b"")
            self.transport.close()
            _log_refusal(request_id, started)

        def _idle(self) -> bool:
            """No request head is complete since the last answer (h11 takes a head whole)."""
            return self.conn.their_state is h11.IDLE

    return GuardedH11Protocol


_NOT_HTTP = "the request is not valid HTTP/1.1"


def _refusal(detail: str) -> tuple[str, list[tuple[bytes, bytes]], bytes]:
    """A 400 problem for a request refused before the app: its id, headers and body."""
    request_id = new_request_id()
    answer = problem_response(HttpProblem(400, "invalid_argument", detail), request_id)
    headers = [
        *answer.raw_headers,
        (b"x-request-id", request_id.encode()),
        (b"connection", b"close"),
    ]
    return request_id, headers, bytes(answer.body)


def _log_refusal(request_id: str, started: float) -> None:
    log_request(
        request_id,
        method="-",  # the request line itself may be what is broken
        route=UNMATCHED_ROUTE,
        status=400,
        seconds=time.perf_counter() - started,
        error_code="invalid_argument",
    )


class _HeadRefused(Exception):
    """A request head past a limit; raised in a parser callback, so llhttp stops there."""


def guarded_httptools(header_timeout: float) -> type[HttpToolsProtocol]:
    """Uvicorn's httptools protocol with :func:`guarded_h11`'s guard, and bounds on the head.

    The header timer runs from the connection (for one that sends nothing) or from the first
    byte of a request head, while no earlier request is being answered (a pipelined head is
    timed once the answers before it are sent), and stops when the head is complete.
    """
    # Imported here: uvicorn imports httptools with it, and h11 serves where it is missing.
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol  # noqa: PLC0415

    max_received = 2 * MAX_HEAD_BYTES

    class GuardedHttpToolsProtocol(_HeaderGuard, HttpToolsProtocol):
        _header_timeout = header_timeout
        _head_open = False
        """A request head has begun and is not complete."""
        _heads = 0
        """Request heads begun on this connection."""
        _head_size = 0
        _header_count = 0
        _head_received = 0
        """Bytes received while the current head was open (framing included)."""
        _refused: str | None = None
        """Why the request was refused (the problem's detail); nothing more is parsed."""

        def data_received(self, data: bytes) -> None:
            if self._refused is not None:
                return  # the parser stopped at the error: what follows is not read
            heads = self._heads
            was_open = self._head_open
            super().data_received(data)
            if not (was_open and self._head_open and heads == self._heads):
                return
            self._head_received += len(data)  # this whole read belongs to the open head
            if self._head_received > max_received and self._refused is None:
                self._refused = f"the request head is over {max_received} bytes"
                self.send_400_response(self._refused)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._head_open = True
            self._heads += 1
            self._head_size = self._header_count = self._head_received = 0
            self._head_begins()

        def on_url(self, url: bytes) -> None:
            self._grow(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._header_count += 1
            if self._header_count > MAX_HEADERS:
                self._refuse(f"the request has more than {MAX_HEADERS} header lines")
            self._grow(len(name) + len(value))
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            # What h11 refuses and llhttp lets through: HTTP/0.9 (no version) in a request line
            # and an HTTP/1.1 request without exactly one Host (RFC 9112 §3.2); and HTTP/2.0,
            # which h11 serves too, in a request line that is HTTP/1.1 by its syntax.
            version = self.parser.get_http_version()
            if version not in ("1.0", "1.1"):
                self._refuse(f"HTTP/{version} is not served: HTTP/1.1 or HTTP/1.0 only")
            if version == "1.1" and [name for name, _ in self.headers].count(b"host") != 1:
                self._refuse("an HTTP/1.1 request has exactly one Host header")
            self._head_open = False
            self._disarm()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._head_open and not self.transport.is_closing():
                self._head_begins()  # a pipelined head, begun while the answer before it was sent

        def send_400_response(self, msg: str) -> None:
            """The request is not valid HTTP/1.1 (or too large): a problem, then a close."""
            cycle = self.cycle
            if self._refused is None:
                self._refused = _NOT_HTTP
            if cycle is not None and not cycle.response_complete:
                if self._head_open or not cycle.more_body:
                    # A later request is broken: those before it are answered, then the
                    # connection closes.
                    cycle.keep_alive = False
                    return
                if cycle.response_started or self.pipeline:
                    # This request's body broke the protocol after its answer began (or behind
                    # another's): nothing more can be said.
                    self.transport.close()
                    return
                # Its handler is reading the body: it sees the client gone, and its answer,
                # if any, is not sent after this one.
                cycle.disconnected = True
                cycle.message_event.set()
            started = time.perf_counter()
            request_id, headers, body = _refusal(self._refused)
            head = [b"HTTP/1.1 400 Bad Request\r\n"]
            head += [name + b": " + value + b"\r\n" for name, value in headers]
            head.append(b"\r\n")  # the problem's headers include its content-length
            self.transport.write(b"".join(head) + body)
            self.transport.close()
            _log_refusal(request_id, started)

        def _grow(self, size: int) -> None:
            self._head_size += size
            if self._head_size > MAX_HEAD_BYTES:
                self._refuse(
                    f"the request target and headers are over {MAX_HEAD_BYTES} bytes together"
                )

        def _refuse(self, detail: str) -> None:
            self._refused = detail
            raise _HeadRefused(detail)

        def _idle(self) -> bool:
            """No request of this connection is being answered or waits for its turn."""
            return self.cycle is None or self.cycle.response_complete

    return GuardedHttpToolsProtocol


def guarded_protocol(parser: HttpParser, header_timeout: float) -> type[asyncio.Protocol]:
    """The guarded uvicorn protocol of ``parser``."""
    if parser == "httptools":
        return guarded_httptools(header_timeout)
    return guarded_h11(header_timeout)


def server_config(app: Any, **options: Any) -> uvicorn.Config:
    """A uvicorn configuration with the service's fixed choices (no access log, no lifespan)."""
    return uvicorn.Config(
        app,
        lifespan="off",
        log_config=None,
        access_log=False,
        server_header=False,
        **options,
    )
