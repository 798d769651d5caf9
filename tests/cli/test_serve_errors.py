"""`workload serve` and `migrate` answer configuration and schema problems with SPEC §7's codes."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.cli.test_serve_embedded import _runtime_env
from workload_cli import _server
from workload_cli._embedded import EmbeddedPostgres
from workload_store_postgres.migrations import known_migrations


def _workload() -> str:
    path = shutil.which("workload", path=str(Path(sys.executable).parent))
    assert path is not None
    return path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serve(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``workload serve`` with ``args`` on a free port, until it exits."""
    return subprocess.run(
        [_workload(), "serve", *args, "--port", str(_free_port())],
        env=_runtime_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_unknown_log_level_is_a_configuration_error(tmp_path: Path) -> None:
    done = _serve(tmp_path, "--log-level", "bogus")
    assert done.returncode == 2, done.stderr
    assert "log level" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("url", ["notaurl", "host=x port"], ids=["word", "half-pair"])
def test_a_malformed_database_url_is_a_configuration_error(tmp_path: Path, url: str) -> None:
    # SPEC §7: 2 for usage or configuration; 5 is for a database that is down.
    done = _serve(tmp_path, "--database-url", url)
    assert done.returncode == 2, done.stderr
    assert "not a PostgreSQL connection URL" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.postgres  # the embedded PostgreSQL of `workload serve`
def test_embedded_serve_refuses_an_unknown_migration_with_exit_4(tmp_path: Path) -> None:
    env = _runtime_env(tmp_path)
    data_dir = Path(env["WORKLOAD_DATA_DIR"])
    # Start the embedded database once (through the CLI's own helper) and plant a migration
    # from the future in it.
    embedded = EmbeddedPostgres.in_data_dir(data_dir)
    url = embedded.start()
    try:
        migrate = subprocess.run(
            [_workload(), "migrate", "up", "--database-url", url, "-o", "json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert migrate.returncode == 0, migrate.stderr
        applied = [m["version"] for m in json.loads(migrate.stdout)["applied"]]
        assert applied == [m.version for m in known_migrations()]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES (999, 'x', 'y')"
            )
        status = subprocess.run(
            [_workload(), "migrate", "status", "--database-url", url, "--output", "json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert status.returncode == 4, status.stderr
        document = json.loads(status.stdout)
        assert document["up_to_date"] is False
        assert [u["version"] for u in document["unknown"]] == [999]
    finally:
        embedded.stop()
    served = subprocess.run(
        [_workload(), "serve", "--port", str(_free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert served.returncode == 4, served.stderr
    assert "999" in served.stderr
    assert "Traceback" not in served.stderr


@pytest.mark.parametrize(
    "env",
    [
        {"OTEL_TRACES_EXPORTER": "zipkin"},
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
    ],
    ids=["unknown-exporter", "otlp-grpc"],
)
def test_a_tracing_configuration_it_cannot_honour_is_a_usage_error(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code = _server.serve({"database_url": "postgresql://nobody@127.0.0.1:1/none"})
    assert code == 2
    assert "invalid tracing configuration" in capsys.readouterr().err
