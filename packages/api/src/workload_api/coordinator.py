"""The coordinator: the one process that executes runs for a database (SPEC §7).

One anyio task group owns everything: the advisory lock and its health check, the engine that
supervises every executing run, the recovery scan, the idempotency purge and the HTTP server.
Start-up order: schema checked (exit 4) → lock taken (busy: exit 3) → store opened → engine
started → every non-terminal run handed to it (runs left ``running`` are marked ``interrupted``
by each run's first commit) → ready. The first system fault anywhere (lock lost, database gone)
is *fail-stop*: ``/readyz`` turns 503, execution is interrupted (never written as canceled), HTTP
stops and the process exits 5. SIGTERM/SIGINT stop gracefully with exit 0. The lock is never
re-taken in the same process.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import signal
from collections.abc import Awaitable, Callable, Iterator

import anyio
import anyio.abc
import uvicorn

from workload_api.app import Readiness, create_app
from workload_api.container import Container
from workload_domain.errors import SystemFault
from workload_domain.idempotency import IDEMPOTENCY_RETENTION
from workload_domain.ports import CoordinatorLock
from workload_store_postgres.migrations import MigrationError, check_schema

__all__ = ["Coordinator", "ExitCode"]

_log = logging.getLogger("workload.coordinator")
PURGE_INTERVAL_SECONDS = 3600.0


class ExitCode(enum.IntEnum):
    """Process exit codes of ``workload serve`` (SPEC §7)."""

    OK = 0
    USAGE = 2
    LOCK_HELD = 3
    SCHEMA = 4
    FAIL_STOP = 5


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling.

    The coordinator handles signals, so uvicorn does not re-raise SIGTERM after its shutdown
    (which would end the process with -15, not 0).
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Coordinator:
    """Runs the service until a signal (exit 0) or a fault (exit 3, 4 or 5)."""

    def __init__(
        self,
        container: Container,
        lock: CoordinatorLock,
        *,
        database_url: str,
        host: str,
        port: int,
        lock_check_interval: float,
        on_ready: Callable[[str], None] | None = None,
    ) -> None:
        self._container = container
        self._lock = lock
        self._url = database_url
        self._host = host
        self._port = port
        self._interval = lock_check_interval
        self._on_ready = on_ready
        self.readiness = Readiness()
        self.fault: BaseException | None = None

    async def run(self) -> ExitCode:
        """Start in SPEC §7's order, serve, and return the process exit code."""
        try:
            await check_schema(self._url)
        except MigrationError as exc:
            _log.error("refusing to start: %s", exc)
            return ExitCode.SCHEMA
        except SystemFault as exc:
            _log.error("cannot reach the database: %s", exc)
            return ExitCode.FAIL_STOP
        try:
            acquired = await self._lock.acquire()
        except SystemFault as exc:
            _log.error("cannot take the coordinator lock: %s", exc)
            return ExitCode.FAIL_STOP
        if not acquired:
            _log.error("another coordinator holds the lock of this database; only one may run")
            return ExitCode.LOCK_HELD
        try:
            return await self._serve()
        finally:
            await self._lock.release()

    async def _serve(self) -> ExitCode:
        control_plane = self._container.control_plane()
        engine = control_plane.engine
        store = self._container.store()
        app = create_app(control_plane, self._container.authenticator(), self.readiness)
        server = _Server(
            uvicorn.Config(
                app,
                host=self._host,
                port=self._port,
                lifespan="off",
                log_config=None,
                access_log=False,
                server_header=False,
            )
        )

        engine_scope = anyio.CancelScope()

        def fail(reason: str, error: BaseException) -> None:
            if self.fault is None:
                self.fault = error
                _log.error("fail-stop: %s: %s", reason, error)
            # SPEC §7's order: not ready, stop local execution (interruption), then HTTP.
            self.readiness.ready = False
            self.readiness.reason = "failed"
            engine_scope.cancel()
            server.should_exit = True

        async def guarded(reason: str, work: Callable[[], Awaitable[None]]) -> None:
            try:
                await work()
            except Exception as exc:  # any fault of a background duty stops the process
                fail(reason, exc)

        try:
            await store.open()
        except SystemFault as exc:
            _log.error("cannot open the store: %s", exc)
            return ExitCode.FAIL_STOP
        bind_failed = False
        try:
            async with anyio.create_task_group() as tg:

                async def run_engine(
                    *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
                ) -> None:
                    with engine_scope:
                        try:
                            await engine.run(task_status=task_status)
                        except Exception as exc:
                            fail("execution failed", exc)

                await tg.start(run_engine)
                try:
                    handed = await engine.recover()
                except Exception as exc:
                    fail("the recovery scan failed", exc)
                    handed = 0
                tg.start_soon(guarded, "lost the coordinator lock", self._watch_lock)
                tg.start_soon(guarded, "idempotency purge failed", self._purge_loop)
                tg.start_soon(self._watch_signals, server)
                tg.start_soon(self._announce_ready, server, handed)
                try:
                    await server.serve()
                except SystemExit:
                    # uvicorn exits when it cannot listen (address in use, no permission):
                    # a configuration error, answered with the usage exit code.
                    _log.error("cannot listen on %s:%s", self._host, self._port)
                    bind_failed = True
                # HTTP has stopped: interrupt execution (nothing is written as canceled).
                self.readiness.ready = False
                engine_scope.cancel()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await store.close()
        if self.fault is not None:
            return ExitCode.FAIL_STOP
        return ExitCode.USAGE if bind_failed else ExitCode.OK

    async def _announce_ready(self, server: uvicorn.Server, handed: int) -> None:
        while not server.started:
            if server.should_exit:
                return
            await anyio.sleep(0.01)
        if self.fault is not None:
            return
        self.readiness.ready = True
        self.readiness.reason = "ready"
        port = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://{self._host}:{port}"
        _log.info("ready", extra={"fields": {"url": url, "recovered_runs": handed}})
        if self._on_ready is not None:
            self._on_ready(url)

    async def _watch_lock(self) -> None:
        while True:
            await anyio.sleep(self._interval)
            await self._lock.check()

    async def _purge_loop(self) -> None:
        store = self._container.store()
        clock = self._container.clock()
        while True:
            purged = await store.purge_outcomes(clock.now() - IDEMPOTENCY_RETENTION)
            if purged:
                _log.info("purged idempotency records", extra={"fields": {"purged": purged}})
            await anyio.sleep(PURGE_INTERVAL_SECONDS)

    async def _watch_signals(self, server: uvicorn.Server) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                _log.info("stopping on %s", signal.Signals(signum).name)
                self.readiness.ready = False
                self.readiness.reason = "stopping"
                server.should_exit = True
                return
