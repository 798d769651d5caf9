"""``workload runs …``: start, rerun, list, show, cancel, watch; tasks, attempts, steps, events."""

from __future__ import annotations

import enum
import functools
import inspect
import itertools
from collections.abc import Callable
from typing import Annotated, Any, Concatenate, ParamSpec

import typer

from workload_cli._exit import CLIENT_CODES, WATCHED_RUN, ExitCode, exit_codes_help
from workload_cli._inputs import check_idempotency_key, run_input
from workload_cli._options import (
    PAGE,
    IdempotencyKeyOption,
    InputOption,
    RunArgument,
    limit_option,
    page_size,
)
from workload_cli._session import Session, UsageError, client_command, resigned
from workload_cli._since import since as parse_since
from workload_cli._views import (
    ATTEMPT_COLUMNS,
    EVENT_COLUMNS,
    RUN_COLUMNS,
    STEP_COLUMNS,
    TASK_COLUMNS,
)
from workload_cli._watch import DEFAULT_INTERVAL, watch_run
from workload_sdk import Run, RunStatus

__all__ = ["runs_app"]

P = ParamSpec("P")

runs_app = typer.Typer(
    help="Runs of workflow versions: start, watch, cancel, inspect.", no_args_is_help=True
)

DEFAULT_LIST_LIMIT = 20


class Order(enum.StrEnum):
    """The order of ``runs list``."""

    DESC = "desc"
    ASC = "asc"


TaskArgument = Annotated[str, typer.Argument(help="The task's key.", show_default=False)]
IntervalOption = Annotated[
    float, typer.Option(help="Seconds between polls.", min=0.05, show_default=True)
]
TimeoutOption = Annotated[
    float | None,
    typer.Option(
        help="Give up watching after this many seconds (exit 12; the run goes on).",
        min=0,
        show_default=False,
    ),
]
WaitOption = Annotated[bool, typer.Option("--wait", help="Show the run live until it finishes.")]
QuietOption = Annotated[
    bool,
    typer.Option("--quiet", "-q", help="Print only the run id (with --wait: no progress either)."),
]
_WATCH_HELP = exit_codes_help(
    *CLIENT_CODES, *WATCHED_RUN, ExitCode.WAIT_TIMEOUT, ok="ok (run succeeded)"
)
_START_HELP = exit_codes_help(
    *CLIENT_CODES, *WATCHED_RUN, ExitCode.WAIT_TIMEOUT, ok="ok (with --wait: run succeeded)"
)


_SESSION = inspect.Parameter("s", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Session)
_FOLLOW = [
    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=option)
    for name, option, default in (
        ("wait", WaitOption, False),
        ("timeout", TimeoutOption, None),
        ("interval", IntervalOption, DEFAULT_INTERVAL),
        ("quiet", QuietOption, False),
    )
]


def _starts_a_run(
    command: Callable[Concatenate[Session, P], tuple[Run, str | None]],
) -> Callable[Concatenate[Session, P], None]:
    """A command that starts a run: its options, then --wait, --timeout, --interval, --quiet.

    ``command`` starts the run and returns it with a line to say first (unless --quiet). The
    run is then printed (or, with --quiet, only its id); with --wait it is followed to its end.
    """

    @functools.wraps(command)
    def started(
        s: Session,
        *args: Any,
        wait: bool = False,
        timeout: float | None = None,
        interval: float = DEFAULT_INTERVAL,
        quiet: bool = False,
        **kwargs: Any,
    ) -> None:
        run, note = command(s, *args, **kwargs)
        if note is not None and not quiet:
            s.out.say(note)
        if quiet:
            s.out.echo(run.run_id)
        elif not wait:
            s.out.resource(run)
        if not quiet:
            s.out.say(f"started run {run.run_id} of {run.workflow_id} version {run.version}")
        if wait:
            code = watch_run(
                s,
                run.run_id,
                interval=interval,
                timeout=timeout,
                quiet=quiet,
                show_output=not quiet,
            )
            raise typer.Exit(code)

    return resigned(started, command, first=_SESSION, last=_FOLLOW)


@runs_app.command("start", epilog=_START_HELP)
@client_command
@_starts_a_run
def start(
    s: Session,
    workflow_id: Annotated[str, typer.Argument(help="The workflow to run.", show_default=False)],
    *,
    version: Annotated[
        int | None,
        typer.Option(help="The version to run (default: the latest).", min=1, show_default=False),
    ] = None,
    input_: InputOption = None,
    idempotency_key: IdempotencyKeyOption = None,
) -> tuple[Run, str | None]:
    """Start a run of a workflow version; print it (or, with --wait, follow it to the end).

    With --wait the run is shown live, then its output (the outputs of its sink tasks, as JSON)
    once it has succeeded; --output json prints the final run, output included.
    """
    data = run_input(input_)
    key = check_idempotency_key(idempotency_key)
    return s.client.runs.start(workflow_id, data, version=version, idempotency_key=key), None


@runs_app.command("rerun", epilog=_START_HELP)
@client_command
@_starts_a_run
def rerun(
    s: Session,
    run_id: RunArgument,
    *,
    latest: Annotated[
        bool,
        typer.Option(
            "--latest", help="Run the workflow's latest version (default: the run's version)."
        ),
    ] = False,
    idempotency_key: IdempotencyKeyOption = None,
) -> tuple[Run, str | None]:
    """Start a new run of a run's workflow version, with the same input; print it as start does.

    With --latest the new run is of the workflow's latest version instead. The run it repeats
    is left as it is.
    """
    key = check_idempotency_key(idempotency_key)
    before = s.client.runs.get(run_id)
    run = s.client.runs.start(
        before.workflow_id,
        before.input,
        version=None if latest else before.version,
        idempotency_key=key,
    )
    return run, f"rerunning {before.run_id} (version {run.version})"


