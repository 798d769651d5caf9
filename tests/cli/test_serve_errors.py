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


def _workload_run(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``workload ARGS`` in a newcomer's environment (plus ``env``), until it exits."""
    return subprocess.run(
        [_workload(), *args],
        env={**_runtime_env(tmp_path), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _serve(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``workload serve`` with ``args`` on a free port, until it exits."""
    return _workload_run(tmp_path, "serve", *args, "--port", str(_free_port()), env=env)


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


_NOWHERE = "postgresql://nobody@127.0.0.1:1/none"


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (("--replica", "--standby"), {}, "choose one"),
        (("--replica",), {"WORKLOAD_REPLICA_ID": "a b"}, "replica id"),
        (("--replica",), {"WORKLOAD_REPLICA_ID": "host:1234"}, "replica id"),
        (("--replica",), {"WORKLOAD_REPLICA_ID": "x" * 129}, "replica id"),
        ((), {"WORKLOAD_SHARDS": "0"}, "shards"),
        ((), {"WORKLOAD_SHARDS": "4097"}, "shards"),
        ((), {"WORKLOAD_SHARDS": "many"}, "shards"),
        ((), {"WORKLOAD_SHARD_HANDOFF_SECONDS": "-1"}, "shard_handoff_seconds"),
    ],
    ids=[
        "replica-and-standby",
        "space",
        "colon",
        "too-long",
        "zero-shards",
        "too-many-shards",
        "shards-not-a-number",
        "negative-handoff",
    ],
)
def test_replica_settings_out_of_bounds_are_configuration_errors(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], says: str
) -> None:
    # SPEC §16, §7: refused before anything connects (the URL leads nowhere).
    done = _serve(tmp_path, *args, "--database-url", _NOWHERE, env=env)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.postgres
def test_a_number_of_shards_the_database_was_not_migrated_with_is_refused(
    tmp_path: Path, database_url: str
) -> None:
    # The test database was migrated with the default 64 shards: fixed from then on (§16).
    env = {"WORKLOAD_SHARDS": "32"}
    for done in (
        _workload_run(tmp_path, "migrate", "up", "--database-url", database_url, env=env),
        _serve(tmp_path, "--database-url", database_url, env=env),
    ):
        assert done.returncode == 2, done.stderr
        assert "has 64 shards" in done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "value", ["0", "-1", "36501", "forever", "1.5", "", " ", "1e3", "７"], ids=repr
)
def test_a_run_retention_out_of_bounds_is_a_configuration_error(tmp_path: Path, value: str) -> None:
    # SPEC §5: 1-36500 days, or unset; refused before anything connects (exit 2, §7).
    done = _serve(tmp_path, "--database-url", _NOWHERE, env={"WORKLOAD_RUN_RETENTION_DAYS": value})
    assert done.returncode == 2, done.stderr
    assert "run_retention_days" in done.stderr
    assert "Traceback" not in done.stderr


_SECRET = "S3CRET-not-to-be-said"


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        pytest.param(
            (),
            {"WORKLOAD_OPERATOR_TOKENS": _SECRET, "WORKLOAD_WORKER_TOKENS": _SECRET},
            "a worker token must not also be",
            id="tokens",
        ),
        pytest.param(
            ("--database-url", f"postgresql://user:{_SECRET}@[::1/db"),
            {},
            "database_url (WORKLOAD_DATABASE_URL)",
            id="url-flag",
        ),
        pytest.param(
            (),
            {"WORKLOAD_DATABASE_URL": f"postgresql://user:{_SECRET}@[::1/db"},
            "database_url (WORKLOAD_DATABASE_URL)",
            id="url-env",
        ),
        pytest.param(
            ("--database-url", f"host=x password={_SECRET} port"),
            {},
            'missing "=" after',
            id="url-pairs",
        ),
        pytest.param(
            ("--database-url", _NOWHERE),
            {"WORKLOAD_CONSOLE_SESSION_KEY": _SECRET},
            "console_session_key (WORKLOAD_CONSOLE_SESSION_KEY)",
            id="session-key",
        ),
    ],
)
def test_a_configuration_error_never_repeats_a_secret(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], says: str
) -> None:
    # SPEC §7: never tokens; a URL may hold a password, a session key is a secret.
    done = _serve(tmp_path, *args, env=env)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert _SECRET not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        pytest.param(("--database-url", ""), {}, "database_url", id="url-flag"),
        pytest.param((), {"WORKLOAD_DATABASE_URL": " "}, "database_url", id="url-env"),
        pytest.param(("--data-dir", ""), {}, "data_dir", id="dir-flag"),
        pytest.param((), {"WORKLOAD_DATA_DIR": ""}, "data_dir", id="dir-env"),
        # uvicorn would take an empty host for every interface, development tokens and all.
        pytest.param(("--host", ""), {}, "host", id="host-flag"),
        pytest.param((), {"WORKLOAD_HOST": " "}, "host", id="host-env"),
    ],
)
def test_an_empty_database_url_or_data_dir_is_refused_not_taken_for_unset(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], says: str
) -> None:
    # `--database-url "$UNSET"` must not start a development database on the default port.
    done = _serve(tmp_path, *args, env=env)
    assert done.returncode == 2, done.stderr
    assert f"{says} (WORKLOAD_{says.upper()}): Value error, empty" in done.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("kind", ["a-file", "under-a-file"])
def test_a_data_dir_that_cannot_be_made_is_a_configuration_error(tmp_path: Path, kind: str) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory", encoding="utf-8")
    data_dir = blocker if kind == "a-file" else blocker / "data"
    done = _serve(tmp_path, "--data-dir", str(data_dir))
    assert done.returncode == 2, done.stderr
    assert f"cannot use the data directory {data_dir}" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "command", [("migrate", "up"), ("migrate", "status"), ("console", "sessions")]
)
def test_database_commands_refuse_bad_settings_as_serve_does(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    # A malformed URL is a configuration error (2), by flag as by variable, not an outage (5);
    # any other bad setting is named, not taken for a missing URL.
    flag = _workload_run(tmp_path, *command, "--database-url", f"x{_SECRET}")
    by_env = _workload_run(tmp_path, *command, env={"WORKLOAD_DATABASE_URL": f"x{_SECRET}"})
    for done in (flag, by_env):
        assert done.returncode == 2, done.stderr
        assert "not a PostgreSQL connection URL" in done.stderr
        assert _SECRET not in done.stderr
    other = _workload_run(
        tmp_path, *command, "--database-url", _NOWHERE, env={"WORKLOAD_LOG_LEVEL": "zzz"}
    )
    assert other.returncode == 2, other.stderr
    assert "log_level (WORKLOAD_LOG_LEVEL): Value error, log level must be" in other.stderr
    assert "give --database-url" not in other.stderr


def test_a_bad_url_variable_the_flag_overrides_is_not_read(tmp_path: Path) -> None:
    # The settings are read once: the flag's URL is used, the variable's never parsed or said.
    hidden = {"WORKLOAD_DATABASE_URL": f"postgresql://user:{_SECRET}@[::1/db"}
    for env in (hidden, {"WORKLOAD_DATABASE_URL": ""}):
        done = _workload_run(tmp_path, "migrate", "up", "--database-url", _NOWHERE, env=env)
        assert done.returncode == 5, done.stderr  # it tried the flag's database: nobody there
        assert "cannot migrate" in done.stderr
        assert _SECRET not in done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.postgres  # the embedded PostgreSQL of `workload serve`
def test_stored_development_tokens_that_break_a_rule_are_refused_unsaid(tmp_path: Path) -> None:
    # A hand-edited credentials.json giving two roles one token: exit 2, no token printed.
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    same = f"wl_same_{_SECRET}"
    tokens = {"operator_token": same, "viewer_token": "wl_view_x", "worker_token": same}
    (data_dir / "credentials.json").write_text(json.dumps(tokens), encoding="utf-8")
    done = _serve(tmp_path, "--data-dir", str(data_dir))
    assert done.returncode == 2, done.stderr[-4000:]
    assert "a worker token must not also be" in done.stderr
    assert _SECRET not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
    assert not (data_dir / "postgres" / "postmaster.pid").exists()  # the database stopped too
