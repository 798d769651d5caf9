"""The client commands against the live API: every command, formats, exit codes, config."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from tests.cli.conftest import Cli
from tests.plugins.live_api import OPERATOR_TOKEN, VIEWER_TOKEN, LiveApi
from tests.waiting import wait_until
from workload_cli._cluster import shard_ranges
from workload_cli._exit import ExitCode
from workload_sdk import (
    Attempt,
    Client,
    Event,
    Run,
    RunStatus,
    TaskRun,
    TaskStatus,
    Version,
    VersionSummary,
    Workflow,
)

EXAMPLES = Path(__file__).parent / "examples"
MISSING_RUN = "00000000-0000-7000-8000-000000000000"
ANSI_STYLE = re.compile(r"\x1b\[[0-9;]*m")

QUICK: dict[str, Any] = {"id": "quick", "tasks": [{"key": "a", "action": "mock"}]}
RETRYING: dict[str, Any] = {
    "id": "retrying",
    "tasks": [
        {"key": "fetch", "action": "mock", "input": {"sleep_ms": 20}},
        {
            "key": "flaky",
            "action": "mock",
            "depends_on": ["fetch"],
            "input": {"fail_first": 1},
            "retry": {"max_attempts": 2, "initial_backoff_seconds": 0.3},
        },
    ],
}
WATCHED_RETRY: dict[str, Any] = {
    **RETRYING,
    "id": "watched-retry",
    # `runs watch` polls: the retry wait must outlast the watch's start on a busy CI machine
    # (0.3 s did not), so that it sees the task waiting.
    "tasks": [
        RETRYING["tasks"][0],
        {**RETRYING["tasks"][1], "retry": {"max_attempts": 2, "initial_backoff_seconds": 2}},
    ],
}
FAILING: dict[str, Any] = {
    "id": "failing",
    "tasks": [
        {
            "key": "flaky",
            "action": "mock",
            "input": {"fail_always": True},
            "retry": {"max_attempts": 2, "initial_backoff_seconds": 0.1},
        },
        {"key": "after", "action": "mock", "depends_on": ["flaky"]},
    ],
}
SLOW: dict[str, Any] = {
    "id": "slow",
    "tasks": [
        {
            "key": "flaky",
            "action": "mock",
            "input": {"fail_first": 1},
            # `runs watch` polls: the retry wait must outlast the watch's start on a busy CI
            # machine (0.2 s did not), so that it sees the task waiting.
            "retry": {"max_attempts": 2, "initial_backoff_seconds": 2},
        },
        {"key": "long", "action": "mock", "depends_on": ["flaky"], "input": {"sleep_ms": 60000}},
    ],
}

LONG: dict[str, Any] = {
    "id": "long",
    "tasks": [{"key": "long", "action": "mock", "input": {"sleep_ms": 60000}}],
}


def parse(model: Any, text: str) -> Any:
    return TypeAdapter(model).validate_json(text)


@pytest.fixture
def operator(live_api: LiveApi) -> Iterator[Client]:
    with live_api.sdk(OPERATOR_TOKEN) as client:
        yield client


def write(tmp_path: Path, definition: dict[str, Any]) -> str:
    path = tmp_path / f"{definition['id']}.json"
    path.write_text(json.dumps(definition), encoding="utf-8")
    return str(path)


def started(cli: Cli, workflow_id: str) -> Run:
    result = cli("runs", "start", workflow_id, "-o", "json")
    assert result.exit_code == 0, result.output
    run: Run = parse(Run, result.stdout)
    return run


# -- workflows ---------------------------------------------------------------------------------


def test_workflows_commands_print_sdk_models(cli: Cli, tmp_path: Path) -> None:
    created = cli("workflows", "create", write(tmp_path, RETRYING), "-o", "json")
    assert created.exit_code == 0, created.output
    v1 = parse(Version, created.stdout)
    assert (v1.workflow_id, v1.version, v1.task_count) == ("retrying", 1, 2)
    assert v1.definition["tasks"][0]["timeout_seconds"] == 300  # normalized
    assert "created retrying version 1" in created.stderr

    from_stdin = cli("workflows", "create", "-", "-o", "json", input=json.dumps(QUICK))
    assert parse(Version, from_stdin.stdout).workflow_id == "quick"

    listed = cli("workflows", "list", "-o", "json")
    workflows = parse(list[Workflow], listed.stdout)
    assert [w.workflow_id for w in workflows] == ["retrying", "quick"]

    shown = cli("workflows", "show", "retrying", "-o", "json")
    assert parse(Workflow, shown.stdout).latest_version == 1

    second = {**RETRYING, "description": "v2"}
    del second["id"]  # the id may be omitted in a new version
    new = cli("workflows", "new-version", "retrying", write(tmp_path, {**second, "id": "x"}))
    assert new.exit_code == ExitCode.REJECTED  # workflow_id_mismatch
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(second), encoding="utf-8")
    new = cli("workflows", "new-version", "retrying", str(path), "-o", "json")
    assert new.exit_code == 0, new.output
    assert parse(Version, new.stdout).version == 2

    versions = parse(
        list[VersionSummary], cli("workflows", "versions", "retrying", "-o", "json").stdout
    )
    assert [v.version for v in versions] == [1, 2]
    version = parse(
        Version, cli("workflows", "show", "retrying", "--version", "2", "-o", "json").stdout
    )
    assert version.definition["description"] == "v2"


def test_global_output_option_and_env(cli: Cli, tmp_path: Path) -> None:
    cli("workflows", "create", write(tmp_path, QUICK))
    assert parse(list[Workflow], cli("--output", "json", "workflows", "list").stdout)
    assert parse(list[Workflow], cli("workflows", "list", env={"WORKLOAD_OUTPUT": "json"}).stdout)
    # The command's own --output wins over the global one.
    plain = cli("-o", "json", "workflows", "list", "-o", "plain")
    assert plain.stdout.startswith("WORKFLOW\tLATEST\t")


# -- runs --------------------------------------------------------------------------------------


def test_runs_commands_print_sdk_models(cli: Cli, tmp_path: Path, live_api: LiveApi) -> None:
    cli("workflows", "create", write(tmp_path, RETRYING))
    first = cli(
        "runs",
        "start",
        "retrying",
        "--version",
        "1",
        "--input",
        '{"doc": 7}',
        "--idempotency-key",
        "start-1",
        "-o",
        "json",
    )
    assert first.exit_code == 0, first.output
    run = parse(Run, first.stdout)
    assert (run.workflow_id, run.version, run.input) == ("retrying", 1, {"doc": 7})
    replay = cli(
        "runs",
        "start",
        "retrying",
        "--idempotency-key",
        "start-1",
        "-o",
        "json",
        "--input",
        '{"doc": 7}',
    )
    assert parse(Run, replay.stdout).run_id == run.run_id
    input_file = tmp_path / "input.json"
    input_file.write_text('{"doc": 8}', encoding="utf-8")
    other = parse(
        Run, cli("runs", "start", "retrying", "--input", f"@{input_file}", "-o", "json").stdout
    )
    assert other.input == {"doc": 8}
    live_api.wait_for_run(run.run_id)
    live_api.wait_for_run(other.run_id)

    runs = parse(list[Run], cli("runs", "list", "-o", "json").stdout)
    assert [r.run_id for r in runs] == [other.run_id, run.run_id]  # newest first
    filtered = cli(
        "runs",
        "list",
        "--workflow",
        "retrying",
        "--status",
        "succeeded",
        "--limit",
        "1",
        "-o",
        "json",
    )
    assert [r.run_id for r in parse(list[Run], filtered.stdout)] == [other.run_id]
    assert parse(list[Run], cli("runs", "list", "--status", "failed", "-o", "json").stdout) == []

    shown = parse(Run, cli("runs", "show", run.run_id, "-o", "json").stdout)
    assert shown.status is RunStatus.SUCCEEDED
    assert shown.task_counts[TaskStatus.SUCCEEDED] == 2

    tasks = parse(list[TaskRun], cli("runs", "tasks", run.run_id, "-o", "json").stdout)
    assert [(t.task_key, t.attempt_count) for t in tasks] == [("fetch", 1), ("flaky", 2)]
    attempts = parse(
        list[Attempt], cli("runs", "attempts", run.run_id, "flaky", "-o", "json").stdout
    )
    assert [a.status.value for a in attempts] == ["failed", "succeeded"]
    events = parse(list[Event], cli("runs", "events", run.run_id, "-o", "json").stdout)
    assert events[0].type == "run.created"
    assert events[-1].type == "run.succeeded"

    followed = cli("runs", "events", run.run_id, "--follow", "-o", "json")
    assert followed.exit_code == 0
    lines = [parse(Event, line) for line in followed.stdout.splitlines()]
    assert lines == events


def test_events_follow_streams_until_the_run_finishes(cli: Cli, tmp_path: Path) -> None:
    cli("workflows", "create", write(tmp_path, RETRYING))
    run = started(cli, "retrying")
    result = cli("runs", "events", run.run_id, "--follow", "--interval", "0.05")
    assert result.exit_code == 0, result.output
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert rows[0][:3] == ["SEQ", "TIME", "TYPE"]
    assert [int(row[0]) for row in rows[1:]] == list(range(1, len(rows)))
    assert rows[-1][2] == "run.succeeded"
    assert "task.waiting_retry" in [row[2] for row in rows]


def test_cancel_with_and_without_revision(cli: Cli, tmp_path: Path, live_api: LiveApi) -> None:
    cli("workflows", "create", write(tmp_path, LONG))
    run = started(cli, "long")
    stale = cli("runs", "cancel", run.run_id, "--if-revision", "999")
    assert stale.exit_code == ExitCode.REJECTED
    assert "precondition_failed" in stale.stderr
    canceled = cli("runs", "cancel", run.run_id, "-o", "json")
    assert canceled.exit_code == 0, canceled.output
    assert parse(Run, canceled.stdout).cancel_requested
    assert live_api.wait_for_run(run.run_id)["status"] == "canceled"
    again = cli("runs", "cancel", run.run_id, "-o", "json")  # canceling a canceled run: no-op
    assert parse(Run, again.stdout).status is RunStatus.CANCELED


def test_plain_and_table_output(cli: Cli, tmp_path: Path, live_api: LiveApi) -> None:
    cli("workflows", "create", write(tmp_path, {**QUICK, "description": "tab\there\nnewline"}))
    header, workflow = cli("workflows", "list").stdout.splitlines()  # one line per row
    assert workflow.split("\t")[:3] == ["quick", "1", "tab\\there\\nnewline"]
    run = started(cli, "quick")
    live_api.wait_for_run(run.run_id)
    plain = cli("runs", "list")  # not a terminal: plain text by default
    header, row = plain.stdout.splitlines()
    assert header.split("\t")[:4] == ["RUN", "WORKFLOW", "VERSION", "STATUS"]
    assert row.split("\t")[:4] == [run.run_id, "quick", "1", "succeeded"]
    shown = dict(
        line.split("\t", 1) for line in cli("runs", "show", run.run_id).stdout.splitlines()
    )
    assert shown["status"] == "succeeded"
    assert json.loads(shown["input"]) == {}
    assert cli("runs", "start", "quick", "--quiet").stdout.strip() != ""
    table = cli("runs", "tasks", run.run_id, "-o", "table")
    assert table.exit_code == 0
    assert "TASK" in table.stdout
    assert "succeeded" in table.stdout
    assert "\t" not in table.stdout


# -- watching ----------------------------------------------------------------------------------


def test_watch_exit_code_succeeded_after_a_retry(cli: Cli, tmp_path: Path) -> None:
    cli("workflows", "create", write(tmp_path, WATCHED_RETRY))
    run = started(cli, "watched-retry")
    result = cli("runs", "watch", run.run_id, "--interval", "0.05")
    assert result.exit_code == 0, result.output
    assert "task flaky waiting_retry attempt 1/2" in result.stdout
    assert "task flaky succeeded attempt 2/2" in result.stdout
    assert f"run {run.run_id} succeeded" in result.stdout.splitlines()[-1]


def test_watch_follows_the_event_stream(
    cli: Cli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SPEC §13: ``runs watch`` learns of changes from the run's event stream."""
    cli("workflows", "create", write(tmp_path, RETRYING))
    run = started(cli, "retrying")
    with caplog.at_level(logging.INFO, logger="workload.access"):
        result = cli("runs", "watch", run.run_id, "--interval", "0.05")
    assert result.exit_code == 0, result.output
    routes = [getattr(r, "fields", {}).get("route") for r in caplog.records]
    assert routes.count("/api/v1/runs/{run_id}/events/stream") == 1, routes


