"""The ``workload`` command (SPEC §8): one Typer app.

Client commands (``workflows``, ``runs``, ``approvals``, ``drafts``, ``workers``, ``queues``,
``status``, ``demo``) talk to a server through the SDK only; ``worker`` runs a worker SDK's
Worker and ``mcp tools`` lists an MCP server's tools (the worker SDK imported when they run);
``run-local`` imports the engine and ``serve`` / ``migrate`` the server packages, both lazily.
"""

from __future__ import annotations

import importlib
import logging
import sys
from types import ModuleType
from typing import Annotated

import typer

from workload_cli._approvals import approvals_app
from workload_cli._cluster import cluster
from workload_cli._completion import completion
from workload_cli._demo import demo
from workload_cli._drafts import drafts_app
from workload_cli._exit import CLIENT_CODES, EXIT_CODES_HELP, WATCHED_RUN, ExitCode, exit_codes_help
from workload_cli._help import RootGroup
from workload_cli._local import run_local
from workload_cli._mcp import mcp_app
from workload_cli._options import OutputOption, TokenOption, UrlOption
from workload_cli._output import OutputFormat
from workload_cli._runs import runs_app
from workload_cli._session import output_format
from workload_cli._status import status
from workload_cli._stop import Interrupted, StopSignals, own_the_process
from workload_cli._version import installed_versions
from workload_cli._worker_command import worker
from workload_cli._workers import queues_app, workers_app
from workload_cli._workflows import workflows_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="workload",
    cls=RootGroup,
    help="Workload: a control plane for multi-step AI workloads.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,  # one mechanism: `workload completion SHELL` (SPEC §8)
    pretty_exceptions_enable=False,
)
migrate_app = typer.Typer(help="Database schema migrations.", no_args_is_help=True)
app.add_typer(migrate_app, name="migrate")
console_app = typer.Typer(help="Web console sessions (in the database).", no_args_is_help=True)
app.add_typer(console_app, name="console")
_CLIENT = "Client commands (through the API)"
app.add_typer(workflows_app, name="workflows", rich_help_panel=_CLIENT)
app.add_typer(runs_app, name="runs", rich_help_panel=_CLIENT)
app.add_typer(approvals_app, name="approvals", rich_help_panel=_CLIENT)
app.add_typer(drafts_app, name="drafts", rich_help_panel=_CLIENT)
app.add_typer(workers_app, name="workers", rich_help_panel=_CLIENT)
app.add_typer(queues_app, name="queues", rich_help_panel=_CLIENT)
_CLIENT_HELP = exit_codes_help(*CLIENT_CODES)
_LOCAL_CODES = (
    ExitCode.OK,
    ExitCode.ERROR,
    ExitCode.USAGE,
    ExitCode.REJECTED,
    ExitCode.INTERRUPTED,
)
app.command("status", epilog=_CLIENT_HELP, rich_help_panel=_CLIENT)(status)
app.command("cluster", epilog=_CLIENT_HELP, rich_help_panel=_CLIENT)(cluster)
app.command(
    "demo",
    epilog=exit_codes_help(*CLIENT_CODES, *WATCHED_RUN, ok="ok (run succeeded)"),
    rich_help_panel=_CLIENT,
)(demo)
app.command(
    "run-local",
    epilog=exit_codes_help(*_LOCAL_CODES, *WATCHED_RUN, ok="ok (run succeeded)"),
    rich_help_panel="Without a server",
)(run_local)
app.command("worker", epilog=_CLIENT_HELP, rich_help_panel="Workers")(worker)
app.add_typer(mcp_app, name="mcp", rich_help_panel="Workers")
app.command("completion", rich_help_panel="Shell")(completion)


def _show_versions(wanted: bool) -> None:
    if wanted:
        for name, version in installed_versions():
            typer.echo(f"{name} {version}")
        raise typer.Exit


@app.callback()
def _global_options(
    url: UrlOption = None,
    token: TokenOption = None,
    output: OutputOption = None,
    *,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print every installed Workload package's version and exit.",
            callback=_show_versions,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """Options of the client commands, given before the command.

    Each command reads them through its context (:func:`workload_cli._session.session`), so
    the same option given after the command wins.
    """
    del url, token, output, version


DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="libpq URL (Unix sockets too: postgresql://user@/db?host=/dir). "
        "Env: WORKLOAD_DATABASE_URL.",
        show_default=False,
    ),
]


