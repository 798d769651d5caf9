"""``--mcp NAME=COMMAND`` values and ``workload mcp tools`` (SPEC §11, ADR 0029).

``NAME=COMMAND``: ``NAME`` is the server's name in its actions (``mcp.NAME.TOOL``,
``^[A-Za-z0-9_-]{1,32}$``); ``COMMAND`` is split as a POSIX shell would split it (quotes,
backslashes; no variables, no globbing, no shell run) into the program and its arguments, run
with the server on standard input and output. A ``COMMAND`` that is a single ``http://`` or
``https://`` URL is a streamable HTTP server instead.

The worker SDK (and the ``mcp`` package it uses, the ``workload-cli[mcp]`` extra) is imported
when a command runs, so that the other commands never load it.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Annotated

import typer

from workload_cli._session import UsageError, session

__all__ = ["McpOption", "McpSpec", "mcp_app", "parse_mcp"]

MCP_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
"""The worker SDK's pattern (``workload_worker.mcp_tools.MCP_NAME``), checked before it loads."""
_URL = re.compile(r"^https?://\S+$")
_MAX_VALUE = 8192

McpOption = Annotated[
    list[str] | None,
    typer.Option(
        "--mcp",
        help="Serve the tools of an MCP server as actions mcp.NAME.TOOL: NAME=COMMAND (run "
        "over stdio; COMMAND split as a shell would) or NAME=URL (streamable HTTP). Repeat it "
        "for several.",
        metavar="NAME=COMMAND",
        show_default=False,
    ),
]

mcp_app = typer.Typer(help="Tools of MCP servers, for agents.", no_args_is_help=True)


@dataclass(frozen=True, slots=True)
class McpSpec:
    """A parsed ``NAME=COMMAND``: a command (stdio) or a URL (streamable HTTP)."""

    name: str
    command: list[str] | None
    url: str | None


def parse_mcp(value: str) -> McpSpec:
    """``NAME=COMMAND`` (or ``NAME=URL``), checked.

    Raises:
        UsageError: no ``=``, an empty or bad name, an empty or unsplittable command.
    """
    shown = value if len(value) <= 80 else value[:79] + "…"
    if len(value) > _MAX_VALUE:
        raise UsageError(f"--mcp {shown!r}: longer than {_MAX_VALUE} characters")
    name, sep, rest = value.partition("=")
    if not sep:
        raise UsageError(f"--mcp {shown!r}: expected NAME=COMMAND (e.g. files='npx server')")
    if not name:
        raise UsageError(f"--mcp {shown!r}: the NAME before '=' is empty")
    if not MCP_NAME.fullmatch(name):
        raise UsageError(f"--mcp {shown!r}: NAME {name!r} does not match {MCP_NAME.pattern}")
    try:
        argv = shlex.split(rest)
    except ValueError as exc:
        raise UsageError(f"--mcp {name}: COMMAND cannot be split ({exc})") from None
    if not argv:
        raise UsageError(f"--mcp {name}: the COMMAND after '=' is empty")
    if len(argv) == 1 and _URL.fullmatch(argv[0]):
        return McpSpec(name, None, argv[0])
    return McpSpec(name, argv, None)


@mcp_app.command("tools")
def tools(
    ctx: typer.Context,
    server: Annotated[
        str,
        typer.Argument(
            help="The server: NAME=COMMAND (stdio) or NAME=URL (streamable HTTP).",
            metavar="NAME=COMMAND",
            show_default=False,
        ),
    ],
) -> None:
    """Print the agent tools entry of each tool of an MCP server, as JSON to paste.

    Each entry has name, action (mcp.NAME.TOOL), description and parameters (the tool's input
    schema). The server is started, asked for its tools, and stopped. A tool whose name no
    action can carry is named on standard error and left out. Exit 2: a bad NAME=COMMAND, or a
    server that does not start or list its tools.
    """
    import anyio  # noqa: PLC0415 - only this command needs them

    from workload_worker import WorkerConfigError  # noqa: PLC0415
    from workload_worker.mcp_tools import list_tools, mcp_server, tool_entries  # noqa: PLC0415

    with session(ctx) as s:
        spec = parse_mcp(server)
        try:
            found = mcp_server(spec.name, spec.command, spec.url)
            listed = anyio.run(list_tools, found, backend="asyncio")
        except WorkerConfigError as exc:
            raise UsageError(str(exc)) from None
        entries = []
        for tool, entry in tool_entries(spec.name, listed):
            if entry is None:
                s.out.say(f"left out: tool {tool.name!r} (no action name can carry it)")
            else:
                entries.append(entry)
        typer.echo(json.dumps(entries, indent=2, ensure_ascii=False))