def test_watch_exit_code_failed(cli: Cli, tmp_path: Path) -> None:
    cli("workflows", "create", write(tmp_path, FAILING))
    run = started(cli, "failing")
    result = cli("runs", "watch", run.run_id, "--interval", "0.05", "-o", "json")
    assert result.exit_code == 10, result.output
    final = parse(Run, result.stdout)
    assert final.status is RunStatus.FAILED
    assert final.task_counts[TaskStatus.SKIPPED] == 1


def test_watch_exit_code_canceled(cli: Cli, tmp_path: Path, operator: Client) -> None:
    cli("workflows", "create", write(tmp_path, SLOW))
    run = started(cli, "slow")

    def cancel_when_long_runs() -> None:
        wait_until(lambda: operator.runs.task(run.run_id, "long").status is TaskStatus.RUNNING)
        operator.runs.cancel(run.run_id)

    canceller = threading.Thread(target=cancel_when_long_runs)
    canceller.start()
    result = cli("runs", "watch", run.run_id, "--interval", "0.05")
    canceller.join()
    assert result.exit_code == 11, result.output
    assert "task flaky waiting_retry attempt 1/2" in result.stdout
    assert "task flaky succeeded attempt 2/2" in result.stdout
    assert "task long canceled attempt 1/1" in result.stdout


