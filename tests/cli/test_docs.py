"""The examples of docs/cli.md and docs/sdk.md run as written, against a live service.

They run as a reader runs them: in a shell or a Python process of their own, so the service is
the real one on a loopback port (``real_http_only``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins.live_api import OPERATOR_TOKEN, LiveApi

DOCS = Path(__file__).resolve().parents[2] / "docs"
pytestmark = pytest.mark.real_http_only


def blocks(name: str, language: str) -> list[str]:
    text = (DOCS / name).read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.S | re.M)


def test_cli_md_examples_run(live_api: LiveApi, tmp_path: Path) -> None:
    examples = blocks("cli.md", "bash")
    assert len(examples) >= 10
    # One script, so that variables and files carry from one block to the next, as in a shell.
    script = "set -euo pipefail\n" + "\n".join(
        f"echo '--- example {i + 1}' >&2\n{block}" for i, block in enumerate(examples)
    )
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    scripts = Path(sys.executable).parent  # the environment's `workload` and `python`
    env = {
        "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
        "WORKLOAD_URL": live_api.base_url,
        "WORKLOAD_TOKEN": OPERATOR_TOKEN,
        "WORKLOAD_DATA_DIR": str(data_dir),
    }
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    transcript = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, transcript
    assert result.stderr.count("--- example") == len(examples), transcript
    out = result.stdout
    assert "exit code 7" in out  # the stale --if-revision and the missing run
    assert "exit code 11" in out  # the canceled run
    assert "runs, " in out
    assert out.rstrip().endswith("succeeded")
    assert "complete -o default -F _workload_completion workload" in out
    assert re.search(r"^succeeded \['succeeded', 'succeeded'\] \d+ events$", out, re.M)
    assert "request_id: " in result.stderr
    assert "\x1b[" not in out  # not a terminal: plain text


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
