"""The parts of ``workload_worker.mcp_tools``: tool entries, outputs, a server's refusals."""

from __future__ import annotations

import re
from typing import Any

import pytest
from mcp import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, ImageContent, TextContent, Tool

from workload_worker import MCP_TOOL_ERROR, Context, NonRetryableError
from workload_worker.mcp_tools import (
    MCP_ERROR,
    McpConnections,
    McpServer,
    _Session,
    action_of,
    output_of,
    tool_entries,
    tool_entry,
)

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def _tool(name: str, description: str | None = "Find it.") -> Tool:
    return Tool(name=name, description=description, input_schema=SCHEMA)


def test_a_tool_entry_is_paste_ready() -> None:
    assert tool_entry("docs", _tool("search")) == {
        "name": "search",
        "action": "mcp.docs.search",
        "description": "Find it.",
        "parameters": SCHEMA,
    }


@pytest.mark.parametrize(
    ("tool", "name", "action"),
    [
        ("read.file", "read_file", "mcp.docs.read.file"),
        ("ns:get-it", "ns_get-it", "mcp.docs.ns:get-it"),
        ("t" * 100, "t" * 64, "mcp.docs." + "t" * 100),
    ],
)
def test_an_entry_name_is_made_an_agent_tool_name(tool: str, name: str, action: str) -> None:
    entry = tool_entry("docs", _tool(tool, None))
    assert entry is not None
    assert (entry["name"], entry["action"], entry["description"]) == (name, action, "")


def test_names_that_become_one_agent_tool_name_are_told_apart() -> None:
    # A definition refuses a tool name given twice: the entries printed must paste as they are.
    # A tool already named as an agent tool keeps its name, wherever the server lists it.
    tools = ["read.file", "read_file", "read:file", "bad name!", "x" * 70, "x" * 64 + ".y"]
    listed = tool_entries("docs", [_tool(t, None) for t in tools])
    assert [(tool.name, entry and entry["name"]) for tool, entry in listed] == [
        ("read.file", "read_file_2"),
        ("read_file", "read_file"),
        ("read:file", "read_file_3"),
        ("bad name!", None),
        ("x" * 70, "x" * 64),
        ("x" * 64 + ".y", "x" * 62 + "_2"),
    ]
    names = [entry["name"] for _, entry in listed if entry is not None]
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) for name in names)


@pytest.mark.parametrize("tool", ["bad name!", "a/b", "ü", "t" * 120, "new\nline", "", "x" * 200])
def test_a_tool_no_action_can_carry_has_no_entry(tool: str) -> None:
    assert action_of("docs", tool) is None
    assert tool_entry("docs", _tool(tool)) is None


def test_an_output_holds_the_content_blocks_as_json() -> None:
    result = CallToolResult(
        content=[
            TextContent(type="text", text="two blocks"),
            ImageContent(type="image", data="aGk=", mime_type="image/png"),
        ],
        structured_content={"n": 2},
    )
    assert output_of(result) == {
        "content": [
            {"type": "text", "text": "two blocks"},
            {"type": "image", "data": "aGk=", "mimeType": "image/png"},
        ],
        "structured": {"n": 2},
        "is_error": False,
    }


def test_text_the_control_plane_cannot_store_is_replaced() -> None:
    result = CallToolResult(
        content=[TextContent(type="text", text="a\x00b\ud800c")],
        structured_content={"k\x00": ["\x00"], "deep": [[[[[]]]]]},
    )
    output = output_of(result)
    assert output["content"] == [{"type": "text", "text": "a\ufffdb\ufffdc"}]
    assert output["structured"] == {"k\ufffd": ["\ufffd"], "deep": [[[[[]]]]]}


def test_a_tool_error_fails_not_retryable_with_its_text() -> None:
    result = CallToolResult(
        content=[TextContent(type="text", text="line 1"), TextContent(type="text", text="2")],
        is_error=True,
    )
    with pytest.raises(NonRetryableError) as raised:
        output_of(result)
    assert (raised.value.code, raised.value.message) == (MCP_TOOL_ERROR, "line 1\n2")
    with pytest.raises(NonRetryableError, match="the tool failed"):
        output_of(CallToolResult(content=[], is_error=True))


class _Refusing:
    """A client whose server answers every call with a protocol error."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        raise MCPError(INVALID_PARAMS, f"bad arguments for {name}")


async def test_a_protocol_error_fails_mcp_error_and_keeps_the_server() -> None:
    lost: list[McpServer] = []
    server = McpServer("docs", command=("server",))
    connections = McpConnections([server], lost.append)
    session = _Session(server, lost.append)
    session.client = _Refusing()  # type: ignore[assignment]
    handler = connections._handler(session, "search")
    with pytest.raises(NonRetryableError) as raised:
        await handler(Context.standalone(), {"q": 1})
    assert raised.value.code == MCP_ERROR
    assert "bad arguments for search" in raised.value.message
    assert (lost, connections.lost) == ([], None)


SECRET = "s3cr3t-Token-9Qw"


@pytest.mark.parametrize(
    ("server", "shown"),
    [
        (
            McpServer("api", url=f"https://user:{SECRET}@mcp.example:8443/mcp?key={SECRET}#x"),
            "MCP server 'api' (https://mcp.example:8443/mcp)",
        ),
        (
            McpServer("files", command=("npx", "server", "--token", SECRET, "/srv")),
            "MCP server 'files' (npx)",
        ),
    ],
)
def test_a_server_is_named_without_its_credentials(server: McpServer, shown: str) -> None:
    """Messages reach logs, stored attempt errors and the model: a server's URL query, user
    info and command arguments (where credentials go) never appear in them."""
    assert server.describe() == shown
    where = server.url or " ".join(server.command)
    scrubbed = server.scrub(f"connect failed for {where}: token {SECRET} refused")
    assert SECRET not in scrubbed
    assert scrubbed.startswith("connect failed for ")
