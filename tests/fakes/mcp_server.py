"""A small MCP server for the tests, written with the ``mcp`` package's server side.

``python -m tests.fakes.mcp_server stdio DIR`` serves over standard input and output;
``python -m tests.fakes.mcp_server http DIR PORT`` serves streamable HTTP on 127.0.0.1:PORT
(path ``/mcp``). Every tool call appends a line ``{"tool", "arguments", "pid"}`` to
``DIR/calls.jsonl`` before it does anything else, so a test counts executions.

Tools:
- ``echo`` ``{"text"}`` → structured ``{"text", "length"}`` (and the same as text content);
  the text ``"!lie"`` gets structured content that breaks the tool's own output schema;
- ``fail`` ``{"reason"}`` → an MCP tool error (``isError: true``) whose text is the reason;
- ``hang`` ``{}`` → the first call (per DIR) never answers (until cancelled or killed); later
  calls answer ``{"released": true}`` at once (the retry of a call whose worker died);
- ``big`` ``{"size"}`` → a text block of ``size`` characters;
- ``bad name!`` → a tool whose name no action can carry (a worker leaves it out).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

TOOLS = ("echo", "fail", "hang", "big")
"""The tools a worker serves (``bad name!`` is left out)."""
LIE = "!lie"
"""The text ``echo`` answers with structured content its output schema refuses."""


class Echoed(BaseModel):
    """What ``echo`` answers."""

    text: str
    length: int


def recorded_calls(record: Path) -> list[dict[str, Any]]:
    """The calls recorded in ``record`` so far, oldest first."""
    path = record / "calls.jsonl"
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line]


def build(record: Path) -> MCPServer:
    """The server, recording calls in ``record/calls.jsonl``."""
    server: MCPServer = MCPServer("fake-mcp")

    def called(tool: str, arguments: dict[str, Any]) -> int:
        """Record the call; how many calls of ``tool`` came before it."""
        path = record / "calls.jsonl"
        before = sum(1 for c in recorded_calls(record) if c["tool"] == tool)
        line = json.dumps({"tool": tool, "arguments": arguments, "pid": os.getpid()})
        with path.open("a", encoding="utf-8") as calls:
            calls.write(line + "\n")
        return before

    @server.tool(description="Echo the text back, with its length.")
    def echo(text: str) -> Echoed:
        called("echo", {"text": text})
        return Echoed(text=text, length=len(text))

    @server.tool(description="Always fails with the reason given.")
    def fail(reason: str) -> str:
        called("fail", {"reason": reason})
        raise ToolError(reason)

    @server.tool(description="Never answers the first time.", structured_output=False)
    async def hang() -> dict[str, Any]:
        if called("hang", {}) == 0:
            await anyio.sleep_forever()
        return {"released": True}

    @server.tool(description="A text of `size` characters.", structured_output=False)
    def big(size: int) -> str:
        called("big", {"size": size})
        return "x" * size

    @server.tool(name="bad name!", description="A name no action can carry.")
    def bad() -> str:
        called("bad name!", {})
        return "bad"

    answer = server.call_tool

    async def call_tool(name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if name == "echo" and arguments.get("text") == LIE:
            called("echo", arguments)
            return CallToolResult(
                content=[TextContent(type="text", text=LIE)], structured_content={"text": 1}
            )
        return await answer(name, arguments, context)

    server.call_tool = call_tool  # type: ignore[method-assign]
    return server


def main(argv: list[str]) -> None:
    """Serve over ``stdio`` or ``http`` (see the module's docstring)."""
    mode, record = argv[0], Path(argv[1])
    server = build(record)
    if mode == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(argv[2]))


if __name__ == "__main__":
    main(sys.argv[1:])
