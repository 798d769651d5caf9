"""``worker.mcp``: an MCP server's tools served as actions ``mcp.NAME.TOOL`` (ADR 0029).

A real MCP server (``tests/fakes/mcp_server.py``, the ``mcp`` package's server side) over stdio
and over streamable HTTP on 127.0.0.1; the control plane is the fake of ``tests/worker``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.fakes.mcp_server import LIE
from tests.mcp_tools.conftest import McpFake, free_port
from tests.worker.conftest import MakeWorker, eventually, serving
from tests.worker.fake_server import FakeControlPlane
from workload_worker import MCP_TOOL_ERROR, McpServerLost, Worker, WorkerConfigError, mcp_tools

pytestmark = pytest.mark.anyio

SERVED = ["mcp.fake.big", "mcp.fake.echo", "mcp.fake.fail", "mcp.fake.hang"]


async def _serve_until_lost(worker: Worker, errors: list[BaseException]) -> None:
    try:
        await worker.serve()
    except McpServerLost as exc:
        errors.append(exc)


def _check_echo(output: dict[str, Any] | None, text: str) -> None:
    assert output is not None
    assert output["structured"] == {"text": text, "length": len(text)}
    assert output["is_error"] is False
    (block,) = output["content"]
    assert block["type"] == "text"
    assert json.loads(block["text"]) == {"text": text, "length": len(text)}


async def test_stdio_tools_are_actions_whose_calls_complete_or_fail(
    fake: FakeControlPlane,
    make_worker: MakeWorker,
    mcp_fake: McpFake,
    caplog: pytest.LogCaptureFixture,
) -> None:
    worker = make_worker()
    worker.mcp("fake", command=mcp_fake.command)
    assert worker.actions == []  # the tools are listed when serving starts
    echo = fake.add("mcp.fake.echo", {"text": "héllo"}, kind="tool_call", tool_call_id="c1")
    fail = fake.add("mcp.fake.fail", {"reason": "no such city"})
    big = fake.add("mcp.fake.big", {"size": 300_000})
    with caplog.at_level(logging.WARNING, logger="workload.worker"):
        async with serving(worker):
            await eventually(lambda: worker.actions == SERVED, within=60)  # "bad name!" is left out
            done = (echo, fail, big)
            await eventually(lambda: all(fake.recorded(a.attempt_id) for a in done))
    assert worker.actions == []  # closed with the worker
    assert fake.claims[0]["actions"] == SERVED
    assert "'bad name!' left out" in caplog.text
    assert echo.status == "succeeded"
    _check_echo(echo.output, "héllo")
    assert (fail.status, fail.error) == (
        "failed",
        {
            "code": MCP_TOOL_ERROR,
            "message": "Error executing tool fail: no such city",
            "retryable": False,
        },
    )
    assert big.status == "succeeded"
    assert big.output is not None
    assert big.output["structured"] is None
    assert big.output["content"] == [{"type": "text", "text": "x" * 300_000}]
    # Each call reached the server exactly once, with the arguments as given (the worker runs
    # the three attempts at once, so they reach it in any order).
    assert sorted((c["tool"], c["arguments"]) for c in mcp_fake.calls()) == [
        ("big", {"size": 300_000}),
        ("echo", {"text": "héllo"}),
        ("fail", {"reason": "no such city"}),
    ]


async def test_streamable_http_tools_are_served_the_same_way(
    fake: FakeControlPlane, make_worker: MakeWorker, mcp_http: McpFake
) -> None:
    assert mcp_http.url is not None
    worker = make_worker()
    worker.mcp("fake", url=mcp_http.url)
    echo = fake.add("mcp.fake.echo", {"text": "over http"})
    fail = fake.add("mcp.fake.fail", {"reason": "refused"})
    async with serving(worker):
        await eventually(lambda: worker.actions == SERVED, within=60)
        await eventually(lambda: fake.recorded(echo.attempt_id) and fake.recorded(fail.attempt_id))
    _check_echo(echo.output, "over http")
    assert fail.error == {
        "code": MCP_TOOL_ERROR,
        "message": "Error executing tool fail: refused",
        "retryable": False,
    }
    assert len(mcp_http.calls("echo")) == 1


async def test_a_hanging_tool_is_cut_off_at_timeout_and_the_session_goes_on(
    fake: FakeControlPlane, make_worker: MakeWorker, mcp_fake: McpFake
) -> None:
    worker = make_worker()
    worker.mcp("fake", command=mcp_fake.command)
    hang = fake.add("mcp.fake.hang", timeout=2, heartbeat_timeout=60)
    async with serving(worker):
        await eventually(
            lambda: mcp_fake.calls("hang"), within=60, message="the call reached the server"
        )
        await eventually(lambda: worker.in_flight == 0, message="cut off at timeout_at")
        # The server times the attempt out; the worker says nothing. The session still works.
        echo = fake.add("mcp.fake.echo", {"text": "after"})
        await eventually(lambda: fake.recorded(echo.attempt_id))
    assert fake.reports_of(hang.attempt_id) == []
    _check_echo(echo.output, "after")
    assert [c["tool"] for c in mcp_fake.calls()] == ["hang", "echo"]


async def test_a_hanging_tool_is_cut_off_when_the_lease_is_lost(
    fake: FakeControlPlane, make_worker: MakeWorker, mcp_fake: McpFake
) -> None:
    worker = make_worker()
    worker.mcp("fake", command=mcp_fake.command)
    hang = fake.add("mcp.fake.hang", heartbeat_timeout=0.6)
    async with serving(worker):
        await eventually(
            lambda: mcp_fake.calls("hang"), within=60, message="the call reached the server"
        )
        fake.cancel(hang.attempt_id)  # the next heartbeat answers 409 lease_lost
        await eventually(lambda: worker.in_flight == 0, message="the handler was cancelled")
    assert fake.reports_of(hang.attempt_id) == []


async def test_a_server_that_dies_fails_its_calls_retryable_and_stops_the_worker(
    fake: FakeControlPlane, make_worker: MakeWorker, mcp_fake: McpFake
) -> None:
    worker = make_worker()
    worker.mcp("fake", command=mcp_fake.command)
    hang = fake.add("mcp.fake.hang", heartbeat_timeout=60)
    errors: list[BaseException] = []
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_serve_until_lost, worker, errors)
        (call,) = await eventually(
            lambda: mcp_fake.calls("hang"), within=60, message="the call started"
        )
        os.kill(call["pid"], signal.SIGKILL)
        with anyio.fail_after(30):
            await eventually(lambda: errors, within=30, message="the worker stopped")
    assert hang.status == "failed"
    assert hang.error is not None
    assert (hang.error["code"], hang.error["retryable"]) == ("mcp_unavailable", True)
    assert "connection lost" in str(errors[0])
    assert not worker.is_serving


async def test_an_answer_the_client_refuses_fails_the_call_and_keeps_the_server(
    fake: FakeControlPlane, make_worker: MakeWorker, mcp_fake: McpFake
) -> None:
    # The server answers, but with structured content its own output schema refuses: the
    # client raises, the call fails not retryable (another worker would get the same answer),
    # and the session — still open — serves the next call.
    worker = make_worker(concurrency=1)
    worker.mcp("fake", command=mcp_fake.command)
    lie = fake.add("mcp.fake.echo", {"text": LIE})
    async with serving(worker):
        await eventually(lambda: fake.recorded(lie.attempt_id), within=60)
        after = fake.add("mcp.fake.echo", {"text": "still there"})
        await eventually(lambda: fake.recorded(after.attempt_id), within=30)
        assert worker.is_serving
    assert lie.status == "failed"
    assert lie.error is not None
    assert (lie.error["code"], lie.error["retryable"]) == ("mcp_error", False)
    assert "Invalid structured content returned by tool echo" in lie.error["message"]
    assert after.status == "succeeded"
    _check_echo(after.output, "still there")


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("", {"command": ["x"]}, "does not match"),
        ("a.b", {"command": ["x"]}, "does not match"),
        ("has space", {"command": ["x"]}, "does not match"),
        ("x" * 33, {"command": ["x"]}, "does not match"),
        ("é", {"command": ["x"]}, "does not match"),
        ("ok", {}, "not both"),
        ("ok", {"command": ["x"], "url": "http://127.0.0.1/mcp"}, "not both"),
        ("ok", {"command": []}, "non-empty list"),
        ("ok", {"command": "python server.py"}, "non-empty list"),
        ("ok", {"command": ["python", 3]}, "non-empty list"),
        ("ok", {"command": [""]}, "program is empty"),
        ("ok", {"url": "ftp://127.0.0.1/mcp"}, "http(s) URL"),
        ("ok", {"url": "http://"}, "http(s) URL"),
        ("ok", {"url": "http://a b/mcp"}, "http(s) URL"),
        ("ok", {"url": "http://127.0.0.1/mcp\n"}, "http(s) URL"),
        ("ok", {"url": b"http://127.0.0.1/mcp"}, "http(s) URL"),
    ],
)
def test_bad_servers_are_refused_when_declared(
    name: str, options: dict[str, Any], message: str
) -> None:
    worker = Worker()
    with pytest.raises(WorkerConfigError, match=re.escape(message)):
        worker.mcp(name, **options)


def test_a_server_name_is_declared_once() -> None:
    worker = Worker()
    worker.mcp("fake", command=["server"])
    with pytest.raises(WorkerConfigError, match="already declared"):
        worker.mcp("fake", url="http://127.0.0.1:1/mcp")


@pytest.mark.parametrize(
    ("command", "detail"),
    [
        (["/nonexistent/mcp-server"], "No such file"),
        ([sys.executable, "-c", "import sys; sys.exit('boom at start')"], "did not start"),
        ([sys.executable, "-c", "print('not json-rpc')"], "did not start"),
    ],
)
async def test_a_server_that_does_not_start_stops_the_worker_starting(
    make_worker: MakeWorker, command: list[str], detail: str
) -> None:
    worker = make_worker()
    worker.mcp("broken", command=command)
    with anyio.fail_after(60), pytest.raises(WorkerConfigError, match="did not start") as raised:
        await worker.serve()
    assert detail in str(raised.value)
    assert "MCP server 'broken'" in str(raised.value)
    assert not worker.is_serving
    assert worker.actions == []


HANGS = [sys.executable, "-c", "import time; time.sleep(600)"]
"""A stdio server that never answers (not even the protocol's initialize)."""


async def test_a_server_that_never_answers_stops_the_worker_starting_at_a_deadline(
    make_worker: MakeWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_tools, "START_SECONDS", 1.0)
    worker = make_worker()
    worker.mcp("mute", command=HANGS)
    with anyio.fail_after(30), pytest.raises(WorkerConfigError) as raised:
        await worker.serve()
    assert str(raised.value) == f"MCP server 'mute' ({sys.executable}) did not start within 1 s"
    assert not worker.is_serving


async def test_a_worker_stopped_while_its_server_starts_returns(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    # The default deadline (a minute) is not waited for: stopping gives up the start-up, and
    # serve() returns as after any stop, having claimed nothing.
    worker = make_worker()
    worker.mcp("mute", command=HANGS)

    @worker.action("own")
    async def own(ctx: Any, input: dict[str, Any]) -> dict[str, Any]:
        return {}

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(worker.serve)
            await eventually(lambda: worker.is_serving, message="serving began")
            await anyio.sleep(0.5)  # the server is being started
            worker.stop(now=True)
    assert not worker.is_serving
    assert fake.claims == []
    assert worker.actions == ["own"]


async def test_an_unreachable_url_stops_the_worker_starting(make_worker: MakeWorker) -> None:
    worker = make_worker()
    worker.mcp("gone", url=f"http://127.0.0.1:{free_port()}/mcp")
    with anyio.fail_after(60), pytest.raises(WorkerConfigError, match="did not start"):
        await worker.serve()


async def test_an_action_of_code_and_of_a_server_may_not_clash(
    make_worker: MakeWorker, mcp_fake: McpFake
) -> None:
    worker = make_worker()
    worker.mcp("fake", command=mcp_fake.command)

    @worker.action("mcp.fake.echo")
    async def echo(ctx: Any, input: dict[str, Any]) -> dict[str, Any]:
        return {}

    with anyio.fail_after(60), pytest.raises(WorkerConfigError, match="declared twice"):
        await worker.serve()
    assert worker.actions == ["mcp.fake.echo"]  # the code's own, as before


def test_the_mcp_example_of_worker_md_declares_its_servers() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "worker.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"^```python mcp\n(.*?)^```", text, re.S | re.M)
    namespace: dict[str, Any] = {}
    exec(compile(block, "docs/worker.md, the MCP example", "exec"), namespace)
    servers = namespace["tools_worker"].mcp_servers
    assert [(s.name, s.command, s.url) for s in servers] == [
        ("files", ("npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"), None),
        ("search", (), "http://127.0.0.1:8931/mcp"),
    ]