def test_watch_timeout_and_start_wait(cli: Cli, tmp_path: Path) -> None:
    cli("workflows", "create", write(tmp_path, LONG))
    run = started(cli, "long")
    timed_out = cli("runs", "watch", run.run_id, "--timeout", "0.3", "--interval", "0.05")
    assert timed_out.exit_code == 12
    assert "timed out" in timed_out.stderr

    cli("workflows", "create", write(tmp_path, RETRYING))
    waited = cli("runs", "start", "retrying", "--wait", "--interval", "0.05", "-o", "json")
    assert waited.exit_code == 0, waited.output
    assert parse(Run, waited.stdout).status is RunStatus.SUCCEEDED
    cli("workflows", "create", write(tmp_path, FAILING))
    failed = cli("runs", "start", "failing", "--wait", "--quiet", "--interval", "0.05")
    assert failed.exit_code == ExitCode.RUN_FAILED
    assert re.fullmatch(r"[0-9a-f-]{36}\n", failed.stdout)


def test_demo_shows_a_run_to_the_end(cli: Cli) -> None:
    # No worker token here (no credentials file, no WORKLOAD_WORKER_TOKEN): in-process tasks
    # only; tests/cli/test_serve_embedded.py runs the demo with its worker.
    first = cli("demo", "-o", "json")
    assert first.exit_code == 0, first.output
    assert "in-process tasks only" in first.stderr
    run = parse(Run, first.stdout)
    assert run.status is RunStatus.SUCCEEDED
    assert run.task_counts[TaskStatus.SUCCEEDED] == 6
    assert "registered demo-document-pipeline version 1" in first.stderr
    again = cli("demo")  # the id exists: a new version, shown as lines
    assert again.exit_code == 0, again.output
    assert "registered demo-document-pipeline version 2" in again.stderr
    assert "task extract-tables waiting_retry attempt 1/3" in again.stdout


