"""``workload worker MODULE:ATTRIBUTE``: run a worker defined in your code (SPEC §10).

The command imports the module (from the current directory too, as ``python -m`` would), takes
its :class:`workload_worker.Worker`, applies ``--queue`` / ``--concurrency``, adds the MCP
servers of ``--mcp NAME=COMMAND`` (ADR 0029; with ``--mcp`` alone, a Worker of its own serves
them), connects it and runs it until SIGTERM or Ctrl-C (a second one stops at once). The worker
SDK is imported here, when the command runs, so that the other commands never load it.

Where it connects: ``--url`` / ``--token`` (before or after the command) win; then the URL and
token given to the ``Worker`` in code; then ``WORKLOAD_URL`` / ``WORKLOAD_WORKER_TOKEN``; then
the development credentials file (its URL, and its ``worker_token`` for the default URL or the
file's). ``WORKLOAD_TOKEN`` is never used: it is not a worker's token.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Annotated

import httpx
import typer

from workload_cli._config import WORKER_TOKEN, ClientConfig, ConfigError, Given, resolve_config
from workload_cli._mcp import McpOption, McpSpec, parse_mcp
from workload_cli._options import UrlOption, WorkerTokenOption, closest
from workload_cli._session import UsageError, session
from workload_cli._stop import Interrupted, StopSignals
from workload_cli._targets import import_target, resolve, split_target
from workload_sdk import AsyncClient, WorkloadError
from workload_sdk.config import URL_ENV, WORKER_TOKEN_ENV

if TYPE_CHECKING:
    from workload_worker import Worker

__all__ = ["load_worker", "worker", "worker_config"]

TargetArgument = Annotated[
    str | None,
    typer.Argument(
        help="Where the Worker is: MODULE:ATTRIBUTE (e.g. "
        "workload_worker.examples.textstats:worker), or MODULE alone when it holds exactly one "
        "Worker. Optional with --mcp: a Worker serving only the MCP tools.",
        metavar="MODULE:ATTRIBUTE",
        show_default=False,
    ),
]
QueueOption = Annotated[
    list[str] | None,
    typer.Option(
        "--queue",
        "-q",
        help="A queue to take work from (repeat it for several); replaces the Worker's queues.",
        show_default=False,
    ),
]
ConcurrencyOption = Annotated[
    int | None,
    typer.Option(
        help="How many attempts run at once; replaces the Worker's concurrency.",
        min=1,
        show_default=False,
    ),
]
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LogLevelOption = Annotated[
    str, typer.Option(help="The level of the log lines written on standard error.")
]


def load_worker(target: str) -> Worker:
    """The :class:`~workload_worker.Worker` that ``MODULE[:ATTRIBUTE]`` names.

    Raises:
        UsageError: no such module or attribute, or not a Worker.
    """
    from workload_worker import Worker  # noqa: PLC0415 - only this command needs it

    module_name, attribute = split_target(target)
    module = import_target(module_name, keep_import_errors=True)
    if attribute:
        found = resolve(module, module_name, attribute)
    else:
        workers = [value for value in vars(module).values() if isinstance(value, Worker)]
        if len(workers) != 1:
            raise UsageError(
                f"module {module_name!r} holds {len(workers)} Worker objects; "
                "name one: MODULE:ATTRIBUTE"
            )
        found = workers[0]
    if not isinstance(found, Worker):
        raise UsageError(f"{target!r} is a {type(found).__name__}, not a workload_worker.Worker")
    return found


def _choose(
    ctx: typer.Context, name: str, value: str | None, code: str | None, names: tuple[str, str, str]
) -> Given | None:
    """A flag (here or before the command), else the Worker's code, else the variable.

    ``names`` says where each came from, for messages: the flag, the code, the variable.
    """
    flag, label, variable = names
    found = closest(ctx, name, value)
    if found is not None and not found[1]:
        return Given(found[0], flag)
    if code:
        return Given(code, label)
    source = ctx.get_parameter_source(name)
    # This command's own variable only: the root's --token reads WORKLOAD_TOKEN (an operator's).
    if value and source is not None and source.name == "ENVIRONMENT":
        return Given(value, variable)
    return None


def worker_config(
    ctx: typer.Context, target: Worker, label: str, url: str | None, token: str | None
) -> ClientConfig:
    """Where the worker connects and with which token (see the module docstring).

    Args:
        ctx: The command's context.
        target: The worker (its own ``url`` and ``token``, if its code gave them).
        label: How messages name the worker's code (its MODULE:ATTRIBUTE).
        url: The command's ``--url`` (or ``WORKLOAD_URL``, as typer resolved it).
        token: The command's ``--token`` (or ``WORKLOAD_WORKER_TOKEN``).

    Raises:
        UsageError: the URL cannot work.
    """
    try:
        return resolve_config(
            url=_choose(ctx, "url", url, target.url, ("--url", label, URL_ENV)),
            token=_choose(ctx, "token", token, target.token, ("--token", label, WORKER_TOKEN_ENV)),
            file_token=WORKER_TOKEN,
        )
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


class _LogTo:
    """Log lines on standard error while the worker runs (unless the app set up logging)."""

    def __init__(self, level: str) -> None:
        self._root = logging.getLogger()
        self._worker = logging.getLogger("workload.worker")
        self._level = level.upper()
        self._handler: logging.Handler | None = None
        self._previous = (self._root.level, self._worker.level)

    def __enter__(self) -> None:
        self._worker.setLevel(self._level)
        if not self._root.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter(_LOG_FORMAT))
            self._root.addHandler(handler)
            self._root.setLevel(self._level)
            self._handler = handler

    def __exit__(self, *exc_info: object) -> None:
        # Put things back: an in-process caller (a test, a program) keeps its own logging.
        if self._handler is not None:
            self._root.removeHandler(self._handler)
        self._root.setLevel(self._previous[0])
        self._worker.setLevel(self._previous[1])


def worker(
    ctx: typer.Context,
    target: TargetArgument = None,
    *,
    queue: QueueOption = None,
    concurrency: ConcurrencyOption = None,
    mcp: McpOption = None,
    log_level: LogLevelOption = "INFO",
    url: UrlOption = None,
    token: WorkerTokenOption = None,
) -> None:
    """Run a Worker of your code: claim attempts of its actions and run their handlers.

    Stops on SIGTERM or Ctrl-C: no more claims, running handlers get the Worker's grace period
    (30 s by default), then are cancelled and reported worker_shutdown. A second signal stops
    at once. A signal before the worker serves (loading your module) stops it too: exit 0.
    With --mcp, each MCP server is started first and its tools listed (exit 2 if one does not
    start); one whose connection is lost later stops the worker (exit 1).
    """
    if log_level.upper() not in logging.getLevelNamesMapping():
        raise typer.BadParameter(f"unknown log level {log_level!r}", param_hint="--log-level")
    # First: a signal while the SDK and the user's module load stops the process, exit 0.
    # Worker.run() takes over while it runs; this one logs what comes after it.
    stops = StopSignals(logging.getLogger("workload.worker"))
    with stops.installed():
        try:
            _run_worker(
                ctx,
                target,
                stops,
                queue=queue,
                concurrency=concurrency,
                mcp=mcp or [],
                log_level=log_level,
                url=url,
                token=token,
            )
        except Interrupted as exc:
            typer.echo(f"stopped on {exc.signum.name} before the worker served", err=True)


def _run_worker(
    ctx: typer.Context,
    target: str | None,
    stops: StopSignals,
    *,
    queue: list[str] | None,
    concurrency: int | None,
    mcp: list[str],
    log_level: str,
    url: str | None,
    token: str | None,
) -> None:
    from workload_worker import (  # noqa: PLC0415 - only here
        McpServerLost,
        WorkerConfigError,
        WorkflowApplyError,
    )

    with session(ctx) as s:
        servers = [parse_mcp(value) for value in mcp]
        if target is None and not servers:
            raise UsageError("give MODULE:ATTRIBUTE, --mcp NAME=COMMAND, or both")
        found = _worker_of(target, servers)
        label = target or "the --mcp worker"
        config = worker_config(ctx, found, label, url, token)
        if config.token is None:
            raise UsageError(
                f"no worker token: give --token, set {WORKER_TOKEN_ENV}, or start "
                "`workload serve` in embedded mode (its credentials file holds one)"
            )
        given = ctx.find_root().obj
        client = None
        if isinstance(given, httpx.AsyncBaseTransport):  # an in-process caller's transport
            client = AsyncClient(
                base_url=config.url, token=config.token, transport=given, max_retries=0
            )
        try:
            found.configure(
                queues=queue or None,
                concurrency=concurrency,
                url=config.url,
                token=config.token,
                client=client,
            )
            s.out.say(
                f"worker {found.worker_id}: {config.url} (token from {config.token_source}); "
                "Ctrl-C to stop"
            )
            with _LogTo(log_level):
                try:
                    found.run()
                except McpServerLost as exc:
                    s.out.say(f"error: {exc}", style="red")
                    raise typer.Exit(1) from None
                except Interrupted:
                    # The signal came in the instant between this command's handler and the
                    # worker's (as run() put ours back): the worker has stopped, or never
                    # claimed anything. A stop, not an error, and the stopped worker's exit.
                    logging.getLogger("workload.worker").info("stopped")
                finally:
                    stops.closing()  # the worker has stopped: a signal now stops nothing
        except WorkflowApplyError as exc:  # apply_on_start: the server refused a workflow
            s.out.say(f"workflow {exc.workflow_id!r} not applied", style="red")
            if isinstance(exc.cause, WorkloadError):
                raise exc.cause from None  # said with every problem, and its exit code (7, 8)
            raise UsageError(str(exc)) from None
        except WorkerConfigError as exc:
            raise UsageError(str(exc)) from None
    if client is None and found.handlers_left_running:  # the process is the worker's own
        _leave_abandoned_handlers()


def _worker_of(target: str | None, servers: list[McpSpec]) -> Worker:
    """The Worker of ``target`` (or a new one), with the MCP servers of ``--mcp`` added.

    Raises:
        UsageError: no such Worker, or an MCP server it refuses (a name given twice, no ``mcp``
            package).
    """
    from workload_worker import Worker, WorkerConfigError  # noqa: PLC0415 - only here

    found = load_worker(target) if target is not None else Worker()
    try:
        for server in servers:
            found.mcp(server.name, server.command, url=server.url)
    except WorkerConfigError as exc:
        raise UsageError(str(exc)) from None
    return found


def _leave_abandoned_handlers() -> None:
    """Exit now: a sync handler that ignored its cancellation still runs in a thread.

    The worker has stopped — its grace period passed, the attempt was reported
    ``worker_shutdown`` — but the interpreter would wait for that thread before exiting,
    for as long as the handler runs (a ``time.sleep`` cannot be interrupted). The process
    exits 0 as a stopped worker does (SPEC §10), after flushing its logs and output.
    """
    logging.getLogger("workload.cli").warning(
        "a handler ignored its cancellation and still runs: exiting without waiting for it"
    )
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
