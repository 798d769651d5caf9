"""What crosses from an MCP server to Workload: tools' agent entries and calls' outputs.

The part of :mod:`workload_worker.mcp_tools` (SPEC §11, ADR 0029, ADR 0052) that needs no
session: the action a tool becomes, the agent ``tools`` entry ``workload mcp tools`` prints, and
the output (or the failure) a tool call's result becomes. Re-exported there.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from workload_worker._outcome import clean_json
from workload_worker._settings import ACTION
from workload_worker.errors import NonRetryableError

if TYPE_CHECKING:
    from mcp.types import CallToolResult, Tool

__all__ = [
    "AGENT_TOOL_NAME",
    "MCP_ERROR",
    "MCP_TOOL_ERROR",
    "MCP_UNAVAILABLE",
    "action_of",
    "output_of",
    "tool_entries",
    "tool_entry",
]

MCP_TOOL_ERROR = "mcp_tool_error"
"""The code of a call the tool answered with ``isError: true`` (not retryable)."""
MCP_ERROR = "mcp_error"
"""The code of a call the server refused with a protocol error (no such tool, bad arguments),
or answered with a result the client refuses (structured content its output schema forbids)."""
MCP_UNAVAILABLE = "mcp_unavailable"
"""The code of a call whose server connection was lost (retryable: another worker may serve)."""
AGENT_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")
"""What an agent tool's name may not hold (its pattern is ``^[A-Za-z0-9_-]{1,64}$``)."""


def action_of(server: str, tool: str) -> str | None:
    """The action serving ``tool`` of ``server``, or None when the API would refuse its name."""
    action = f"mcp.{server}.{tool}"
    return action if tool and ACTION.fullmatch(action) else None


def tool_entry(server: str, tool: Tool) -> dict[str, Any] | None:
    """The agent ``tools`` entry of an MCP tool (None: no action can carry its name).

    ``name`` is the tool's name with any character an agent tool name may not hold made ``_``
    (cut to 64); ``parameters`` is the tool's input schema as the server gave it.
    """
    action = action_of(server, tool.name)
    if action is None:
        return None
    return {
        "name": AGENT_TOOL_NAME.sub("_", tool.name)[:64],
        "action": action,
        "description": tool.description or "",
        "parameters": tool.input_schema,
    }


def tool_entries(server: str, tools: Sequence[Tool]) -> list[tuple[Tool, dict[str, Any] | None]]:
    """Each tool with its agent ``tools`` entry (None: left out), their names told apart.

    Two tools whose names become the same agent tool name (``read.file`` and ``read_file``)
    get it once, since a definition refuses a tool name given twice: a tool already named so
    keeps it, the others are suffixed ``_2``, ``_3``… (in the server's order).
    """
    entries = [(tool, tool_entry(server, tool)) for tool in tools]
    # Names that need no change are kept first (the first of a name given twice).
    taken = {e["name"] for t, e in entries if e is not None and e["name"] == t.name}
    kept: set[str] = set()
    for tool, entry in entries:
        if entry is not None:
            name, number = entry["name"], 1
            if name == tool.name and name not in kept:
                kept.add(name)
                continue
            while name in taken:
                number += 1
                suffix = f"_{number}"
                name = entry["name"][: 64 - len(suffix)] + suffix
            entry["name"] = name
            taken.add(name)
    return entries


def output_of(result: CallToolResult) -> dict[str, Any]:
    """The output of a call (strings cleaned as ``clean_json`` does), or a tool error's failure.

    Raises:
        NonRetryableError: the tool answered ``isError: true`` (code ``mcp_tool_error``).
    """
    content = [
        block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content
    ]
    if result.is_error:
        texts = [str(block.get("text", "")) for block in content if block.get("type") == "text"]
        raise NonRetryableError("\n".join(texts) or "the tool failed", code=MCP_TOOL_ERROR)
    # A server's text may hold what the control plane cannot store (NUL, lone surrogates).
    structured = clean_json(result.structured_content)
    return {"content": clean_json(content), "structured": structured, "is_error": False}