# -- errors ------------------------------------------------------------------------------------


def test_api_error_prints_detail_and_request_id(cli: Cli) -> None:
    result = cli("runs", "show", MISSING_RUN)
    assert result.exit_code == 7
    assert result.stdout == ""
    assert re.search(r"error: .*run.*\(404 run_not_found\)", result.stderr)
    match = re.search(r"request_id: (\S+)", result.stderr)
    assert match is not None

    as_json = cli("runs", "show", MISSING_RUN, "-o", "json")
    problem = json.loads(as_json.stderr)
    assert problem["code"] == "run_not_found"
    assert problem["detail"]
    assert problem["request_id"]


def test_invalid_definition_lists_every_problem(cli: Cli, tmp_path: Path) -> None:
    bad = {
        "id": "bad",
        "tasks": [
            {"key": "a", "action": "mock", "depends_on": ["zz"]},
            {"key": "a", "action": "mock", "timeout_seconds": "3"},
        ],
    }
    result = cli("workflows", "create", write(tmp_path, bad))
    assert result.exit_code == ExitCode.REJECTED
    assert "invalid_definition" in result.stderr
    assert "/tasks/1/timeout_seconds" in result.stderr
    assert "request_id: " in result.stderr


@pytest.mark.real_http_only  # unreachable URLs and which server answers
def test_error_families_have_their_exit_codes(cli: Cli, tmp_path: Path) -> None:
    unauthenticated = cli("workflows", "list", env={"WORKLOAD_TOKEN": "wrong-token"})
    assert unauthenticated.exit_code == 8
    assert "unauthenticated" in unauthenticated.stderr
    forbidden = cli(
        "workflows", "create", write(tmp_path, QUICK), env={"WORKLOAD_TOKEN": VIEWER_TOKEN}
    )
    assert forbidden.exit_code == ExitCode.UNAUTHORIZED
    assert "forbidden" in forbidden.stderr
    unreachable = cli("workflows", "list", env={"WORKLOAD_URL": "http://127.0.0.1:1"})
    assert unreachable.exit_code == 6
    assert "error:" in unreachable.stderr

    missing = cli("workflows", "create", str(tmp_path / "nope.json"))
    assert missing.exit_code == 2
    assert "cannot read" in missing.stderr
    (tmp_path / "broken.json").write_text("{nope", encoding="utf-8")
    broken = cli("workflows", "create", str(tmp_path / "broken.json"))
    assert broken.exit_code == ExitCode.USAGE
    assert "not valid JSON" in broken.stderr
    not_object = cli("runs", "start", "quick", "--input", "[1]")
    assert not_object.exit_code == ExitCode.USAGE
    bad_key = cli("runs", "start", "quick", "--idempotency-key", "has space")
    assert bad_key.exit_code == ExitCode.USAGE
    assert cli("runs", "list", "--status", "bogus").exit_code == ExitCode.USAGE
    bad_url = cli("--url", "ftp://example", "runs", "list")
    assert bad_url.exit_code == ExitCode.USAGE
    assert "is not an http(s) URL" in bad_url.stderr