@runs_app.command("list")
@client_command
def list_runs(
    s: Session,
    *,
    workflow: Annotated[
        str | None, typer.Option(help="Only this workflow's runs.", show_default=False)
    ] = None,
    status: Annotated[
        RunStatus | None, typer.Option(help="Only runs in this status.", show_default=False)
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            help="Only runs created after this: a duration back from now (30m, 1h, 2d) or an "
            "RFC 3339 time.",
            show_default=False,
        ),
    ] = None,
    order: Annotated[
        Order, typer.Option(help="desc: newest first; asc: oldest first.")
    ] = Order.DESC,
    limit: Annotated[
        int | None,
        typer.Option(
            help=f"Show at most this many runs (default: {DEFAULT_LIST_LIMIT}).",
            min=1,
            show_default=False,
        ),
    ] = None,
    all_: Annotated[
        bool, typer.Option("--all", help="Show every run (page through them all).")
    ] = False,
) -> None:
    """List runs, newest first (the latest 20 unless --limit or --all says otherwise)."""
    if all_ and limit is not None:
        raise UsageError("--all and --limit cannot be used together")
    shown = None if all_ else (limit or DEFAULT_LIST_LIMIT)
    pager = s.client.runs.list(
        workflow_id=workflow,
        status=status,
        order=order.value,
        created_after=None if since is None else parse_since(since),
        limit=page_size(shown),
    )
    s.out.listing(itertools.islice(pager, shown), RUN_COLUMNS)


@runs_app.command("show")
@client_command
def show(s: Session, run_id: RunArgument) -> None:
    """Show a run: status, revision, input, timestamps, task counts, agent usage and output.

    The output is the run's result once it has succeeded: the outputs of its sink tasks, as
    JSON (null before). In a table, usage shows its non-zero counts only (no row for a run
    without agents).
    """
    s.out.resource(s.client.runs.get(run_id))


@runs_app.command("cancel")
@client_command
def cancel(
    s: Session,
    run_id: RunArgument,
    *,
    if_revision: Annotated[
        int | None,
        typer.Option(
            help="Cancel only if the run is still at this revision (else exit 7, "
            "precondition_failed, and nothing is written).",
            min=1,
            show_default=False,
        ),
    ] = None,
    idempotency_key: IdempotencyKeyOption = None,
) -> None:
    """Request cancellation of a run; print the run (a pending run is canceled at once)."""
    key = check_idempotency_key(idempotency_key)
    run = s.client.runs.cancel(run_id, if_revision=if_revision, idempotency_key=key)
    s.out.resource(run)
    s.out.say(f"cancel requested for run {run.run_id} (now {run.status.value})")


@runs_app.command("watch", epilog=_WATCH_HELP)
@client_command
def watch(
    s: Session,
    run_id: RunArgument,
    *,
    timeout: TimeoutOption = None,
    interval: IntervalOption = DEFAULT_INTERVAL,
) -> None:
    """Show a run's tasks live until the run finishes; the exit code says how it ended.

    On a terminal: a table redrawn in place. Otherwise: one line per change. With
    --output json: the final run only (its output included; `runs show` prints it too).
    """
    raise typer.Exit(watch_run(s, run_id, interval=interval, timeout=timeout))


@runs_app.command("tasks")
@client_command
def tasks(s: Session, run_id: RunArgument) -> None:
    """List a run's tasks in definition order."""
    s.out.listing(s.client.runs.tasks(run_id, limit=PAGE), TASK_COLUMNS)


@runs_app.command("attempts")
@client_command
def attempts(s: Session, run_id: RunArgument, task_key: TaskArgument) -> None:
    """List the attempts at one task of a run."""
    s.out.listing(s.client.runs.attempts(run_id, task_key, limit=PAGE), ATTEMPT_COLUMNS)


@runs_app.command("steps")
@client_command
def steps(
    s: Session,
    run_id: RunArgument,
    task_key: TaskArgument,
    *,
    limit: Annotated[int | None, limit_option("steps")] = None,
) -> None:
    """List an agent task's journal: each model call and tool call, by attempt and sequence.

    Columns: the step's attempt and sequence, kind, status, the tool called or the model
    asked, the worker that ran a remote tool call, a model call's input/output tokens, the
    step's duration in seconds, and what it answered (shortened; --output json has it all).
    A task of another action has no steps.
    """
    pager = s.client.runs.steps(run_id, task_key, limit=page_size(limit))
    s.out.listing(itertools.islice(pager, limit), STEP_COLUMNS)


@runs_app.command("events")
@client_command
def events(
    s: Session,
    run_id: RunArgument,
    *,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Keep printing new events until the run finishes (JSON: one object a line).",
        ),
    ] = False,
    interval: IntervalOption = DEFAULT_INTERVAL,
) -> None:
    """List a run's history (every state change), by sequence."""
    if follow:
        _follow(s, run_id)
    else:
        s.out.listing(s.client.runs.events(run_id, limit=PAGE), EVENT_COLUMNS)


def _follow(s: Session, run_id: str) -> None:
    """Print events as they are committed, each once, until the run is terminal (SPEC §13)."""
    write = s.out.stream(EVENT_COLUMNS)
    for event in s.client.runs.stream_events(run_id):
        write(event)
