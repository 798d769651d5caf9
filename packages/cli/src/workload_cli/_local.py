"""``workload run-local FILE``: execute a definition in this process, without a server.

The service's packages are imported only when the command runs: they are an optional
dependency (``pip install 'workload-cli[local]'``), and the other client commands never need
them. The run goes through the service's own wiring on the in-memory store.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Annotated

import typer

from workload_cli._exit import ExitCode, exit_code_for_run
from workload_cli._inputs import read_object_file, run_input
from workload_cli._options import DefinitionArgument, InputOption, OutputOption
from workload_cli._progress import progress_display
from workload_cli._session import UsageError, session

__all__ = ["run_local"]


def _engine() -> ModuleType:
    try:
        # By name at run time: only run-local loads the engine (see the import contracts).
        _local_engine = importlib.import_module("workload_cli._local_engine")
    except ImportError as exc:
        typer.echo(
            f"error: run-local needs the service's packages ({exc.name} is missing); install "
            "them with: "
            "pip install 'workload-cli[local]'",
            err=True,
        )
        raise typer.Exit(ExitCode.USAGE) from None
    return _local_engine


def run_local(
    ctx: typer.Context,
    file: DefinitionArgument,
    state: Annotated[
        Path | None,
        typer.Option(
            help="Write the final run, tasks, attempts and events here as JSON.",
            metavar="OUT.json",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    input_: InputOption = None,
    output: OutputOption = None,
) -> None:
    """Execute a definition in-process (engine, in-memory store, mock executor; no server).

    Shows the run live like `runs watch`, and exits like it.
    """
    engine = _engine()
    with session(ctx, output) as s:
        definition = read_object_file(file)
        data = run_input(input_) or {}
        with progress_display(s.out) as display:
            try:
                final = engine.run_local(definition, data, display.update)
            except engine.DefinitionRejected as exc:
                s.out.say(f"error: {exc} (invalid_definition)", style="red")
                for path, message in exc.problems:
                    s.out.say(f"  {path or '/'}: {message}")
                raise typer.Exit(ExitCode.REJECTED) from None
            display.finish(final.run)
        if state is not None:
            try:
                state.write_text(json.dumps(final.to_json(), indent=2) + "\n", encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"cannot write {state}: {exc}") from None
            s.out.say(f"state written to {state}")
        raise typer.Exit(exit_code_for_run(final.run.status))
