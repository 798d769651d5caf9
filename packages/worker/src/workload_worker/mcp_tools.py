"""The tools of MCP servers served as actions (SPEC §11, ADR 0029): ``worker.mcp(...)``.

Each server named to a worker is started (stdio: its command is run; streamable HTTP: its URL is
connected) when the worker starts serving, its tools are listed then, and each tool ``T`` becomes
the action ``mcp.NAME.T``. The session stays open while the worker serves and is closed when it
stops. A tool whose action name the API would refuse (a character outside ``A-Z a-z 0-9 . _ :
-``, or longer than 128 with its prefix) is left out, with a warning.

An action's handler calls the tool with the claim's input as its arguments and completes with
``{"content": [MCP content blocks, as JSON], "structured": structuredContent or null,
"is_error": false}``; a tool error (``isError: true``) fails the attempt ``mcp_tool_error``, not
retryable, with the text of the result's text blocks as the message; a protocol error, or an
answer the client refuses (structured content that breaks the tool's output schema), fails it
``mcp_error``, not retryable. A server whose connection is lost fails the calls it had
``mcp_unavailable`` (retryable) and stops the worker (ADR 0029).

The ``mcp`` package is imported only here, and only when a server is started: it is the
``workload-worker[mcp]`` extra, and it brings the MCP server side's packages along.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import parse_qsl, urlsplit

import anyio
import anyio.abc

from workload_worker._attempt import Action
from workload_worker._context import Context
from workload_worker._mcp_entries import (
    MCP_ERROR,
    MCP_TOOL_ERROR,
    MCP_UNAVAILABLE,
    action_of,
    output_of,
    tool_entries,
    tool_entry,
)
from workload_worker._settings import MAX_ACTIONS
from workload_worker.errors import NonRetryableError, WorkerConfigError, WorkerError

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import Tool

__all__ = [
    "MCP_ERROR",
    "MCP_NAME",
    "MCP_TOOL_ERROR",
    "MCP_UNAVAILABLE",
    "McpConnections",
    "McpServer",
    "McpServerLost",
    "action_of",
    "list_tools",
    "mcp_server",
    "output_of",
    "tool_entries",
    "tool_entry",
]

logger = logging.getLogger("workload.worker")

MCP_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
"""A server's name in its actions (``mcp.NAME.T``): no dot, so the action reads one way."""
_MAX_PAGES = 100
"""A server that pages its tool list forever is read this many pages far."""
START_SECONDS = 60.0
"""How long a server gets to start and list its tools (a first ``npx -y`` may download)."""
_INSTALL = "the mcp package is not installed: pip install 'workload-worker[mcp]'"


class McpServerLost(WorkerError):
    """An MCP server's connection was lost while the worker served: the worker stopped.

    Attributes:
        code: ``mcp_unavailable``, the code its calls in flight failed with (retryable).
    """

    code = MCP_UNAVAILABLE


@dataclass(frozen=True, slots=True)
class McpServer:
    """An MCP server a worker serves the tools of: a command (stdio) or a URL (HTTP)."""

    name: str
    command: tuple[str, ...] = ()
    url: str | None = None

    def describe(self) -> str:
        """The server as messages name it: never its arguments, a URL's query or user info.

        Messages reach logs, attempt errors (stored, shown to viewers) and, for a tool call, the
        model: a server's credentials are often in its arguments (``--token …``) or its URL.
        """
        if self.url is not None:
            parts = urlsplit(self.url)
            host = parts.hostname or ""
            port = f":{parts.port}" if parts.port is not None else ""
            where = f"{parts.scheme}://{host}{port}{parts.path}"
        else:
            where = self.command[0] if self.command else ""
        return f"MCP server {self.name!r} ({where})"

    def scrub(self, text: str) -> str:
        """``text`` (an exception's message) without the server's URL secrets or arguments."""
        secrets_: list[str] = []
        if self.url is not None:
            parts = urlsplit(self.url)
            secrets_ += [self.url, parts.query, parts.netloc.rpartition("@")[0]]
            secrets_ += [
                parts.password or "",
                *(v for _, v in parse_qsl(parts.query) if len(v) >= 4),
            ]
        secrets_ += [a for a in self.command[1:] if len(a) >= 4]
        for secret in sorted(filter(None, secrets_), key=len, reverse=True):
            text = text.replace(secret, "***")
        return text

    def client(self) -> Client:
        """An unopened client of the official ``mcp`` package for this server."""
        from mcp import Client, StdioServerParameters, stdio_client  # noqa: PLC0415 - the extra

        if self.url is not None:
            return Client(self.url)
        program, *args = self.command
        parameters = StdioServerParameters(command=program, args=args)
        # The server's standard error is this process's: its messages show with the worker's.
        return Client(stdio_client(parameters, errlog=_errlog()))


