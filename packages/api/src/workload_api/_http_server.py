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
  after their request, are not affected. A request that is not valid HTTP/1.1 (a raw byte
  outside ASCII in its target, a malformed header, a negative ``Content-Length``) is answered
  as every other 400: a problem with a request id, logged in the access log (uvicorn's own
  answer is a bare text with neither).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from workload_api.context import log_request, new_request_id
from workload_api.problems import HttpProblem, problem_response
from workload_api.telemetry import UNMATCHED_ROUTE

__all__ = ["FAIL_STOP_GRACE", "HttpServer", "guarded_h11"]

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


def guarded_h11(header_timeout: float) -> type[H11Protocol]:
    """Uvicorn's h11 protocol with a bound on the time a request's headers may take."""

    class GuardedH11Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            waiting = self.conn.their_state is h11.IDLE
            if waiting and self._header_timer is None:
                self._arm()  # the first byte of the next request on a kept-alive connection
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._disarm()  # the headers are complete

        def send_400_response(self, msg: str) -> None:
            """The request is not valid HTTP/1.1: a problem, then the connection is closed."""
            if self.conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
                # A response had begun (the body broke the protocol): nothing more can be said;
                # the request's own access-log line is the app's.
                self.transport.close()
                return
            started = time.perf_counter()
            request_id = new_request_id()
            problem = HttpProblem(400, "invalid_argument", "the request is not valid HTTP/1.1")
            answer = problem_response(problem, request_id)
            headers = [
                *answer.raw_headers,
                (b"x-request-id", request_id.encode()),
                (b"connection", b"close"),
            ]
            for event in (
                h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                h11.Data(data=bytes(answer.body)),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event) or b"")
            self.transport.close()
            log_request(
                request_id,
                method="-",  # the request line itself may be what is broken
                route=UNMATCHED_ROUTE,
                status=400,
                seconds=time.perf_counter() - started,
                error_code="invalid_argument",
            )

        def _arm(self) -> None:
            self._header_timer = self.loop.call_later(header_timeout, self._expire)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _expire(self) -> None:
            self._header_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                _log.info(
                    "closed a connection whose request headers took too long",
                    extra={"fields": {"header_timeout_seconds": header_timeout}},
                )
                self.transport.close()

    return GuardedH11Protocol


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
