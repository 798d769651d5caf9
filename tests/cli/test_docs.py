"""The examples of docs/cli.md, sdk.md, agents.md and approvals.md run as written, live.

They run as a reader runs them: in a shell or a Python process of their own, so the service is
the real one on a loopback port (``real_http_only``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, running_fake_openai
from tests.plugins.live_api import OPERATOR_TOKEN, WORKER_TOKEN, LiveApi, settings
from workload_api.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
pytestmark = pytest.mark.real_http_only
HOSTED_KEY = "sk-docs-hosted-Wq58RecognizableKey-3Lm"


@pytest.fixture
def local_model() -> Iterator[FakeOpenAI]:
    with running_fake_openai() as fake:
        yield fake


@pytest.fixture
def hosted_model() -> Iterator[FakeOpenAI]:
    with running_fake_openai() as fake:
        yield fake


@pytest.fixture
def api_settings(
    local_model: FakeOpenAI, hosted_model: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """agents.md's endpoints ``local`` and ``hosted``: two fake OpenAI-compatible servers."""
    monkeypatch.setenv("HOSTED_KEY", HOSTED_KEY)
    endpoints = {
        "local": {"provider": "openai", "base_url": local_model.base_url},
        "hosted": {
            "provider": "openai",
            "base_url": hosted_model.base_url,
            "api_key_env": "HOSTED_KEY",
        },
    }
    return settings(model_endpoints=json.dumps(endpoints))


def blocks(name: str, language: str) -> list[str]:
    text = (DOCS / name).read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.S | re.M)