# -- configuration -----------------------------------------------------------------------------


def write_credentials(data_dir: Path, url: str, token: str) -> None:
    document = {"url": url, "operator_token": token, "viewer_token": "unused"}
    (data_dir / "credentials.json").write_text(json.dumps(document), encoding="utf-8")


@pytest.mark.real_http_only  # unreachable URLs and which server answers
def test_precedence_flag_over_env_over_credentials_file(
    cli: Cli, live_api: LiveApi, data_dir: Path
) -> None:
    write_credentials(data_dir, live_api.base_url, OPERATOR_TOKEN)
    nothing = {"WORKLOAD_URL": None, "WORKLOAD_TOKEN": None}
    # The file alone: its URL and its operator token.
    assert cli("workflows", "list", env=nothing).exit_code == 0
    # The env token wins over the file's.
    env_token = {"WORKLOAD_URL": None, "WORKLOAD_TOKEN": "wrong-token"}
    assert cli("workflows", "list", env=env_token).exit_code == ExitCode.UNAUTHORIZED
    # The flag wins over the env.
    assert cli("--token", OPERATOR_TOKEN, "workflows", "list", env=env_token).exit_code == 0
    assert cli("--token", "wrong", "workflows", "list").exit_code == ExitCode.UNAUTHORIZED
    # URL: the env wins over the file's, and the flag over the env.
    env_url = {"WORKLOAD_URL": "http://127.0.0.1:1", "WORKLOAD_TOKEN": None}
    assert cli("workflows", "list", env=env_url).exit_code == ExitCode.UNREACHABLE
    assert cli("--url", live_api.base_url, "workflows", "list", env=env_url).exit_code == 0


@pytest.mark.real_http_only  # unreachable URLs and which server answers
def test_credentials_file_token_is_only_sent_to_its_server(
    cli: Cli, live_api: LiveApi, data_dir: Path
) -> None:
    write_credentials(data_dir, "http://127.0.0.1:9", OPERATOR_TOKEN)
    # Another URL than the file's (and not the default one): no token from the file.
    result = cli("workflows", "list", env={"WORKLOAD_TOKEN": None})
    assert result.exit_code == ExitCode.UNAUTHORIZED
    assert "unauthenticated" in result.stderr


# -- run-local ---------------------------------------------------------------------------------


def outcome(run: Run, tasks: list[TaskRun], attempts: dict[str, list[Attempt]]) -> Any:
    return (
        run.status,
        [(t.task_key, t.status, t.attempt_count, t.error.code if t.error else None) for t in tasks],
        {key: [a.status for a in items] for key, items in attempts.items()},
    )


