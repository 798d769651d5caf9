"""Options and arguments shared by several client commands.

``--url``, ``--token`` and ``--output`` are declared once here and used twice: on the root
command (``workload --url X runs list``) and on every client command (``workload runs list
--url X``). Typer reads their environment variables (``envvar=``); :func:`closest` picks, among
the values typer resolved at both places, the one that wins: a flag after the command, else a
flag before it, else the environment.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, Protocol, TypeVar

import typer

from workload_cli._output import OutputFormat
from workload_sdk.config import DEFAULT_BASE_URL, TOKEN_ENV, URL_ENV, WORKER_TOKEN_ENV

__all__ = [
    "OUTPUT_ENV",
    "PAGE",
    "DefinitionArgument",
    "IdempotencyKeyOption",
    "InputOption",
    "OutputOption",
    "RunArgument",
    "TokenOption",
    "UrlOption",
    "WorkerTokenOption",
    "closest",
    "limit_option",
    "page_size",
]

T = TypeVar("T")

OUTPUT_ENV = "WORKLOAD_OUTPUT"
_PANEL = "Connection and output (before or after the command; after wins)"

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar=URL_ENV,
        help=f"The server (else the dev credentials file's URL, else {DEFAULT_BASE_URL}).",
        show_default=False,
        rich_help_panel=_PANEL,
    ),
]

TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar=TOKEN_ENV,
        help="Bearer token (else the dev credentials file's operator token, for the default "
        "URL or the file's).",
        show_default=False,
        rich_help_panel=_PANEL,
    ),
]

WorkerTokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar=WORKER_TOKEN_ENV,
        help="A worker token. First this flag, then the Worker's token= in code, then the "
        "variable, then the dev credentials file's worker token (for the default URL or the "
        "file's).",
        show_default=False,
        rich_help_panel=_PANEL,
    ),
]
"""``workload worker``'s ``--token``: a worker token, from ``WORKLOAD_WORKER_TOKEN``."""

OutputOption = Annotated[
    OutputFormat | None,
    typer.Option(
        "--output",
        "-o",
        envvar=OUTPUT_ENV,
        help="table, plain or json (default: table on a terminal, plain text otherwise).",
        show_default=False,
        case_sensitive=False,
        rich_help_panel=_PANEL,
    ),
]

IdempotencyKeyOption = Annotated[
    str | None,
    typer.Option(
        help="The write's Idempotency-Key (default: a new random one). Repeat a write that "
        "got no answer with the same key and the server answers the original outcome.",
        show_default=False,
    ),
]

RunArgument = Annotated[str, typer.Argument(help="The run id.", show_default=False)]

PAGE = 200
"""The most items a listing asks the server for at once."""


def limit_option(what: str) -> Any:
    """``--limit`` of a listing of ``what`` that shows them all unless told."""
    return typer.Option(
        help=f"Show at most this many {what} (default: all).", min=1, show_default=False
    )


def page_size(limit: int | None) -> int:
    """How many items to ask for at once to show at most ``limit`` (None: all of them)."""
    return min(limit or PAGE, PAGE)


DefinitionArgument = Annotated[
    str,
    typer.Argument(
        help="A JSON workflow definition (- for standard input).",
        metavar="FILE",
        show_default=False,
    ),
]

InputOption = Annotated[
    str | None,
    typer.Option(
        "--input",
        help="The run input: a JSON object, @FILE, or @- for standard input.",
        show_default=False,
    ),
]


class _Level(Protocol):
    """What :func:`closest` reads of a (typer or click) context."""

    @property
    def parent(self) -> _Level | None: ...

    @property
    def params(self) -> dict[str, Any]: ...

    def get_parameter_source(self, name: str) -> enum.Enum | None: ...


def closest(ctx: _Level, name: str, value: T | None) -> tuple[T, bool] | None:
    """The winning value of a global option, and whether it came from the environment.

    A flag given after the command (``value``, the command's own option) wins over one given
    before it (the same option of an enclosing command), which wins over the environment
    variable (which typer resolved alike at every level). An empty value counts as not given,
    as an empty environment variable does.

    Args:
        ctx: The command's context.
        name: The option's parameter name (``url``, ``token``, ``output``).
        value: The command's own value of that option (a value that typer did not parse, as
            when a caller passes its own, counts as a flag).

    Returns:
        ``(value, from_env)``, or None if the option was given nowhere.
    """
    from_env: T | None = None
    level, candidate = ctx, value
    while True:
        if candidate:
            source = level.get_parameter_source(name) if name in level.params else None
            # By name: typer's vendored click and click have each their ParameterSource.
            if source is None or source.name != "ENVIRONMENT":
                return candidate, False
            from_env = from_env or candidate
        if level.parent is None:
            return None if from_env is None else (from_env, True)
        level = level.parent
        candidate = level.params.get(name)