def mcp_server(name: str, command: Sequence[str] | None, url: str | None) -> McpServer:
    """The server ``worker.mcp`` names, checked.

    Raises:
        WorkerConfigError: a bad name, neither or both of command and url, an empty command, a
            URL that is not http(s), or the ``mcp`` package missing.
    """
    if not isinstance(name, str) or not MCP_NAME.fullmatch(name):
        raise WorkerConfigError(f"MCP server name {name!r} does not match {MCP_NAME.pattern}")
    if (command is None) == (url is None):
        raise WorkerConfigError(f"MCP server {name!r}: give command=[...] or url=..., not both")
    if importlib.util.find_spec("mcp") is None:
        raise WorkerConfigError(_INSTALL)
    if url is not None:
        if not isinstance(url, str) or not re.fullmatch(r"https?://\S+", url):
            raise WorkerConfigError(f"MCP server {name!r}: url must be an http(s) URL")
        return McpServer(name, url=url)
    if isinstance(command, str) or not command or not all(isinstance(c, str) for c in command):
        raise WorkerConfigError(f"MCP server {name!r}: command must be a non-empty list of str")
    if not command[0]:
        raise WorkerConfigError(f"MCP server {name!r}: the command's program is empty")
    return McpServer(name, command=tuple(command))


async def _all_tools(client: Client) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _errlog() -> TextIO:
    """Where a stdio server's standard error goes: this process's own (not a replaced one)."""
    return sys.__stderr__ if sys.__stderr__ is not None else sys.stderr


async def list_tools(server: McpServer) -> list[Tool]:
    """Start ``server``, list its tools, stop it (``workload mcp tools``).

    Raises:
        WorkerConfigError: the server did not start or did not list its tools.
    """
    started = False
    try:
        with anyio.fail_after(START_SECONDS):
            async with server.client() as client:
                started = True
                return await _all_tools(client)
    except Exception as exc:  # OSError (no such program), a closed connection, an HTTP error
        raise _not_started(server, exc, listed=started) from exc


def _not_started(server: McpServer, exc: BaseException, *, listed: bool) -> WorkerConfigError:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:  # a transport's task group
        exc = exc.exceptions[0]
    what = "did not list its tools" if listed else "did not start"
    if isinstance(exc, TimeoutError):
        return WorkerConfigError(f"{server.describe()} {what} within {START_SECONDS:g} s")
    why = server.scrub(str(exc)) or type(exc).__name__
    return WorkerConfigError(f"{server.describe()} {what}: {why}")


def _connection_lost(exc: BaseException) -> bool:
    """Whether a call's exception means the session is gone (else the server refused it)."""
    from mcp import MCPError  # noqa: PLC0415 - the optional extra
    from mcp.types import CONNECTION_CLOSED  # noqa: PLC0415

    if isinstance(exc, MCPError):
        return exc.error.code == CONNECTION_CLOSED
    # The client refused what the server answered (structured content that breaks the tool's
    # output schema, a result of the wrong shape): the server is there, the call failed.
    return not isinstance(exc, RuntimeError | ValueError)


