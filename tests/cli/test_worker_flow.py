"""README's three commands: a service, a worker (the shipped example), a run.

The worker, `workload worker workload_worker.examples.textstats:worker`, is a real process of the
`workload` command, over real HTTP (``real_http_only``), doing real local work: it reads this
repository's docs and writes a report.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli.conftest import Cli

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.real_http_only


def test_a_worker_runs_the_example_pipeline(
    cli: Cli, example_worker: subprocess.Popen[bytes], tmp_path: Path
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
    assert example_worker.poll() is None, "the worker is still serving"