@pytest.mark.parametrize("example", ["diamond", "retry", "timeout", "failure"])
def test_run_local_yields_the_servers_statuses(
    example: str, cli: Cli, operator: Client, tmp_path: Path
) -> None:
    definition = str(EXAMPLES / f"{example}.json")
    state_file = tmp_path / "state.json"
    local = cli("run-local", definition, "--state", str(state_file))
    state = json.loads(state_file.read_text(encoding="utf-8"))
    run = Run.model_validate(state["run"])
    tasks = [TaskRun.model_validate(t) for t in state["tasks"]]
    attempts = {k: [Attempt.model_validate(a) for a in v] for k, v in state["attempts"].items()}
    events = [Event.model_validate(e) for e in state["events"]]
    version = Version.model_validate(state["version"])
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))

    created = cli("workflows", "create", definition, "-o", "json")
    assert parse(Version, created.stdout).definition_hash == version.definition_hash
    server_run = operator.wait_for_run(started(cli, version.workflow_id).run_id, timeout=30)
    server_tasks = list(operator.runs.tasks(server_run.run_id))
    server_attempts = {
        t.task_key: list(operator.runs.attempts(server_run.run_id, t.task_key))
        for t in server_tasks
    }
    assert outcome(run, tasks, attempts) == outcome(server_run, server_tasks, server_attempts)
    server_events = [e.type for e in operator.runs.events(server_run.run_id)]
    assert sorted(e.type for e in events) == sorted(server_events)
    expected = {"diamond": 0, "retry": 0, "timeout": 10, "failure": 10}[example]
    assert local.exit_code == expected, local.output


def test_run_local_json_and_rejections(offline_cli: Cli, tmp_path: Path) -> None:
    result = offline_cli(
        "run-local", str(EXAMPLES / "retry.json"), "-o", "json", "--input", '{"doc": 1}'
    )
    assert result.exit_code == 0, result.output
    run = parse(Run, result.stdout)
    assert (run.status, run.input) == (RunStatus.SUCCEEDED, {"doc": 1})
    bad = {"id": "Bad!", "tasks": [{"key": "a", "action": "mock", "depends_on": ["a"]}]}
    rejected = offline_cli("run-local", write(tmp_path, {**bad, "id": "bad"}))
    assert rejected.exit_code == ExitCode.REJECTED
    assert "invalid_definition" in rejected.stderr
    assert "/tasks/0/depends_on" in rejected.stderr
    # No workers in a local run: a remote action is refused up front, not left waiting.
    remote = {
        "id": "remote",
        "tasks": [{"key": "a", "action": "mock"}, {"key": "b", "action": "resize"}],
    }
    refused = offline_cli("run-local", write(tmp_path, remote))
    assert refused.exit_code == ExitCode.REJECTED
    assert "/tasks/1/action" in refused.stderr
    assert "executed by workers" in refused.stderr


# -- terminal, colors, completion, help --------------------------------------------------------


def test_no_color_means_no_ansi_styles(offline_cli: Cli) -> None:
    example = str(EXAMPLES / "diamond.json")
    terminal = {"TTY_COMPATIBLE": "1"}  # rich: behave as on a terminal
    colored = offline_cli("run-local", example, env=terminal)
    assert colored.exit_code == 0, colored.output
    assert ANSI_STYLE.search(colored.stdout)  # the check below can fail
    plain = offline_cli("run-local", example, env={**terminal, "NO_COLOR": "1"})
    assert plain.exit_code == 0, plain.output
    assert "succeeded" in plain.stdout
    assert not ANSI_STYLE.search(plain.stdout)
    assert not ANSI_STYLE.search(plain.stderr)


def test_no_color_in_tables_and_errors(cli: Cli, tmp_path: Path) -> None:
    cli("workflows", "create", write(tmp_path, QUICK))
    env = {"TTY_COMPATIBLE": "1", "NO_COLOR": "1"}
    table = cli("workflows", "list", env=env)
    assert "WORKFLOW" in table.stdout
    assert not ANSI_STYLE.search(table.stdout)
    error = cli("runs", "show", MISSING_RUN, env=env)
    assert "request_id" in error.stderr
    assert not ANSI_STYLE.search(error.stderr)