class _Session:
    """One server's session, held open by a task of its own until :meth:`close`.

    The transport's own tasks (the stdio pipes, the HTTP streams) live in that task: if they
    fail, the failure ends this session (the server is lost), not the worker's serving task.
    """

    def __init__(self, server: McpServer, on_lost: Callable[[McpServer], None]) -> None:
        self.server = server
        self.client: Client | None = None
        self.tools: list[Tool] = []
        self.failed: WorkerConfigError | None = None
        self._on_lost = on_lost
        self._closing = anyio.Event()
        self._starting = anyio.CancelScope()
        self.aborted = False

    async def hold(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Start the server and list its tools, report that, then hold the session.

        Starting gets :data:`START_SECONDS`, and ends at once on :meth:`abort_start`.
        """
        ready = False
        started = False
        try:
            with self._starting as starting:
                starting.deadline = anyio.current_time() + START_SECONDS
                async with self.server.client() as client:
                    started = True
                    self.tools = await _all_tools(client)
                    self.client = client
                    ready = True
                    starting.deadline = math.inf
                    task_status.started()
                    await self._closing.wait()
            if not ready:  # the deadline passed, or the worker stopped while the server started
                error = TimeoutError() if not self.aborted else RuntimeError("the worker stopped")
                self.failed = _not_started(self.server, error, listed=started)
                task_status.started()
        except Exception as exc:
            if not ready:
                self.failed = _not_started(self.server, exc, listed=started)
                task_status.started()
            elif not self._closing.is_set():
                logger.exception("%s: session ended", self.server.describe())
                self._on_lost(self.server)

    def abort_start(self) -> None:
        """Give up starting the server (the worker stops); a session already open is kept."""
        if self.client is None:
            self.aborted = True
            self._starting.cancel()

    def close(self) -> None:
        """End the session (its task closes the client and stops a stdio server)."""
        self._closing.set()


class McpConnections:
    """The open sessions of a serving worker's MCP servers, and the actions of their tools.

    Opened on the ``AsyncExitStack`` of ``Worker.serve`` (closed with it, after the attempts);
    handlers call through the sessions from their own tasks.

    Args:
        servers: The servers to start.
        on_lost: Called (in the event loop) with a server whose connection was lost.
    """

    def __init__(self, servers: Sequence[McpServer], on_lost: Callable[[McpServer], None]) -> None:
        self._servers = list(servers)
        self._on_lost = on_lost
        self._sessions: list[_Session] = []
        self.lost: McpServer | None = None
        self.aborted = False

    def abort_start(self) -> None:
        """The worker stops: give up starting servers (in the loop; :meth:`open` then fails)."""
        self.aborted = True
        for session in self._sessions:
            session.abort_start()

    async def start(
        self, declared: Mapping[str, Action], stack: contextlib.AsyncExitStack
    ) -> dict[str, Action] | WorkerConfigError:
        """Start the servers (closed with ``stack``): their tools' actions, or why not.

        Args:
            declared: The actions the worker declares already (none may be an MCP tool's).
            stack: What closes the sessions (the worker's, when it stops).
        """
        actions = await self.open(stack)
        if isinstance(actions, WorkerConfigError):
            return actions
        clash = sorted(set(actions) & set(declared))
        if clash:
            return WorkerConfigError(f"actions declared twice: {', '.join(clash)}")
        if len(actions) + len(declared) > MAX_ACTIONS:
            return WorkerConfigError(f"a worker declares at most {MAX_ACTIONS} actions")
        if not actions and not declared:
            return WorkerConfigError("the MCP servers offer no tool an action can carry")
        return actions

    async def open(self, stack: contextlib.AsyncExitStack) -> dict[str, Action] | WorkerConfigError:
        """Start every server, list its tools: the actions (closed with ``stack``).

        Returns the error of a server that did not start or list its tools instead (raised
        inside the sessions' task group, it would come out in an exception group).
        """
        holders = await stack.enter_async_context(anyio.create_task_group())
        sessions = self._sessions

        def close_all() -> None:
            for session in sessions:
                session.close()

        stack.callback(close_all)  # before the task group waits for the sessions' tasks
        actions: dict[str, Action] = {}
        for server in self._servers:
            session = _Session(server, self._lost)
            sessions.append(session)
            if self.aborted:
                session.abort_start()
            await holders.start(session.hold)
            if session.failed is not None:
                return session.failed
            served = []
            for tool in session.tools:
                action = action_of(server.name, tool.name)
                if action is None:
                    logger.warning(
                        "%s: tool %r left out: no action name can carry it",
                        server.describe(),
                        tool.name,
                    )
                    continue
                actions[action] = Action(action, self._handler(session, tool.name), True)
                served.append(tool.name)
            logger.info(
                "%s: serving %d tool(s): %s", server.describe(), len(served), ", ".join(served)
            )
        return actions

    def _handler(self, session: _Session, tool: str) -> Callable[[Context, dict[str, Any]], Any]:
        server = session.server

        async def call(ctx: Context, arguments: dict[str, Any]) -> dict[str, Any]:
            client = session.client
            if self.lost is not None or client is None:
                lost = self.lost or server
                raise McpServerLost(f"{lost.describe()}: connection lost")
            try:
                result = await client.call_tool(tool, arguments)
            except Exception as exc:
                if _connection_lost(exc):
                    self._lost(server)
                    why = server.scrub(str(exc))
                    raise McpServerLost(f"{server.describe()}: connection lost ({why})") from exc
                why = server.scrub(str(exc))
                raise NonRetryableError(f"{server.describe()}: {why}", code=MCP_ERROR) from exc
            return output_of(result)

        return call

    def _lost(self, server: McpServer) -> None:
        if self.lost is None:
            self.lost = server
            logger.error("%s: connection lost; the worker stops (ADR 0029)", server.describe())
            self._on_lost(server)
