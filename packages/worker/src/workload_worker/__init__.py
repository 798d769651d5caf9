"""Worker SDK of the Workload control plane (SPEC §10): run remote actions under leases.

Example:
    >>> from workload_worker import Context, Worker  # doctest: +SKIP
    >>> worker = Worker(queues=["default"], concurrency=8)  # doctest: +SKIP
    >>> @worker.action("resize")  # doctest: +SKIP
    ... async def resize(ctx: Context, input: dict) -> dict:
    ...     return {"width": input["width"] // 2}
    >>> worker.run()  # doctest: +SKIP

Workflows are written next to their handlers (SPEC §17): :class:`Workflow` builds the definition
(``task``, ``agent``, ``definition()``), handlers typed with pydantic models get their input as the
model, and ``Worker(workflows=[...], apply_on_start=True)`` applies the definitions with an
operator token.

A worker claims attempts of the actions it declares, runs their handlers (coroutine functions on
the event loop, plain functions in threads), heartbeats their leases, and reports each outcome
once. It depends on ``workload-sdk``, ``anyio`` and ``pydantic`` only, and logs to the
``workload.worker`` logger. ``worker.mcp(name, command=[...])`` (or ``url=...``) serves the tools
of an MCP server as actions ``mcp.NAME.TOOL`` (:mod:`workload_worker.mcp_tools`, the
``workload-worker[mcp]`` extra).
"""

from workload_worker._agent import Tool, ToolLike, agent, tool
from workload_worker._context import Context, JsonObject
from workload_worker._outcome import INVALID_OUTPUT, WORKER_SHUTDOWN
from workload_worker._settings import default_worker_id
from workload_worker._worker import Handler, Worker
from workload_worker._workflow import TaskHandle, TaskOptions, Workflow
from workload_worker.errors import (
    INVALID_INPUT,
    DefinitionError,
    InvalidInput,
    NonRetryableError,
    WorkerConfigError,
    WorkerError,
    WorkflowApplyError,
)
from workload_worker.mcp_tools import MCP_TOOL_ERROR, McpServerLost

__all__ = [
    "INVALID_INPUT",
    "INVALID_OUTPUT",
    "MCP_TOOL_ERROR",
    "WORKER_SHUTDOWN",
    "Context",
    "DefinitionError",
    "Handler",
    "InvalidInput",
    "JsonObject",
    "McpServerLost",
    "NonRetryableError",
    "TaskHandle",
    "TaskOptions",
    "Tool",
    "ToolLike",
    "Worker",
    "WorkerConfigError",
    "WorkerError",
    "Workflow",
    "WorkflowApplyError",
    "agent",
    "default_worker_id",
    "tool",
]
