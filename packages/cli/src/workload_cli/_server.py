"""The server commands: ``serve`` and ``migrate``. Imported only when one of them runs."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import anyio
from pydantic import ValidationError

from workload_api import eventloop
from workload_api.container import Container
from workload_api.context import configure_logging
from workload_api.coordinator import ExitCode
from workload_api.endpoints import EndpointConfigError, configured_endpoints
from workload_api.settings import Settings
from workload_api.telemetry import TracingConfigError, tracing_exporters
from workload_cli._embedded import DataDirError, EmbeddedPostgres, dev_credentials
from workload_cli._stop import Interrupted, StopSignals
from workload_domain.errors import SystemFault
from workload_store_postgres.migrations import MigrationError, ShardsFixed, migration_status
from workload_store_postgres.migrations import migrate_up as apply_migrations

__all__ = [
    "Stopped",
    "database_command",
    "database_faults",
    "database_settings",
    "migrate_status",
    "migrate_up",
    "required_url",
    "say",
    "serve",
]

_log = logging.getLogger("workload.cli")
_coordinator_log = logging.getLogger("workload.coordinator")
T = TypeVar("T")
P = ParamSpec("P")


def say(message: str) -> None:
    """A message for the operator, on stderr."""
    print(message, file=sys.stderr, flush=True)


def serve(overrides: dict[str, Any], stops: StopSignals | None = None) -> int:
    """Run ``workload serve``; return the exit code.

    ``stops`` has handled SIGTERM and SIGINT since the command started: a signal interrupts
    whichever step start-up is in, and every step releases what it took (the embedded
    PostgreSQL is stopped as on a normal stop); the process exits 0. Without it (an in-process
    caller), nothing here handles signals.
    """
    stops = stops or StopSignals(_coordinator_log)
    try:
        return _serve(overrides, stops)
    except Interrupted as exc:
        configure_logging(overrides.get("log_level") or "INFO")
        _coordinator_log.info("stopping on %s", exc.signum.name)
        _coordinator_log.info("stopped during start-up")
        return ExitCode.OK
    finally:
        stops.closing()


def _serve(overrides: dict[str, Any], stops: StopSignals) -> int:
    try:
        settings = Settings(**overrides)
        tracing_exporters()  # the OTEL_* variables (SPEC §12), checked before anything starts
    except ValidationError as exc:
        say(invalid_configuration(exc))
        return ExitCode.USAGE
    except TracingConfigError as exc:
        say(f"error: invalid tracing configuration: {exc}")
        return ExitCode.USAGE
    try:
        configured_endpoints(settings)  # read again, the same, when the service is wired
    except EndpointConfigError as exc:
        say(f"error: invalid model endpoints: {exc}")
        return ExitCode.USAGE
    configure_logging(settings.log_level)
    if settings.database_url:
        return eventloop.serve(_run(settings, stops))
    # Embedded development mode: a private PostgreSQL in the data directory, migrated here.
    embedded = EmbeddedPostgres.in_data_dir(settings.data_dir)
    say(f"data directory: {embedded.data_dir}")
    try:
        # Not cut in half: a server started but not yet known to `embedded` would outlive us.
        try:
            with stops.deferred():
                url = embedded.start()
        except DataDirError as exc:
            say(f"error: {exc}")
            return ExitCode.USAGE
        except subprocess.CalledProcessError:
            if stops.received is None:
                raise
            # A signal to the whole process group reached the programs of the database's own
            # start (initdb's bootstrap backends unblock it): the start failed because of the
            # stop, and initdb removed what it had made.
            raise Interrupted(stops.received) from None
        try:
            with database_faults("the embedded database failed"):
                migrating = apply_migrations(url, shards=settings.shards)
                if eventloop.run(_interruptible(migrating, stops)) is None:
                    return ExitCode.OK
                stops.check()  # a signal in the migrations' last moment, after their scope ended
        except Stopped as exc:
            say(exc.message)
            return exc.code
        updates: dict[str, Any] = {"database_url": url}
        serving: Callable[[str], None] | None = None
        if not (settings.viewer_tokens or settings.operator_tokens or settings.worker_tokens):
            credentials = dev_credentials(embedded.data_dir)
            serving = credentials.serving_at
            updates["viewer_tokens"] = credentials.viewer_token
            updates["operator_tokens"] = credentials.operator_token
            updates["worker_tokens"] = credentials.worker_token
            if credentials.created:
                say(
                    "development tokens (saved, mode 0600, in "
                    f"{credentials.path}):\n  operator: {credentials.operator_token}\n"
                    f"  viewer:   {credentials.viewer_token}\n"
                    f"  worker:   {credentials.worker_token}"
                )
            else:  # printed once, when made: a terminal's scrollback is no place for them
                say(f"development tokens: in {credentials.path} (mode 0600)")
        # Development mode talks to a person: say where to go (strict mode logs JSON only).
        try:  # the stored tokens checked too: a hand-edited file may give two roles one token
            settings = Settings(**{**overrides, **updates})
        except ValidationError as exc:
            say(invalid_configuration(exc))
            return ExitCode.USAGE
        return eventloop.serve(_run(settings, stops, announce=True, serving=serving))
    finally:
        stops.closing()  # the embedded server stops as on a normal stop, whatever arrives
        embedded.stop()


async def _interruptible(step: Awaitable[T], stops: StopSignals) -> T | None:
    """Await ``step``; a stop signal cancels it (and answers None)."""
    with anyio.CancelScope() as scope:

        def stop(received: signal.Signals) -> None:
            if not scope.cancel_called:
                _coordinator_log.info("stopping on %s", received.name)
                scope.cancel()
            else:
                first = (stops.received or received).name
                _coordinator_log.warning("%s again: already stopping on %s", received.name, first)

        with stops.routed(stop):
            return await step
    _coordinator_log.info("stopped during start-up")
    return None


async def _run(
    settings: Settings,
    stops: StopSignals,
    *,
    announce: bool = False,
    serving: Callable[[str], None] | None = None,
) -> int:
    """Serve until stopped; once serving, ``announce`` the URL and tell ``serving`` of it."""
    container = Container(settings=settings)

    def on_ready(url: str) -> None:
        if serving is not None:
            try:
                serving(url)
            except OSError as exc:  # the service serves; only the client commands' hint is lost
                _coordinator_log.warning("cannot record the URL for the CLI: %s", exc)
        if announce:
            say(f"serving on {url}")

    coordinator = container.coordinator(on_ready=on_ready, handle_signals=False)
    try:
        with stops.routed(coordinator.signalled):
            return int(await coordinator.run())
    finally:
        stops.closing()  # whatever stopped it (a signal, a fault), only clean-up is left


def invalid_configuration(exc: ValidationError) -> str:
    """What is wrong with the settings, a line each, naming the setting and its variable.

    Never the value given: it may be a token, a key or a URL with a password (SPEC §7: logs
    and messages never hold tokens).
    """
    lines = ["error: invalid configuration:"]
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        name = ".".join(str(part) for part in error["loc"])
        where = f"{name} (WORKLOAD_{name.upper()}): " if name else ""
        lines.append(f"  {where}{error['msg']}")
    return "\n".join(lines)


def database_settings(database_url: str | None) -> Settings:
    """The settings of a database command: ``--database-url`` over ``WORKLOAD_DATABASE_URL``.

    Read once, so that what is checked is what is used (a bad variable the flag overrides is
    not read at all).

    Raises:
        Stopped: a setting is invalid (exit 2), said as ``serve`` says it; neither the flag nor
            the variable names a database (exit 2).
    """
    given: dict[str, Any] = {} if database_url is None else {"database_url": database_url}
    try:
        settings = Settings(**given)
    except ValidationError as exc:
        raise Stopped(ExitCode.USAGE, invalid_configuration(exc)) from None
    if not settings.database_url:
        raise Stopped(ExitCode.USAGE, "error: give --database-url or set WORKLOAD_DATABASE_URL")
    return settings


class Stopped(Exception):
    """A database command cannot go on: it says ``message`` and exits ``code``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def database_command(command: Callable[P, int]) -> Callable[P, int]:
    """A command on the database: a :class:`Stopped` it raises is said, and its code returned."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> int:
        try:
            return command(*args, **kwargs)
        except Stopped as exc:
            say(exc.message)
            return exc.code

    return run


def required_url(database_url: str | None) -> str:
    """The database URL of :func:`database_settings`.

    Raises:
        Stopped: as :func:`database_settings`.
    """
    url = database_settings(database_url).database_url
    assert url is not None  # database_settings refuses none
    return url


@contextmanager
def database_faults(failing: str) -> Iterator[None]:
    """The database failing or refusing the migrations stops the command, with a message.

    Raises:
        Stopped: a migration that does not apply (exit 4) or a shard count that cannot change
            (exit 2), said as is; a :class:`SystemFault` (exit 5), said after ``failing`` (the
            operator's to fix: no traceback).
    """
    try:
        yield
    except MigrationError as exc:
        raise Stopped(ExitCode.SCHEMA, f"error: {exc}") from None
    except ShardsFixed as exc:
        raise Stopped(ExitCode.USAGE, f"error: {exc}") from None
    except SystemFault as exc:
        raise Stopped(ExitCode.FAIL_STOP, f"error: {failing}: {exc}") from None


@database_command
def migrate_up(database_url: str | None, as_json: bool = False) -> int:
    """Run ``workload migrate up``; return the exit code."""
    settings = database_settings(database_url)
    url = settings.database_url
    assert url is not None  # database_settings refuses none
    with database_faults("cannot migrate"):
        # WORKLOAD_SHARDS, for a database's first migration (SPEC §16); None when unset
        applied = asyncio.run(apply_migrations(url, shards=settings.shards))
    if as_json:
        names = [{"version": m.version, "name": m.name} for m in applied]
        print(json.dumps({"applied": names}))
        return ExitCode.OK
    for migration in applied:
        print(f"applied {migration.version:04d}_{migration.name}")
    if not applied:
        print("the schema is up to date")
    return ExitCode.OK


@database_command
def migrate_status(database_url: str | None, as_json: bool = False) -> int:
    """Run ``workload migrate status``; return 0 if up to date, 4 otherwise."""
    url = required_url(database_url)
    with database_faults("cannot read the schema"):
        status = asyncio.run(migration_status(url))
    code = ExitCode.OK if status.up_to_date else ExitCode.SCHEMA
    if as_json:
        document = {
            "up_to_date": status.up_to_date,
            "applied": [
                {"version": a.version, "name": a.name, "applied_at": a.applied_at.isoformat()}
                for a in status.applied
            ],
            "pending": [{"version": m.version, "name": m.name} for m in status.pending],
            "unknown": [{"version": a.version, "name": a.name} for a in status.unknown],
            "changed": [{"version": a.version, "name": a.name} for a in status.changed],
        }
        print(json.dumps(document))
        return code
    for applied in status.applied:
        print(f"applied  {applied.version:04d}_{applied.name}  {applied.applied_at.isoformat()}")
    for pending in status.pending:
        print(f"pending  {pending.version:04d}_{pending.name}")
    for unknown in status.unknown:
        print(f"unknown  {unknown.version:04d}_{unknown.name}")
    for changed in status.changed:
        print(f"changed  {changed.version:04d}_{changed.name}")
    return code
