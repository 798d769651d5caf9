"""An agent whose tools are MCP tools served by ``workload worker --mcp`` (SPEC §11, ADR 0029).

The service runs over real HTTP on PostgreSQL (``real_http_only``); each worker is a process of
the ``workload`` command serving the fake MCP server of ``tests/fakes`` (started by the worker,
over stdio), which records every call it executes. The agent's ``tools`` are what ``workload
mcp tools`` prints for that server; its model is the mock model, scripted to call them.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.mcp_tools.conftest import McpFake
from tests.plugins.live_api import WORKER_TOKEN, LiveApi
from tests.waiting import wait_until
from workload_cli.main import app

pytestmark = pytest.mark.real_http_only

V1 = "/api/v1"
_keys = itertools.count()


def idem() -> dict[str, str]:
    return {"Idempotency-Key": f"mcp-agents-{next(_keys)}"}


class Workers:
    """``workload worker --mcp fake=…`` processes, killed (by pid) at teardown if still alive."""

    def __init__(self, api: LiveApi, mcp: McpFake, directory: Path) -> None:
        self._api = api
        self._mcp = mcp
        self._directory = directory
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        workload = shutil.which("workload", path=str(Path(sys.executable).parent))
        assert workload is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
        env.update({"WORKLOAD_URL": self._api.base_url, "WORKLOAD_WORKER_TOKEN": WORKER_TOKEN})
        log = self._directory / f"worker-{len(self.started)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [workload, "worker", "--mcp", f"fake={self._mcp.command_line}"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.started.append(process)
        return process

    def log(self, index: int) -> str:
        return (self._directory / f"worker-{index}.log").read_text(errors="replace")

    def close(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=40)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)


@pytest.fixture
def workers(live_api: LiveApi, mcp_fake: McpFake, tmp_path: Path) -> Iterator[Workers]:
    found = Workers(live_api, mcp_fake, tmp_path)
    try:
        yield found
    finally:
        found.close()


def mcp_tools(mcp: McpFake) -> dict[str, dict[str, Any]]:
    """The entries ``workload mcp tools`` prints for the fake server, by name."""
    result = CliRunner().invoke(app, ["mcp", "tools", f"fake={mcp.command_line}"])
    assert result.exit_code == 0, result.output
    return {entry["name"]: entry for entry in json.loads(result.stdout)}


def start_agent(
    api: LiveApi,
    workflow_id: str,
    tools: list[dict[str, Any]],
    script: list[Any],
    **task: Any,
) -> str:
    spec = {"model": "mock", "prompt": "use the tools", "tools": tools, "script": script}
    agent = {"key": "agent", "action": "agent", "input": spec, **task}
    body = {"id": workflow_id, "tasks": [agent]}
    created = api.operator.post(f"{V1}/workflows", json=body, headers=idem())
    assert created.status_code == 201, created.text
    started = api.operator.post(f"{V1}/workflows/{workflow_id}/versions/1/runs", headers=idem())
    assert started.status_code == 202, started.text
    run_id: str = started.json()["run_id"]
    return run_id


def tool_steps(api: LiveApi, run_id: str) -> list[dict[str, Any]]:
    answer = api.viewer.get(f"{V1}/runs/{run_id}/tasks/agent/steps", params={"limit": 200})
    assert answer.status_code == 200, answer.text
    return [s for s in answer.json()["items"] if s["kind"] == "tool_call"]


def test_mcp_tools_are_claimed_journaled_and_executed_once(
    live_api: LiveApi, workers: Workers, mcp_fake: McpFake
) -> None:
    tools = mcp_tools(mcp_fake)
    worker = workers.start()
    script = [
        {
            "tool_calls": [
                {"name": "echo", "arguments": {"text": "hello"}},
                {"name": "fail", "arguments": {"reason": "no such city"}},
            ]
        },
        {"content": "done"},
    ]
    run_id = start_agent(live_api, "mcp-agent", [tools["echo"], tools["fail"]], script)
    run = live_api.wait_for_run(run_id, timeout=60)
    assert run["status"] == "succeeded", tool_steps(live_api, run_id)
    echo, fail = tool_steps(live_api, run_id)
    assert (echo["status"], echo["request"]["tool"]) == ("succeeded", "echo")
    output = echo["response"]["output"]
    assert output["structured"] == {"text": "hello", "length": 5}
    assert output["is_error"] is False
    assert json.loads(output["content"][0]["text"]) == output["structured"]
    # The MCP error reached the model as a tool error, with its code.
    assert fail["status"] == "failed"
    assert fail["response"]["code"] == "mcp_tool_error"
    told = "mcp_tool_error: Error executing tool fail: no such city"
    assert fail["response"]["error"] == told
    # Each call executed exactly once, with the arguments as given. The two calls of one turn
    # are two attempts, which the worker may run at once: the server may see either first.
    executed = sorted((c["tool"], json.dumps(c["arguments"])) for c in mcp_fake.calls())
    assert executed == [("echo", '{"text": "hello"}'), ("fail", '{"reason": "no such city"}')]
    # The worker declared the server's tools as actions (it claims tool calls of those).
    (seen,) = live_api.viewer.get(f"{V1}/workers").json()["items"]
    assert seen["actions"] == ["mcp.fake.big", "mcp.fake.echo", "mcp.fake.fail", "mcp.fake.hang"]
    assert worker.poll() is None, workers.log(0)


def test_an_mcp_tool_that_requires_approval_runs_exactly_the_approved_arguments(
    live_api: LiveApi, workers: Workers, mcp_fake: McpFake
) -> None:
    echo = {**mcp_tools(mcp_fake)["echo"], "requires_approval": True}
    workers.start()
    arguments = {"text": "deploy to prod"}
    script = [{"tool_calls": [{"name": "echo", "arguments": arguments}]}, {"content": "done"}]
    run_id = start_agent(live_api, "mcp-approve", [echo], script)

    def pending() -> dict[str, Any] | None:
        items = live_api.viewer.get(f"{V1}/approvals", params={"status": "pending"}).json()
        return items["items"][0] if items["items"] else None

    approval = wait_until(pending, message="the call waits for approval")
    assert (approval["tool"], approval["arguments"]) == ("echo", arguments)
    assert mcp_fake.calls() == []  # nothing runs before the decision
    decided = live_api.operator.post(
        f"{V1}/approvals/{approval['approval_id']}/decision",
        json={"decision": "approve", "arguments_digest": approval["arguments_digest"]},
        headers=idem(),
    )
    assert decided.status_code == 200, decided.text
    assert live_api.wait_for_run(run_id, timeout=60)["status"] == "succeeded"
    assert [(c["tool"], c["arguments"]) for c in mcp_fake.calls()] == [("echo", arguments)]
    (step,) = tool_steps(live_api, run_id)
    assert step["response"]["output"]["structured"] == {"text": "deploy to prod", "length": 14}


def test_a_worker_killed_mid_call_loses_its_lease_and_another_worker_serves_the_retry(
    live_api: LiveApi, workers: Workers, mcp_fake: McpFake
) -> None:
    """SIGKILL while the hanging tool runs: the lease expires, the model is told
    ``lease_expired``, and its next call of the tool is executed by another worker."""
    hang = mcp_tools(mcp_fake)["hang"]
    first = workers.start()
    script = [
        {"tool_calls": [{"name": "hang", "arguments": {}}]},
        {"tool_calls": [{"name": "hang", "arguments": {}}]},
        {"content": "done"},
    ]
    run_id = start_agent(live_api, "mcp-kill", [hang], script, heartbeat_timeout_seconds=2)
    (call,) = wait_until(lambda: mcp_fake.calls("hang"), timeout=60, message="the call ran")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):  # its MCP server, orphaned, may be gone
        os.kill(call["pid"], signal.SIGKILL)
    workers.start()
    assert live_api.wait_for_run(run_id, timeout=60)["status"] == "succeeded"
    lost, retried = tool_steps(live_api, run_id)
    assert (lost["status"], lost["response"]["code"]) == ("failed", "lease_expired")
    assert retried["status"] == "succeeded"
    (block,) = retried["response"]["output"]["content"]
    assert json.loads(block["text"]) == {"released": True}
    calls = mcp_fake.calls("hang")
    assert len(calls) == 2
    assert calls[0]["pid"] != calls[1]["pid"]  # two servers: one per worker
