"""``workload serve``: the service's lifecycle around an HTTP server, and its exit codes (§7).

:class:`Coordinator` enters :meth:`~workload_api.lifecycle.Service.running` (schema, lock,
store, engine, recovery, background duties) and serves HTTP with uvicorn inside it. A stop
(:meth:`Coordinator.signalled`: SIGTERM or SIGINT) during start-up interrupts it where it is
(connecting, taking the lock, the recovery scan), releasing what it took; once serving, it stops
HTTP, then execution is interrupted. Either way: exit 0. A repeated signal is logged and changes
nothing (the stop is already bounded by the shutdown grace). A fail-stop of the service stops
HTTP and exits 5. The real-HTTP test fixtures run this same class, on port 0, without signals;
``workload serve`` hands it the signals it receives (its handlers live as long as the process).
"""

from __future__ import annotations

import enum
import logging
import signal
from collections.abc import Callable

import anyio
import anyio.abc
from starlette.types import ASGIApp

from workload_api._http_server import (
    FAIL_STOP_GRACE,
    HttpParser,
    HttpServer,
    guarded_protocol,
    server_config,
)
from workload_api.lifecycle import CoordinatorBusy, Service
from workload_domain.errors import ModeConflict, SystemFault
from workload_store_postgres.migrations import MigrationError, ShardsFixed

__all__ = ["Coordinator", "ExitCode"]

_log = logging.getLogger("workload.coordinator")


class ExitCode(enum.IntEnum):
    """Process exit codes of ``workload serve`` (SPEC §7)."""

    OK = 0
    USAGE = 2
    LOCK_HELD = 3
    SCHEMA = 4
    FAIL_STOP = 5


class Coordinator:
    """Runs the service and its HTTP server until a signal (exit 0) or a fault (3, 4 or 5)."""

    def __init__(
        self,
        service: Service,
        app: ASGIApp,
        *,
        host: str,
        port: int,
        on_ready: Callable[[str], None] | None = None,
        handle_signals: bool = True,
        header_timeout: float = 10.0,
        http_parser: HttpParser = "httptools",
        keepalive_timeout: float = 75.0,
        max_connections: int | None = None,
        shutdown_grace: int = 10,
    ) -> None:
        self.service = service
        self._host = host
        self._on_ready = on_ready
        self._handle_signals = handle_signals
        self._server = HttpServer(
            server_config(
                app,
                host=host,
                port=port,
                http=guarded_protocol(http_parser, header_timeout),
                timeout_keep_alive=keepalive_timeout,
                limit_concurrency=max_connections,
                timeout_graceful_shutdown=shutdown_grace,
            )
        )
        self.url: str | None = None
        self._stopping: signal.Signals | None = None
        self._starting: anyio.CancelScope | None = None

    def stop(self) -> None:
        """Stop: interrupt start-up where it is, or stop serving (as SIGTERM does)."""
        if self._starting is not None:
            self._starting.cancel()
        self.service.stopping()
        self._server.stop()

    def signalled(self, received: signal.Signals) -> None:
        """A stop signal arrived: stop (once; a repeat is logged and changes nothing).

        Call it in the coordinator's event loop, also before :meth:`run` (start-up is then
        skipped).
        """
        if self._stopping is not None:
            _log.warning("%s again: already stopping on %s", received.name, self._stopping.name)
            return
        self._stopping = received
        _log.info("stopping on %s", received.name)
        self.stop()

    def _fail_stop(self, reason: str, error: BaseException) -> None:
        # The database or the lock is gone: in-flight requests are not worth waiting for.
        self._server.stop(grace=FAIL_STOP_GRACE)

    async def run(self) -> ExitCode:
        """Start in SPEC §7's order, serve, and return the process exit code."""
        async with anyio.create_task_group() as signals:
            if self._handle_signals:
                # From the first step on: start-up is interruptible too.
                await signals.start(self._watch_signals)
            try:
                code = await self._run()
            finally:
                signals.cancel_scope.cancel()
        return code

    async def _run(self) -> ExitCode:
        bind_failed = False
        try:
            with anyio.CancelScope() as starting:  # cancelled by a stop during start-up
                self._starting = starting
                if self._stopping is not None:
                    starting.cancel()
                async with (
                    self.service.running(on_fault=self._fail_stop),
                    anyio.create_task_group() as tg,
                ):
                    # Started: from now on a stop is graceful (uvicorn's shutdown, then the
                    # lifecycle interrupts execution).
                    self._starting = None
                    tg.start_soon(self._announce_ready)
                    try:
                        await self._server.serve()
                    except SystemExit:
                        # uvicorn exits when it cannot listen (address in use, no permission):
                        # a configuration error, answered with the usage exit code.
                        _log.error("cannot listen on %s:%s", self._host, self._server.config.port)
                        bind_failed = True
                    tg.cancel_scope.cancel()
            if starting.cancelled_caught:
                # The lifecycle released what it had taken (lock, store) on its way out.
                _log.info("stopped during start-up")
                return ExitCode.OK
        except MigrationError as exc:
            _log.error("refusing to start: %s", exc)
            return ExitCode.SCHEMA
        except ShardsFixed as exc:
            _log.error("refusing to start: %s", exc)
            return ExitCode.USAGE
        # Warnings, not errors: refusing to run beside another process (exit 3) or without the
        # database (exit 5) is this process doing its job; a restart succeeds once they change.
        except CoordinatorBusy as exc:
            _log.warning("%s; only one may run", exc)
            return ExitCode.LOCK_HELD
        except ModeConflict as exc:
            _log.warning("refusing to start: %s", exc, extra={"fields": {"mode": exc.mode_in_use}})
            return ExitCode.LOCK_HELD
        except SystemFault as exc:
            _log.warning("cannot start: %s", exc)
            return ExitCode.FAIL_STOP
        if isinstance(self.service.fault, ModeConflict):
            # A standby found replicas on its database when it tried the lock (SPEC §16).
            return ExitCode.LOCK_HELD
        if self.service.fault is not None:
            return ExitCode.FAIL_STOP
        return ExitCode.USAGE if bind_failed else ExitCode.OK

    async def _announce_ready(self) -> None:
        server = self._server
        while not server.started:
            if server.should_exit:
                return
            await anyio.sleep(0.01)
        if self.service.fault is not None:
            return
        port = server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://{self._host}:{port}"
        _log.info(
            "ready", extra={"fields": {"url": self.url, "recovered_runs": self.service.recovered}}
        )
        if self._on_ready is not None:
            self._on_ready(self.url)

    async def _watch_signals(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            task_status.started()
            # Listens until run() returns: a repeat while stopping must not meet the default
            # action (death by the signal).
            async for signum in signals:
                self.signalled(signal.Signals(signum))
