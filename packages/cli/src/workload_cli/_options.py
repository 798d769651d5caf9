"""Options and arguments shared by several client commands."""

from __future__ import annotations

from typing import Annotated

import typer

from workload_cli._output import OutputFormat

__all__ = ["IdempotencyKeyOption", "OutputOption", "RunArgument"]

OutputOption = Annotated[
    OutputFormat | None,
    typer.Option(
        "--output",
        "-o",
        help="table, plain or json (default: table on a terminal, plain text otherwise). "
        "Wins over the global --output.",
        show_default=False,
        case_sensitive=False,
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