def run_blocks(
    examples: list[str], live_api: LiveApi, tmp_path: Path, *, cwd: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``examples`` as one bash script, as a reader would, and check that all of it ran."""
    # One script, so that variables and files carry from one block to the next, as in a shell.
    script = "set -euo pipefail\n" + "\n".join(
        f"echo '--- example {i + 1}' >&2\n{block}" for i, block in enumerate(examples)
    )
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    scripts = Path(sys.executable).parent  # the environment's `workload` and `python`
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env={
            "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": str(tmp_path),
            "WORKLOAD_URL": live_api.base_url,
            "WORKLOAD_TOKEN": OPERATOR_TOKEN,
            "WORKLOAD_DATA_DIR": str(data_dir),
            **env,
        },
        capture_output=True,
        text=True,
        # cli.md alone runs ~70 commands, each a Python start-up: 75 s in CI, over 120 s on a
        # busy 2-core machine (its test's pytest timeout is raised to match).
        timeout=280,
        check=False,
    )
    transcript = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, transcript
    assert result.stderr.count("--- example") == len(examples), transcript
    return result


@pytest.mark.timeout(300)
def test_cli_md_examples_run(live_api: LiveApi, tmp_path: Path) -> None:
    examples = blocks("cli.md", "bash")
    assert len(examples) >= 10
    result = run_blocks(examples, live_api, tmp_path, cwd=tmp_path)
    out = result.stdout
    assert "exit code 7" in out  # the stale --if-revision and the missing run
    assert "exit code 11" in out  # the canceled run
    assert "runs, " in out
    assert out.rstrip().endswith("succeeded")
    assert "complete -o default -F _workload_completion workload" in out
    assert re.search(r"^succeeded \['succeeded', 'succeeded'\] \d+ events$", out, re.M)
    assert "request_id: " in result.stderr
    assert "\x1b[" not in out  # not a terminal: plain text
    # The agent: its steps (in-process tools here: no worker token), its usage, a bad task.
    assert re.search(r"^1\t3\ttool_call\tsucceeded\ttext_stats\t\t", out, re.M)
    assert re.search(r"^usage\t\{\"model_calls\":2,\"tool_calls\":2,", out, re.M)
    assert "both tools run in-process" in result.stderr
    assert "has no task 'no-such-task' (404 task_not_found)" in result.stderr
    # Approvals and drafts: no terminal and no --yes refuses; --yes decides what was shown.
    assert "exit code 2" in out
    assert "nobody can confirm: standard input is not a terminal" in result.stderr
    assert "approved: deploy runs once, with exactly these arguments" in result.stderr
    assert "  fetch      mock\n  summarize  mock  depends on fetch\n" in out
    assert re.search(r"^latest_version\t1$", out, re.M)
    # Apply by content: a file, then a module; a file that is not a definition exits 2.
    assert "created etl version 1\n" in out
    assert '[\n  {\n    "workflow_id": "etl",\n    "version": 1,\n    "created": false' in out
    assert "created nightly version 1\nunchanged nightly version 1\n" in out
    assert "broken.json must hold a JSON object" in result.stderr
    # `runs start --wait` ends with the run's output, one line of JSON.
    assert '\n{"count": {"n": 3}, "summarize": {"words": 42}}\n' in out


def test_approvals_md_examples_run(live_api: LiveApi, tmp_path: Path) -> None:
    examples = blocks("approvals.md", "bash")
    assert len(examples) == 3
    result = run_blocks(examples, live_api, tmp_path, cwd=tmp_path)
    out, err = result.stdout, result.stderr
    assert re.search(r"^tool\tdeploy$", out, re.M)
    assert re.search(r"^status\tpending$", out, re.M)
    assert "exit code 2" in out  # no terminal, no --yes
    assert "nobody can confirm" in err
    # Staging approved and run once; production rejected, and the model told why.
    assert 'approved\tdeploy\t{"output":{"env":"staging"}}' in out
    assert 'rejected\tdeploy\t{"output":{"env":"prod"}}' in out
    assert 'tool_call\tdeploy\t{"env":"staging"}' in out
    assert re.search(
        r"^tool_call\tdeploy\terror: rejected by operator:\w+: not on a Friday$", out, re.M
    )
    # The draft: the first answer's problem, the DAG in topological order, version 1.
    assert "problems (1)\n  answer 1: /tasks/0/depends_on/0: a task cannot depend on itself" in out
    assert (
        "dag (topological order)\n"
        "  fetch      mock\n"
        "  summarize  mock  depends on fetch\n"
        "  mail       mock  depends on summarize\n"
    ) in out
    assert re.search(r"^latest_version\t1$", out, re.M)
    assert "exit code 7" in out  # rejecting the approved draft
    assert "is approved (409 draft_not_ready)" in err


def test_agents_md_examples_run(
    live_api: LiveApi, example_worker: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    examples = blocks("agents.md", "bash")[:2]  # the others: the endpoints' test below
    # From the repository's root (the example files; the demo starts the example worker too).
    result = run_blocks(examples, live_api, tmp_path, cwd=ROOT, WORKLOAD_WORKER_TOKEN=WORKER_TOKEN)
    out, err = result.stdout, result.stderr
    assert "started the example worker (actions: analyze_text, " in err
    assert "answer (checked against output_schema): " in err
    # The example workflow, created by hand: its remote tool call ran on a worker.
    rows = [line.split("\t") for line in out.splitlines() if line.startswith("1\t")]
    remote = [row for row in rows if row[2:5] == ["tool_call", "succeeded", "text_stats"]]
    assert len(remote) == 2  # the demo's and the example's
    assert all(row[5] for row in remote), rows  # a worker id
    assert len(re.findall(r"^\S+ run \S+ succeeded in ", out, re.M)) == 2  # demo, watch
    assert re.search(r"^status\tsucceeded$", out, re.M)
    assert re.search(r"^usage\t\{\"model_calls\":2,\"tool_calls\":2,", out, re.M)
    assert example_worker.poll() is None


def test_agents_md_endpoints_example_runs(
    live_api: LiveApi, local_model: FakeOpenAI, hosted_model: FakeOpenAI, tmp_path: Path
) -> None:
    examples = blocks("agents.md", "bash")[2:]
    assert len(examples) == 2
    local_model.queue(
        {
            "content": "A lease lets one worker hold an attempt for a while.",
            "usage": {"prompt_tokens": 11, "completion_tokens": 13},
        }
    )
    hosted_model.queue(
        {"content": '{"correct": true}', "usage": {"prompt_tokens": 31, "completion_tokens": 5}}
    )
    result = run_blocks(examples, live_api, tmp_path, cwd=tmp_path)
    out, err = result.stdout, result.stderr
    assert len(re.findall(r"^\S+ run \S+ succeeded in ", out, re.M)) == 1
    usage = '{"model_calls":2,"tool_calls":0,"input_tokens":42,"output_tokens":18}'
    assert re.search(rf"^usage\t{re.escape(usage)}$", out, re.M), out
    assert re.search(r"^1\t1\tmodel_call\tsucceeded\thosted:gpt-4o-mini\t", out, re.M), out
    assert "exit code 7" in out
    assert "no model endpoint named 'elsewhere' is configured on this server" in err
    [draft] = [r.json() for r in local_model.chat_requests]
    assert (draft["model"], draft["temperature"], draft["max_tokens"]) == (
        "llama3.2",
        0.7,
        200,
    )
    assert "response_format" not in draft
    [check] = hosted_model.chat_requests
    body = check.json()
    assert (body["model"], body["temperature"]) == ("gpt-4o-mini", 0)
    assert body["response_format"]["json_schema"]["strict"] is True
    assert check.headers["authorization"] == f"Bearer {HOSTED_KEY}"
    assert "A lease lets one worker" in body["messages"][-1]["content"]
    assert HOSTED_KEY not in out + err


def test_sdk_md_examples_run(
    live_api: LiveApi, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    examples = blocks("sdk.md", "python")
    assert len(examples) >= 8
    monkeypatch.setenv("WORKLOAD_URL", live_api.base_url)
    monkeypatch.setenv("WORKLOAD_TOKEN", OPERATOR_TOKEN)
    namespace: dict[str, object] = {"__name__": "sdk_md"}
    for i, block in enumerate(examples, start=1):
        exec(compile(block, f"docs/sdk.md example {i}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "404 run_not_found" in out
    assert "/tasks/0/depends_on" in out
    assert "still " in out
    assert "succeeded" in out
    assert "unavailable test-1" in out
    assert "1 1 model_call succeeded" in out
    assert "A lease lets one worker hold an attempt. · 2 model calls" in out
    assert "deploy {'output': {'env': 'prod'}} pending" in out
    assert "approval_changed" in out
    assert "approved ok for prod" in out
    assert "succeeded 1" in out
    assert "draft approved as sdk-nightly version 1" in out
    # Apply, per-call options on the caller's own httpx client, results.
    assert "sdk-hello 1 True" in out
    assert "run_not_found docs-1" in out
    assert "['/api/v1/runs/no-such-run']" in out
    assert "{'clean': {'words': 42}}" in out
    assert "{'count': {'n': 3}, 'words': {'w': 9}}" in out
    assert "result: True failed" in out


def test_authoring_md_examples_run(live_api: LiveApi, tmp_path: Path) -> None:
    module, sdk = blocks("authoring.md", "python")
    (tmp_path / "pipelines.py").write_text(module, encoding="utf-8")
    examples = blocks("authoring.md", "bash")
    assert len(examples) == 1
    env = {"WORKLOAD_WORKER_TOKEN": WORKER_TOKEN, "PYTHONPATH": str(tmp_path)}
    result = run_blocks(examples, live_api, tmp_path, cwd=tmp_path, **env)
    out = result.stdout
    assert "created etl version 1\nunchanged etl version 1\n" in out
    assert "{'ok': True, 'reasons': ['short and clear']}" in out
    # The SDK's half, with a worker serving meanwhile (the shell's stopped with its block).
    scripts = Path(sys.executable).parent
    environment = {
        "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
        "WORKLOAD_URL": live_api.base_url,
        "WORKLOAD_TOKEN": OPERATOR_TOKEN,
        **env,
    }
    with (tmp_path / "worker.log").open("wb") as log:
        worker = subprocess.Popen(
            [str(scripts / "workload"), "worker", "pipelines:worker"],
            cwd=tmp_path,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        done = subprocess.run(
            [sys.executable, "-c", sdk],
            cwd=tmp_path,
            env=environment,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    finally:
        worker.terminate()
        assert worker.wait(timeout=40) == 0, (tmp_path / "worker.log").read_text()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "1 unchanged"
    assert "'structured': {'ok': True, 'reasons': ['short and clear']}" in lines[1]
