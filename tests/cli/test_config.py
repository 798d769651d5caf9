"""Configuration of the client commands: flag > env > credentials file, before or after.

No server: the SDK client the commands build sends through an ``httpx.MockTransport`` that
records each request (which server, which token), or the URL is one that cannot work and the
error names it and where it came from.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer

import workload_sdk
from tests.cli.conftest import Cli
from workload_cli import _config, _options, _session
from workload_cli._config import ClientConfig, Given, resolve_config
from workload_cli._exit import ExitCode
from workload_cli.main import app
from workload_sdk import Client, config

FILE_URL = "http://file.test:7000"
ENV_URL = "http://env.test:7000"
BEFORE_URL = "http://before.test:7000"
AFTER_URL = "http://after.test:7000"
EMPTY_PAGE: dict[str, Any] = {"items": [], "next_cursor": None}
PLAIN_HEADER = "WORKFLOW\tLATEST\t"
PACKAGES = Path(__file__).resolve().parents[2] / "packages"


@dataclass
class Server:
    """Answers every request with an empty page, and remembers it."""

    requests: list[httpx.Request] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(200, json=EMPTY_PAGE)

    def last(self) -> tuple[str, str | None]:
        """Where the last request went (scheme://host:port) and its bearer token."""
        request = self.requests[-1]
        auth = request.headers.get("authorization")
        token = auth.removeprefix("Bearer ") if auth else None
        return f"{request.url.scheme}://{request.url.host}:{request.url.port}", token


@pytest.fixture
def server(offline_cli: Cli) -> Server:
    """The commands' SDK client talks to this recorder instead of the network.

    The CLI is handed the transport the way any in-process caller hands it one: as the root
    context's ``obj`` (see ``workload_cli._session``).
    """
    recorder = Server()
    offline_cli.transport = httpx.MockTransport(recorder.handle)
    return recorder


def write_credentials(data_dir: Path, url: str = FILE_URL, token: str = "file-token") -> None:
    document = {"url": url, "operator_token": token, "viewer_token": "unused"}
    (data_dir / "credentials.json").write_text(json.dumps(document), encoding="utf-8")


def ok(result: Any) -> Any:
    assert result.exit_code == 0, result.output
    return result


# -- one source for the names ------------------------------------------------------------------


def test_the_sdk_exports_its_configuration_names() -> None:
    assert (config.URL_ENV, config.TOKEN_ENV) == ("WORKLOAD_URL", "WORKLOAD_TOKEN")
    assert config.DEFAULT_BASE_URL == "http://127.0.0.1:8080"
    for name in config.__all__:
        assert name in workload_sdk.__all__
        assert getattr(workload_sdk, name) is getattr(config, name)


def test_the_cli_uses_the_sdks_names() -> None:
    # Imported from the SDK, not defined again.
    for module, names in (
        (_options, ("URL_ENV", "TOKEN_ENV", "DEFAULT_BASE_URL")),
        (_session, ("URL_ENV", "TOKEN_ENV")),
        (_config, ("DEFAULT_BASE_URL",)),
    ):
        for name in names:
            assert vars(module)[name] is vars(config)[name], (module.__name__, name)


@pytest.mark.parametrize(
    "literal",
    ['"WORKLOAD_URL"', '"WORKLOAD_TOKEN"', '"WORKLOAD_WORKER_TOKEN"', '"http://127.0.0.1:8080"'],
)
def test_no_second_copy_of_a_name_in_the_sdk_or_the_cli(literal: str) -> None:
    defining = [
        path.relative_to(PACKAGES).as_posix()
        for package in (
            "sdk/src/workload_sdk",
            "cli/src/workload_cli",
            "worker/src/workload_worker",
        )
        for path in sorted((PACKAGES / package).glob("*.py"))
        if literal in path.read_text(encoding="utf-8")
    ]
    assert defining == ["sdk/src/workload_sdk/config.py"]


def test_the_sdk_and_the_cli_default_to_the_same_server(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(config.URL_ENV, raising=False)
    with Client() as client:
        assert client.base_url == config.DEFAULT_BASE_URL
    cli_default = resolve_config(url=None, token=None, environ={"WORKLOAD_DATA_DIR": str(tmp_path)})
    assert cli_default == ClientConfig(config.DEFAULT_BASE_URL, None, "default", "none")


def _client_commands() -> list[tuple[str, ...]]:
    root = typer.main.get_command(app)
    paths: list[tuple[str, ...]] = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            paths.append(path)
            return
        for name, sub in subcommands.items():
            walk(sub, (*path, name))

    for name in ("workflows", "runs", "workers", "queues", "demo"):
        walk(root.commands[name], (name,))  # type: ignore[attr-defined]
    return paths


CLIENT_COMMANDS = _client_commands()


def _option(path: tuple[str, ...], name: str) -> Any:
    command: Any = typer.main.get_command(app)
    for part in path:
        command = command.commands[part]
    (found,) = (p for p in command.params if p.name == name)
    return found


@pytest.mark.parametrize("path", [(), *CLIENT_COMMANDS], ids=lambda p: " ".join(p) or "workload")
def test_every_client_command_has_the_global_options_with_the_sdks_variables(
    path: tuple[str, ...],
) -> None:
    assert _option(path, "url").envvar == config.URL_ENV
    assert _option(path, "token").envvar == config.TOKEN_ENV
    output = _option(path, "output")
    assert output.envvar == _options.OUTPUT_ENV
    assert set(output.opts) == {"--output", "-o"}


def test_the_client_commands_are_all_there() -> None:
    assert len(CLIENT_COMMANDS) == 19
    assert ("runs", "events") in CLIENT_COMMANDS
    assert ("demo",) in CLIENT_COMMANDS


# -- before or after the command ---------------------------------------------------------------

# Arguments that take each client command as far as its first request.
COMMAND_ARGS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("workflows", "create"): ("{file}",),
    ("workflows", "apply"): ("{file}",),
    ("workflows", "new-version"): ("wf", "{file}"),
    ("workflows", "list"): (),
    ("workflows", "show"): ("wf",),
    ("workflows", "versions"): ("wf",),
    ("runs", "start"): ("wf", "--input", "{}"),
    ("runs", "rerun"): ("r",),
    ("runs", "list"): (),
    ("runs", "show"): ("r",),
    ("runs", "cancel"): ("r",),
    ("runs", "watch"): ("r",),
    ("runs", "tasks"): ("r",),
    ("runs", "attempts"): ("r", "a"),
    ("runs", "steps"): ("r", "a"),
    ("runs", "events"): ("r",),
    ("workers", "list"): (),
    ("queues", "list"): (),
    ("demo",): (),
}


def test_the_table_covers_every_client_command() -> None:
    assert sorted(COMMAND_ARGS) == sorted(CLIENT_COMMANDS)


@pytest.mark.parametrize("position", ["before", "after"])
@pytest.mark.parametrize("path", CLIENT_COMMANDS, ids=" ".join)
def test_every_client_command_takes_url_before_or_after(
    offline_cli: Cli, tmp_path: Path, path: tuple[str, ...], position: str
) -> None:
    definition = tmp_path / "wf.json"
    definition.write_text(json.dumps({"id": "wf", "tasks": [{"key": "a", "action": "mock"}]}))
    args = [arg.replace("{file}", str(definition)) for arg in COMMAND_ARGS[path]]
    flag = ["--url", f"ftp://{position}"]
    argv = [*flag, *path, *args] if position == "before" else [*path, *args, *flag]
    result = offline_cli(*argv)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert f"'ftp://{position}' (from --url) is not an http(s) URL" in result.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ("--url", BEFORE_URL, "--token", "t", "workflows", "list"),
        ("workflows", "list", "--url", BEFORE_URL, "--token", "t"),
        ("--url", BEFORE_URL, "workflows", "list", "--token", "t"),
        ("--token", "t", "runs", "list", "--url", BEFORE_URL),
    ],
    ids=["both-before", "both-after", "url-before-token-after", "token-before-url-after"],
)
def test_url_and_token_before_or_after(offline_cli: Cli, server: Server, argv: list[str]) -> None:
    ok(offline_cli(*argv))
    assert server.last() == (BEFORE_URL, "t")


