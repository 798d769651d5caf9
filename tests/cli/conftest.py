"""CLI fixtures: per-test databases, a live API on each (as in tests/e2e), and a CLI runner."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from tests.plugins.live_api import OPERATOR_TOKEN, LiveApi, live_api  # noqa: F401
from tests.plugins.postgres import (  # noqa: F401
    database_url,
    empty_database_url,
    postgres_server_url,
    template_database,
)
from workload_cli.main import app

# Variables that change what the CLI does; unset unless a test sets them.
CLEAN_ENV: dict[str, str | None] = dict.fromkeys(
    (
        "WORKLOAD_URL",
        "WORKLOAD_TOKEN",
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

    def __call__(
        self, *args: str, input: str | None = None, env: Mapping[str, str | None] | None = None
    ) -> Result:
        runner = CliRunner()
        return runner.invoke(app, list(args), input=input, env={**self.env, **(env or {})})


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
def cli(live_api: LiveApi, offline_cli: Cli) -> Cli:  # noqa: F811 - the imported fixture
    """The CLI pointed at the live API with the operator token (through the environment)."""
    return Cli(
        {**offline_cli.env, "WORKLOAD_URL": live_api.base_url, "WORKLOAD_TOKEN": OPERATOR_TOKEN}
    )
