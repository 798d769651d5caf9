"""CLI fixtures: a CLI runner, pointed at the live API (in-process by default, see live_api)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner, Result

from tests.plugins.live_api import OPERATOR_TOKEN, WORKER_TOKEN, LiveApi
from workload_cli.main import app

ROOT = Path(__file__).resolve().parents[2]

# Variables that change what the CLI does; unset unless a test sets them.
CLEAN_ENV: dict[str, str | None] = dict.fromkeys(
    (
        "WORKLOAD_URL",
        "WORKLOAD_TOKEN",
        "WORKLOAD_WORKER_TOKEN",
        "WORKLOAD_OUTPUT",
        "NO_COLOR",
        "FORCE_COLOR",
        "TTY_COMPATIBLE",
        "TTY_INTERACTIVE",
        "COLUMNS",
    )
)


@dataclass
class Cli:
    """Runs ``workload`` in-process (Typer's CliRunner) with a given environment."""

    env: dict[str, str | None]
    transport: httpx.BaseTransport | None = None
    """Where the SDK client sends (the in-process service); None: the network."""

    def __call__(
        self, *args: str, input: str | None = None, env: Mapping[str, str | None] | None = None
    ) -> Result:
        runner = CliRunner()
        return runner.invoke(
            app, list(args), input=input, env={**self.env, **(env or {})}, obj=self.transport
        )


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """An empty data directory: no development credentials file unless a test writes one."""
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def offline_cli(data_dir: Path) -> Cli:
    """The CLI with no server configured."""
    return Cli({**CLEAN_ENV, "WORKLOAD_DATA_DIR": str(data_dir)})


@pytest.fixture
def cli(live_api: LiveApi, offline_cli: Cli) -> Cli:
    """The CLI pointed at the live API with the operator token (through the environment)."""
    return Cli(
        {**offline_cli.env, "WORKLOAD_URL": live_api.base_url, "WORKLOAD_TOKEN": OPERATOR_TOKEN},
        live_api.transport,
    )


@pytest.fixture
def example_worker(live_api: LiveApi, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``workload worker workload_worker.examples.textstats:worker``, a process of its own,
    serving the live API over real HTTP (tests using it are ``real_http_only``); stopped by
    SIGTERM."""
    workload = shutil.which("workload", path=str(Path(sys.executable).parent))
    assert workload is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
    env.update({"WORKLOAD_URL": live_api.base_url, "WORKLOAD_WORKER_TOKEN": WORKER_TOKEN})
    with (tmp_path / "worker.log").open("wb") as log:
        process = subprocess.Popen(
            [workload, "worker", "workload_worker.examples.textstats:worker", "--concurrency", "2"],
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