@pytest.mark.parametrize(
    "argv",
    [
        ("--output", "json", "workflows", "list"),
        ("-o", "json", "workflows", "list"),
        ("workflows", "list", "--output", "json"),
        ("workflows", "list", "-o", "json"),
    ],
    ids=["long-before", "short-before", "long-after", "short-after"],
)
def test_output_before_or_after(offline_cli: Cli, server: Server, argv: list[str]) -> None:
    assert json.loads(ok(offline_cli(*argv)).stdout) == []


def test_the_option_after_the_command_wins(offline_cli: Cli, server: Server) -> None:
    result = ok(
        offline_cli(
            *("--url", BEFORE_URL, "--token", "before", "-o", "json"),
            *("workflows", "list"),
            *("--url", AFTER_URL, "--token", "after", "-o", "plain"),
        )
    )
    assert server.last() == (AFTER_URL, "after")
    assert result.stdout.startswith(PLAIN_HEADER)
    before = ok(offline_cli("-o", "plain", "workflows", "list", "-o", "json"))
    assert json.loads(before.stdout) == []


# -- flag > env > credentials file -------------------------------------------------------------


def test_credentials_file_alone(offline_cli: Cli, server: Server, data_dir: Path) -> None:
    write_credentials(data_dir)
    ok(offline_cli("workflows", "list"))
    assert server.last() == (FILE_URL, "file-token")


