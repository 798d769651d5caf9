"""``workload mcp tools NAME=COMMAND`` and ``workload worker --mcp NAME=COMMAND`` (ADR 0029).

``mcp tools`` runs in-process (Typer's runner) against the fake MCP server over stdio and over
HTTP; ``workload worker --mcp`` runs in-process against the worker tests' fake control plane,
and as a process of its own where it must exit (a server that does not start).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from tests.mcp_tools.conftest import McpFake, free_port
from tests.waiting import wait_until
from tests.worker.fake_server import BASE_URL, WORKER_TOKEN, FakeControlPlane
from workload_cli._exit import ExitCode
from workload_cli.main import app
from workload_worker import mcp_tools

ECHO_SCHEMA = {
    "type": "object",
    "properties": {"text": {"title": "Text", "type": "string"}},
    "required": ["text"],
}


def run(*args: str, obj: Any = None, env: Mapping[str, str] | None = None) -> Result:
    clean = {k: None for k in os.environ if k.startswith("WORKLOAD_")}
    return CliRunner().invoke(app, list(args), obj=obj, env={**clean, **(env or {})})


def _entries(result: Result) -> dict[str, dict[str, Any]]:
    assert result.exit_code == 0, result.output
    listed: list[dict[str, Any]] = json.loads(result.stdout)
    return {entry["name"]: entry for entry in listed}


def test_mcp_tools_prints_the_agent_tool_entries_of_a_stdio_server(mcp_fake: McpFake) -> None:
    result = run("mcp", "tools", f"fake={mcp_fake.command_line}")
    entries = _entries(result)
    assert sorted(entries) == ["big", "echo", "fail", "hang"]
    echo = entries["echo"]
    assert (echo["action"], echo["description"]) == (
        "mcp.fake.echo",
        "Echo the text back, with its length.",
    )
    assert {k: echo["parameters"][k] for k in ECHO_SCHEMA} == ECHO_SCHEMA
    assert entries["hang"]["parameters"]["type"] == "object"
    assert "left out: tool 'bad name!'" in result.stderr
    assert mcp_fake.calls() == []  # listing calls no tool


def test_mcp_tools_reads_a_streamable_http_server(mcp_http: McpFake) -> None:
    assert mcp_http.url is not None
    entries = _entries(run("mcp", "tools", f"docs={mcp_http.url}"))
    assert entries["fail"]["action"] == "mcp.docs.fail"
    assert sorted(entries) == ["big", "echo", "fail", "hang"]


BAD_VALUES = [
    ("no-equals", "fake", "expected NAME=COMMAND"),
    ("empty-name", "=python server.py", "the NAME before '=' is empty"),
    ("dotted-name", "a.b=python server.py", "does not match"),
    ("spaced-name", "a b=python server.py", "does not match"),
    ("long-name", "x" * 33 + "=python server.py", "does not match"),
    ("empty-command", "fake=", "the COMMAND after '=' is empty"),
    ("blank-command", "fake=   ", "the COMMAND after '=' is empty"),
    ("unclosed-quote", "fake=python 'server.py", "cannot be split"),
    ("oversized", "fake=" + "x" * 9000, "longer than 8192"),
]


@pytest.mark.parametrize(
    ("value", "message"), [c[1:] for c in BAD_VALUES], ids=[c[0] for c in BAD_VALUES]
)
def test_a_malformed_value_is_a_usage_error(value: str, message: str) -> None:
    listed = run("mcp", "tools", value)
    assert listed.exit_code == ExitCode.USAGE, listed.output
    assert message in listed.stderr
    served = run("worker", "--mcp", value, "--url", BASE_URL, "--token", "t")
    assert served.exit_code == ExitCode.USAGE, served.output
    assert message in served.stderr


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("/nonexistent/mcp-server --stdio", "No such file"),
        (shlex.join([sys.executable, "-c", "import sys; sys.exit(3)"]), "did not start"),
    ],
)
def test_mcp_tools_with_a_server_that_does_not_start_exits_2(command: str, message: str) -> None:
    result = run("mcp", "tools", f"broken={command}")
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "MCP server 'broken'" in result.stderr
    assert message in result.stderr
    assert result.stdout == ""


def test_mcp_tools_with_an_unreachable_url_exits_2() -> None:
    result = run("mcp", "tools", f"gone=http://127.0.0.1:{free_port()}/mcp")
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "did not start" in result.stderr


def test_mcp_tools_with_a_server_that_never_answers_exits_2_at_a_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mcp_tools, "START_SECONDS", 1.0)
    mute = shlex.join([sys.executable, "-c", "import time; time.sleep(600)"])
    result = run("mcp", "tools", f"mute={mute}")
    assert result.exit_code == ExitCode.USAGE, result.output
    assert f"MCP server 'mute' ({sys.executable}) did not start within 1 s" in result.stderr
    assert result.stdout == ""


def test_workload_worker_needs_a_module_or_an_mcp_server() -> None:
    result = run("worker", "--url", BASE_URL, "--token", "t")
    assert result.exit_code == ExitCode.USAGE
    assert "give MODULE:ATTRIBUTE, --mcp NAME=COMMAND, or both" in result.stderr


def test_the_same_server_name_twice_is_a_usage_error() -> None:
    result = run("worker", "--mcp", "a=srv", "--mcp", "a=other", "--token", "t")
    assert result.exit_code == ExitCode.USAGE
    assert "MCP server 'a' is already declared" in result.stderr


def test_workload_worker_serves_a_modules_actions_and_an_mcp_servers_tools(
    mcp_fake: McpFake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"wk_{uuid.uuid4().hex[:10]}"
    source = """
        from workload_worker import Worker

        worker = Worker(worker_id="mcp-cli", wait_seconds=0.2, grace_seconds=5)

        @worker.action("own")
        def own(ctx, input):
            return {"own": True}
    """
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    fake = FakeControlPlane()
    echo = fake.add("mcp.fake.echo", {"text": "from the cli"})
    own = fake.add("own")
    results: list[Result] = []
    argv = ["worker", f"{name}:worker", "--mcp", f"fake={mcp_fake.command_line}"]
    argv += ["--url", BASE_URL, "--token", WORKER_TOKEN]
    thread = threading.Thread(target=lambda: results.append(run(*argv, obj=fake.transport)))
    thread.start()
    try:
        wait_until(lambda: echo.status == "succeeded" and own.status == "succeeded")
    finally:
        module = sys.modules.get(name)
        wait_until(lambda: (module is not None and module.worker.is_serving) or results)
        if module is not None:
            module.worker.stop()
        thread.join(30)
        sys.modules.pop(name, None)
    [result] = results
    assert result.exit_code == 0, result.output
    assert fake.claims[0]["actions"] == [
        "mcp.fake.big",
        "mcp.fake.echo",
        "mcp.fake.fail",
        "mcp.fake.hang",
        "own",
    ]
    assert echo.output is not None
    assert echo.output["structured"] == {"text": "from the cli", "length": 12}


def _workload() -> str:
    found = shutil.which("workload", path=str(Path(sys.executable).parent))
    assert found is not None
    return found


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("/nonexistent/mcp-server", "No such file"),
        (shlex.join([sys.executable, "-c", "import sys; sys.exit('boom at start')"]), "boom"),
    ],
)
def test_a_worker_whose_mcp_server_does_not_start_exits_2_with_its_error(
    command: str, message: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
    # Nothing listens there: the worker must stop before it claims anything.
    env.update({"WORKLOAD_URL": f"http://127.0.0.1:{free_port()}", "WORKLOAD_WORKER_TOKEN": "t"})
    done = subprocess.run(
        [_workload(), "worker", "--mcp", f"broken={command}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert "MCP server 'broken'" in done.stderr
    assert "did not start" in done.stderr
    assert message in done.stderr  # the command's own error, on the worker's standard error


def _running(marker: str) -> list[int]:
    """The pids of processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes()
            except OSError:  # gone meanwhile
                continue
            if marker.encode() in line:
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_while_an_mcp_server_starts_stops_the_worker_at_once(
    signum: signal.Signals,
) -> None:
    # ADR 0052: a stop gives the start-up up; the signals of `workload worker` are that stop
    # from its very start, not only once it serves (they waited out the 60 s deadline, exit 2).
    marker = f"mute-{uuid.uuid4().hex}"
    mute = shlex.join([sys.executable, "-c", f"import time; time.sleep(600)  # {marker}"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
    env.update({"WORKLOAD_URL": f"http://127.0.0.1:{free_port()}", "WORKLOAD_WORKER_TOKEN": "t"})
    worker = subprocess.Popen(
        [_workload(), "worker", "--mcp", f"mute={mute}"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # The server is the process holding the marker that is not the worker (its arguments
        # hold it too).
        server = wait_until(
            lambda: [p for p in _running(marker) if p != worker.pid],
            timeout=60,
            message="the MCP server is starting",
        )
        worker.send_signal(signum)
        _, stderr = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    assert worker.returncode == 0, stderr
    assert "did not start" not in stderr
    wait_until(
        lambda: not set(server) & set(_running(marker)),
        timeout=10,
        message="the MCP server is stopped",
    )
