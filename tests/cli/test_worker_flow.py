"""README's three commands: a service, `workload worker examples.textstats:worker`, a run.

The worker is a real process of the `workload` command, over real HTTP (``real_http_only``),
doing real local work: it reads this repository's docs and writes a report.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.plugins.live_api import WORKER_TOKEN, LiveApi

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.real_http_only


@pytest.fixture
def worker(live_api: LiveApi, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    workload = shutil.which("workload", path=str(Path(sys.executable).parent))
    assert workload is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
    env.update({"WORKLOAD_URL": live_api.base_url, "WORKLOAD_WORKER_TOKEN": WORKER_TOKEN})
    with (tmp_path / "worker.log").open("wb") as log:
        process = subprocess.Popen(
            [workload, "worker", "examples.textstats:worker", "--concurrency", "2"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield process
    finally:
        process.terminate()  # SIGTERM: a graceful stop
        assert process.wait(timeout=40) == 0, (tmp_path / "worker.log").read_text()


def test_a_worker_runs_the_example_pipeline(
    cli: Cli, worker: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    created = cli("workflows", "create", str(ROOT / "examples" / "textstats_workflow.json"))
    assert created.exit_code == 0, created.output
    reports = tmp_path / "reports"
    run_input = {"directory": str(ROOT / "docs"), "output_dir": str(reports)}
    started = cli(
        "runs", "start", "textstats", "--input", json.dumps(run_input), "--wait", "-o", "json"
    )
    assert started.exit_code == 0, started.output
    assert json.loads(started.stdout)["status"] == "succeeded"
    (report,) = reports.iterdir()
    assert "architecture.md" in report.read_text(encoding="utf-8")
    listed = cli("workers", "list", "-o", "json")
    assert listed.exit_code == 0, listed.output
    (info,) = json.loads(listed.stdout)
    assert (info["status"], info["actions"]) == (
        "active",
        ["analyze_text", "list_files", "text_stats", "write_report"],
    )
    queues = cli("queues", "list", "-o", "json")
    assert json.loads(queues.stdout) == [
        {"queue": "default", "queued": 0, "running": 0, "oldest_queued_age_seconds": None}
    ]
    assert worker.poll() is None, "the worker is still serving"