def test_env_wins_over_the_file(offline_cli: Cli, server: Server, data_dir: Path) -> None:
    write_credentials(data_dir)
    env = {"WORKLOAD_URL": ENV_URL, "WORKLOAD_TOKEN": "env-token"}
    ok(offline_cli("workflows", "list", env=env))
    assert server.last() == (ENV_URL, "env-token")
    # Another server than the file's: the file's token is not sent there.
    ok(offline_cli("workflows", "list", env={"WORKLOAD_URL": ENV_URL}))
    assert server.last() == (ENV_URL, None)
    # The env token, with the file's URL.
    ok(offline_cli("workflows", "list", env={"WORKLOAD_TOKEN": "env-token"}))
    assert server.last() == (FILE_URL, "env-token")


@pytest.mark.parametrize("position", ["before", "after"])
def test_flags_win_over_the_env_and_the_file(
    offline_cli: Cli, server: Server, data_dir: Path, position: str
) -> None:
    write_credentials(data_dir)
    env = {"WORKLOAD_URL": ENV_URL, "WORKLOAD_TOKEN": "env-token", "WORKLOAD_OUTPUT": "plain"}
    flags = ["--url", BEFORE_URL, "--token", "flag-token", "-o", "json"]
    argv = [*flags, "workflows", "list"] if position == "before" else ["workflows", "list", *flags]
    result = ok(offline_cli(*argv, env=env))
    assert server.last() == (BEFORE_URL, "flag-token")
    assert json.loads(result.stdout) == []


def test_the_env_output_is_used_without_a_flag(offline_cli: Cli, server: Server) -> None:
    result = ok(offline_cli("workflows", "list", env={"WORKLOAD_OUTPUT": "json"}))
    assert json.loads(result.stdout) == []
    bad = offline_cli("workflows", "list", env={"WORKLOAD_OUTPUT": "yaml"})
    assert bad.exit_code == ExitCode.USAGE


def test_an_empty_variable_counts_as_unset(
    offline_cli: Cli, server: Server, data_dir: Path
) -> None:
    write_credentials(data_dir)
    ok(offline_cli("workflows", "list", env={"WORKLOAD_URL": "", "WORKLOAD_TOKEN": ""}))
    assert server.last() == (FILE_URL, "file-token")


def test_the_file_token_goes_to_the_default_url_too(
    offline_cli: Cli, server: Server, data_dir: Path
) -> None:
    write_credentials(data_dir)
    ok(offline_cli("workflows", "list", "--url", config.DEFAULT_BASE_URL))
    assert server.last() == ("http://127.0.0.1:8080", "file-token")
    ok(offline_cli("--url", AFTER_URL, "workflows", "list"))
    assert server.last() == (AFTER_URL, None)


def test_messages_name_the_source(offline_cli: Cli) -> None:
    from_env = offline_cli("runs", "list", env={"WORKLOAD_URL": "ftp://env"})
    assert "'ftp://env' (from WORKLOAD_URL)" in from_env.stderr
    # The env on the command's own option does not hide a flag given before the command.
    from_root = offline_cli("--url", "ftp://root", "runs", "list", env={"WORKLOAD_URL": "ftp://e"})
    assert "'ftp://root' (from --url)" in from_root.stderr


def test_resolve_config_rules(tmp_path: Path) -> None:
    env = {"WORKLOAD_DATA_DIR": str(tmp_path)}
    default = config.DEFAULT_BASE_URL
    assert resolve_config(url=None, token=None, environ=env) == ClientConfig(
        default, None, "default", "none"
    )
    write_credentials(tmp_path, "http://127.0.0.1:9000/", "file-token")
    path = str(tmp_path / "credentials.json")
    from_file = resolve_config(url=None, token=None, environ=env)
    assert from_file == ClientConfig("http://127.0.0.1:9000", "file-token", path, path)
    # The default URL gets the file's token too (serve wrote it for this machine).
    to_default = resolve_config(url=Given(default, "--url"), token=None, environ=env)
    assert (to_default.url, to_default.token) == (default, "file-token")
    # Any other URL does not.
    other = resolve_config(url=Given("https://x", "WORKLOAD_URL"), token=None, environ=env)
    assert other == ClientConfig("https://x", None, "WORKLOAD_URL", "none")
    given = resolve_config(
        url=Given("https://y/", "--url"), token=Given("t", "WORKLOAD_TOKEN"), environ=env
    )
    assert given == ClientConfig("https://y", "t", "--url", "WORKLOAD_TOKEN")
    # Empty values count as not given.
    empty = resolve_config(url=Given("", "--url"), token=Given("", "--token"), environ=env)
    assert (empty.url, empty.token) == ("http://127.0.0.1:9000", "file-token")
    (tmp_path / "credentials.json").write_text("not json", encoding="utf-8")
    assert resolve_config(url=None, token=None, environ=env).token is None


def test_resolve_config_rejects_a_url_that_cannot_work() -> None:
    with pytest.raises(_config.ConfigError, match=re.escape("'ftp://x' (from WORKLOAD_URL)")):
        resolve_config(url=Given("ftp://x", "WORKLOAD_URL"), token=None, environ={})