def test_completion_scripts(offline_cli: Cli) -> None:
    bash = offline_cli("completion", "bash")
    assert bash.exit_code == 0
    assert "complete -o default -F _workload_completion workload" in bash.stdout
    assert "_WORKLOAD_COMPLETE=complete_bash" in bash.stdout
    assert "compdef _workload_completion workload" in offline_cli("completion", "zsh").stdout
    assert "complete --command workload" in offline_cli("completion", "fish").stdout
    assert offline_cli("completion", "tcsh").exit_code == ExitCode.USAGE
    # The script calls the command back with these variables: it must answer with completions.
    workload = Path(sys.executable).parent / "workload"
    env = {**os.environ, "_WORKLOAD_COMPLETE": "complete_bash", "COMP_CWORD": "2"}
    answer = subprocess.run(
        [str(workload)],
        env={**env, "COMP_WORDS": "workload runs wa"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert answer.stdout.split() == ["watch"]
    zsh = subprocess.run(
        [str(workload)],
        env={
            **os.environ,
            "_WORKLOAD_COMPLETE": "complete_zsh",
            "_TYPER_COMPLETE_ARGS": "workload ru",
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert '"runs":' in zsh.stdout, zsh.stderr


def test_one_completion_mechanism(offline_cli: Cli) -> None:
    """``workload completion SHELL`` only: typer's own install/show flags are not offered."""
    help_text = offline_cli("--help", env={"COLUMNS": "200"}).stdout
    assert "completion" in help_text
    assert "--install-completion" not in help_text
    assert "--show-completion" not in help_text
    refused = offline_cli("--install-completion", "bash")
    assert refused.exit_code == ExitCode.USAGE


CLIENT = ("0 ok", "1 unexpected error", "2 usage", "6 server unreachable", "7 request rejected")
RUN_ENDS = ("10 run failed", "11 run canceled")


@pytest.mark.parametrize(
    ("args", "says", "not_said"),
    [
        ((), (*CLIENT, *RUN_ENDS, "12 wait timed out", "13 declined", "4 schema"), ()),
        (("runs", "watch"), (*CLIENT, *RUN_ENDS, "12 wait timed out"), ("13 declined",)),
        (("runs", "start"), (*CLIENT, *RUN_ENDS, "12 wait timed out"), ("13 declined",)),
        (("runs", "rerun"), (*CLIENT, *RUN_ENDS, "12 wait timed out"), ("13 declined",)),
        (("demo",), (*CLIENT, *RUN_ENDS), ("12 wait", "13 declined")),
        (
            ("run-local",),
            ("7 request rejected", *RUN_ENDS),
            ("6 server", "8 unauthorized", "12 wait"),
        ),
        (("approvals", "approve"), (*CLIENT, "13 declined"), ("10 run failed", "12 wait")),
        (("drafts", "create"), (*CLIENT, "12 wait timed out"), ("10 run failed", "13 declined")),
        (("drafts", "approve"), (*CLIENT, "13 declined"), ("10 run failed", "12 wait")),
        (("status",), CLIENT, ("10 run failed", "12 wait", "13 declined")),
        (("cluster",), CLIENT, ("10 run failed", "12 wait", "13 declined")),
    ],
    ids=[
        "workload",
        "runs-watch",
        "runs-start",
        "runs-rerun",
        "demo",
        "run-local",
        "approvals-approve",
        "drafts-create",
        "drafts-approve",
        "status",
        "cluster",
    ],
)
def test_help_documents_the_exit_codes_each_command_can_end_with(
    offline_cli: Cli, args: tuple[str, ...], says: tuple[str, ...], not_said: tuple[str, ...]
) -> None:
    text = " ".join(offline_cli(*args, "--help").stdout.split())
    assert "Exit codes:" in text
    for code in says:
        assert code in text
    for code in not_said:
        assert code not in text


# -- boundaries --------------------------------------------------------------------------------

SERVER_PACKAGES = (
    "workload_domain",
    "workload_engine",
    "workload_api",
    "workload_store_postgres",
    "psycopg",
    "starlette",
    "uvicorn",
)


def test_client_commands_load_no_server_package(offline_cli: Cli) -> None:
    """SPEC §2: the client commands import only the SDK (run-local and serve load lazily)."""
    code = """
import json, sys
from typer.testing import CliRunner
from workload_cli.main import app
runner = CliRunner()
for args in (["runs", "list"], ["workflows", "show", "x"], ["demo"], ["completion", "bash"],
             ["runs", "watch", "--help"], ["approvals", "list"], ["drafts", "show", "x"]):
    result = runner.invoke(app, args, env={"WORKLOAD_URL": "http://127.0.0.1:1"})
    assert result.exit_code in (0, 6), (args, result.output)
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
    env["WORKLOAD_DATA_DIR"] = str(offline_cli.env["WORKLOAD_DATA_DIR"])
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stdout))
    assert "workload_sdk" in loaded
    assert loaded.isdisjoint(SERVER_PACKAGES), loaded.intersection(SERVER_PACKAGES)


# -- workload status (SPEC §12) ------------------------------------------------------------------


def test_status_shows_the_service_on_one_screen(cli: Cli, live_api: LiveApi) -> None:
    body = {
        "id": "waiting",
        "tasks": [{"key": "r", "action": "nobody-serves-this", "queue": "gpu"}],
    }
    assert (
        live_api.operator.post(
            "/api/v1/workflows", json=body, headers={"Idempotency-Key": "status-wf"}
        ).status_code
        == 201
    )
    started = live_api.operator.post(
        "/api/v1/workflows/waiting/versions/1/runs", headers={"Idempotency-Key": "status-run"}
    )
    assert started.status_code == 202
    wait_until(
        lambda: live_api.viewer.get("/api/v1/queues").json()["items"],
        message="the attempt was never queued",
    )
    result = cli("status", "--output", "json")
    assert result.exit_code == 0, result.output
    current = json.loads(result.stdout)
    assert {
        k: current[k] for k in ("status", "role", "epoch", "runs_active", "workers_active")
    } == {
        "status": "ready",
        "role": "leader",
        "epoch": None,
        "runs_active": 1,
        "workers_active": 0,
    }
    assert current["approvals_pending"] == 0
    assert [(q["queue"], q["queued"]) for q in current["queues"]] == [("gpu", 1)]

    plain = cli("status", "--output", "plain")
    assert plain.exit_code == 0, plain.output
    lines = plain.stdout.splitlines()
    assert lines[:6] == [
        "role\tleader",
        "epoch\t",
        "status\tready",
        "runs_active\t1",
        "workers_active\t0",
        "approvals_pending\t0",
    ]
    assert lines[6] == ""
    assert lines[7].split("\t")[:3] == ["QUEUE", "QUEUED", "RUNNING"]
    assert lines[8].split("\t")[:3] == ["gpu", "1", "0"]
    # SPEC §16: the members executing, a coordinator alone owning every shard.
    assert lines[9:11] == ["", "REPLICA\tSHARDS"]
    (member,) = lines[11:]
    name, shards = member.split("\t")
    assert shards == "64"
    assert [(r["replica_id"], r["shards_owned"]) for r in current["replicas"]] == [(name, 64)]
    assert current["shards_total"] == 64
    assert current["replica_id"] is None


def test_status_needs_a_token(cli: Cli) -> None:
    result = cli("status", env={"WORKLOAD_TOKEN": None})
    assert result.exit_code != 0


@pytest.mark.parametrize(
    "args",
    [
        ("runs", "show", "r\udcff"),  # a non-UTF-8 argument, as the shell hands it over
        ("runs", "list", "--workflow", "a\udcff"),
        ("runs", "show", "x", "--token", "tok\u00e9"),  # a header must be ASCII
        ("runs", "show", "x", "--token", "tok\nen"),  # and holds no line break
        ("runs", "list", "--token", "tok\x7f"),
    ],
    ids=["path", "query", "token", "token-newline", "token-delete"],
)
def test_text_that_cannot_be_sent_is_a_usage_error(cli: Cli, args: tuple[str, ...]) -> None:
    # SPEC §8: a usage error (exit 2) with a message, never a traceback (exit 1).
    result = cli(*args)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "cannot be sent" in result.stderr
    assert "Traceback" not in result.output


# -- workload cluster (SPEC §16) -----------------------------------------------------------------


def test_cluster_shows_a_coordinator_alone_owning_every_shard(cli: Cli, live_api: LiveApi) -> None:
    result = cli("cluster", "--output", "json")
    assert result.exit_code == 0, result.output
    current = json.loads(result.stdout)
    assert current["shards_total"] == 64
    (member,) = current["replicas"]
    assert member["shards"] == list(range(64))
    assert member["started_at"] <= member["last_seen_at"]
    assert set(member) == {"replica_id", "shards", "started_at", "last_seen_at"}

    plain = cli("cluster", "--output", "plain")
    assert plain.exit_code == 0, plain.output
    lines = plain.stdout.splitlines()
    assert lines[0] == "64 shards, 1 live replica(s)"
    assert lines[1].split("\t") == ["REPLICA", "SHARDS", "OWNS", "STARTED", "LAST_SEEN"]
    assert lines[2].split("\t")[:3] == [member["replica_id"], "64", "0-63"]


def test_cluster_needs_a_token(cli: Cli) -> None:
    result = cli("cluster", env={"WORKLOAD_TOKEN": None})
    assert result.exit_code != 0


@pytest.mark.parametrize(
    ("shards", "text"),
    [([], ""), ([3], "3"), ([0, 1, 2, 5, 7, 8], "0-2,5,7-8"), ([9, 1, 2], "1-2,9")],
)
def test_shard_lists_are_written_as_ranges(shards: list[int], text: str) -> None:
    assert shard_ranges(shards) == text
