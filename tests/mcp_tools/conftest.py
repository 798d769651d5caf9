"""Fixtures of the MCP tests: the fake MCP server of ``tests/fakes`` over stdio and over HTTP.

The worker SDK's fixtures (the fake control plane, workers wired to it) are those of
``tests/worker``; these tests need the ``mcp`` package besides (``workload-worker[mcp]``).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.mcp_server import recorded_calls
from tests.waiting import wait_until
from tests.worker.conftest import fake, make_worker

__all__ = ["McpFake", "fake", "make_worker"]

SCRIPT = Path(__file__).resolve().parents[1] / "fakes" / "mcp_server.py"


@dataclass
class McpFake:
    """Where the fake MCP server records its calls, and how to start it."""

    record: Path
    url: str | None = None

    @property
    def command(self) -> list[str]:
        """The stdio server's command (program and arguments)."""
        return [sys.executable, str(SCRIPT), "stdio", str(self.record)]

    @property
    def command_line(self) -> str:
        """The stdio command as ``--mcp NAME=COMMAND`` takes it (one shell-quoted string)."""
        return shlex.join(self.command)

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        """The calls recorded, oldest first (of ``tool`` only, if given)."""
        return [c for c in recorded_calls(self.record) if tool is None or c["tool"] == tool]

    def kill_servers(self) -> None:
        """SIGKILL every server process that recorded a call and is still alive."""
        for pid in {c["pid"] for c in self.calls()}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def free_port() -> int:
    """An ephemeral port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def mcp_fake(tmp_path: Path) -> Iterator[McpFake]:
    """The fake MCP server over stdio (each worker starts its own process)."""
    record = tmp_path / "mcp"
    record.mkdir()
    found = McpFake(record)
    try:
        yield found
    finally:
        found.kill_servers()


@pytest.fixture
def mcp_http(tmp_path: Path) -> Iterator[McpFake]:
    """The fake MCP server over streamable HTTP on 127.0.0.1, a process of its own."""
    record = tmp_path / "mcp-http"
    record.mkdir()
    port = free_port()
    with (tmp_path / "mcp-http.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, str(SCRIPT), "http", str(record), str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(
            lambda: _accepts(port) or process.poll() is not None,
            timeout=30,
            message="the MCP server listens",
        )
        assert process.poll() is None, (tmp_path / "mcp-http.log").read_text()
        yield McpFake(record, url=f"http://127.0.0.1:{port}/mcp")
    finally:
        process.kill()
        process.wait(timeout=30)