@app.command()
def serve(
    *,
    host: Annotated[
        str | None,
        typer.Option(help="Bind address (env WORKLOAD_HOST).", show_default="127.0.0.1"),
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port (env WORKLOAD_PORT).", show_default="8080")
    ] = None,
    database_url: DatabaseUrl = None,
    data_dir: Annotated[
        str | None,  # a string: typer would make "" the current directory, Settings refuses it
        typer.Option(
            help="Embedded mode's data directory (env WORKLOAD_DATA_DIR).",
            metavar="DIR",
            show_default=False,
        ),
    ] = None,
    log_level: Annotated[
        str | None, typer.Option(help="Log level (env WORKLOAD_LOG_LEVEL).", show_default="INFO")
    ] = None,
    standby: Annotated[
        bool | None,
        typer.Option(
            "--standby",
            help="When another process leads, serve the API and take over when it goes "
            "(env WORKLOAD_STANDBY).",
            show_default=False,
        ),
    ] = None,
    replica: Annotated[
        bool | None,
        typer.Option(
            "--replica",
            help="Join the replicas that all execute, each the runs of its share of the shards "
            "(env WORKLOAD_REPLICA; WORKLOAD_REPLICA_ID names it).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run the service: HTTP API, coordinator and execution.

    Without a database URL, an embedded PostgreSQL runs in the data directory (development).
    With --standby, a second process does not exit 3 while another leads: it serves the whole
    API and takes over when the leader goes. With --replica, every such process executes: the
    runs are split into shards, and live replicas share them out.
    Exit codes: 0 stopped, 2 usage or configuration, 3 another coordinator holds the lock (or
    replicas and a coordinator would share the database), 4 schema not migrated, 5 fail-stop
    (lost lock, shards or database, or a newer leader).
    SIGTERM or Ctrl-C stops it, in start-up too: exit 0.
    """
    overrides = {
        "host": host,
        "port": port,
        "database_url": database_url,
        "data_dir": data_dir,
        "log_level": log_level,
        "standby": standby,
        "replica": replica,
    }
    # First: a signal during the imports below must stop the process too, not kill it.
    stops = StopSignals(logging.getLogger("workload.coordinator"))
    with stops.installed():
        try:
            server = _server_commands()
        except Interrupted as exc:
            typer.echo(f"stopped on {exc.signum.name} during start-up", err=True)
            raise typer.Exit(0) from None
        code = server.serve({k: v for k, v in overrides.items() if v is not None}, stops)
    raise typer.Exit(code)


MigrateOutput = Annotated[
    OutputFormat | None,
    typer.Option("--output", "-o", help="table, plain or json.", case_sensitive=False),
]


def _wants_json(ctx: typer.Context, output: OutputFormat | None) -> bool:
    return output_format(ctx, output) is OutputFormat.JSON


@migrate_app.command("up")
def migrate_up(
    ctx: typer.Context, database_url: DatabaseUrl = None, output: MigrateOutput = None
) -> None:
    """Apply every pending migration (each in its own transaction, under an advisory lock).

    Exit codes: 0 applied or up to date, 2 no database URL or a bad setting, 4 the database
    holds an unknown or edited migration, 5 the database cannot be reached or failed a
    migration (a lock it waited for too long, too: run it again).
    """
    raise typer.Exit(_server_commands().migrate_up(database_url, _wants_json(ctx, output)))


@migrate_app.command("status")
def migrate_status(
    ctx: typer.Context, database_url: DatabaseUrl = None, output: MigrateOutput = None
) -> None:
    """Show applied, pending, unknown and changed migrations (exit 4 unless up to date)."""
    raise typer.Exit(_server_commands().migrate_status(database_url, _wants_json(ctx, output)))


@console_app.command("sessions")
def console_sessions(
    ctx: typer.Context, database_url: DatabaseUrl = None, output: MigrateOutput = None
) -> None:
    """List the live web console sessions, newest first (id, principal id, created, expires).

    Exit codes: 0 listed, 2 no database URL, 5 the database cannot be reached.
    """
    command = _server_module("workload_cli._console_sessions")
    raise typer.Exit(command.list_sessions(database_url, _wants_json(ctx, output)))


@console_app.command("revoke")
def console_revoke(
    ctx: typer.Context,
    session_ids: Annotated[
        list[str] | None, typer.Argument(help="Ids from `workload console sessions`.")
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Revoke every live session.")] = False,
    database_url: DatabaseUrl = None,
    output: MigrateOutput = None,
) -> None:
    """Revoke web console sessions: their browsers are signed out at their next request.

    Exit codes: 0 revoked, 2 bad usage or no database URL, 5 the database cannot be reached,
    7 one of the ids is no live session.
    """
    command = _server_module("workload_cli._console_sessions")
    code = command.revoke_sessions(database_url, session_ids or [], every, _wants_json(ctx, output))
    raise typer.Exit(code)


def _server_commands() -> ModuleType:
    return _server_module("workload_cli._server")


def _server_module(name: str) -> ModuleType:
    try:
        # Imported by name at run time: the client commands never load the server packages
        # (and the import-linter contract on the client modules can see that).
        module = importlib.import_module(name)
    except ImportError as exc:
        typer.echo(
            f"error: the server commands need the server packages ({exc.name} is missing); "
            "install them with: pip install 'workload-cli[server]'",
            err=True,
        )
        raise typer.Exit(2) from None
    return module


def main() -> None:
    """Entry point of the ``workload`` script."""
    own_the_process()
    sys.exit(app())
