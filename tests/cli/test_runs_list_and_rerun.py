"""``workload runs list`` newest first (20 by default, ``--all``, ``--order``) and ``workload
runs rerun`` (SPEC §8, amended 2026-12-01), against the live API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import TypeAdapter

from tests.cli.conftest import Cli
from tests.plugins.live_api import OPERATOR_TOKEN, LiveApi
from workload_cli._exit import ExitCode
from workload_sdk import Client, Run, RunStatus

QUICK: dict[str, Any] = {"id": "quick", "tasks": [{"key": "a", "action": "mock"}]}


@pytest.fixture
def operator(live_api: LiveApi) -> Iterator[Client]:
    with live_api.sdk(OPERATOR_TOKEN) as client:
        yield client


def runs_of(cli: Cli, *args: str) -> list[str]:
    result = cli("runs", "list", *args, "-o", "json")
    assert result.exit_code == 0, result.output
    return [run.run_id for run in TypeAdapter(list[Run]).validate_json(result.stdout)]


def test_runs_list_shows_the_newest_20_unless_told_otherwise(cli: Cli, operator: Client) -> None:
    operator.workflows.create(QUICK)
    started = [operator.runs.start("quick", version=1).run_id for _ in range(25)]
    newest_first = started[::-1]

    assert runs_of(cli) == newest_first[:20]
    assert runs_of(cli, "--all") == newest_first
    assert runs_of(cli, "--limit", "3") == newest_first[:3]
    assert runs_of(cli, "--order", "asc", "--limit", "3") == started[:3]
    assert runs_of(cli, "--order", "asc", "--all") == started
    assert runs_of(cli, "--limit", "200") == newest_first
    plain = cli("runs", "list").stdout.splitlines()  # a table's rows, newest first
    assert [row.split("\t")[0] for row in plain[1:]] == newest_first[:20]


@pytest.mark.parametrize(
    "args",
    [
        ("--all", "--limit", "3"),
        ("--order", "newest"),
        ("--limit", "0"),
        ("--since", "yesterday"),
        ("--since", "1y"),
        ("--since", "2026-12-01"),
        ("--since", "2026-12-01T00:00:00"),  # no offset
        ("--since", "999999w"),  # before year 1
        ("--since", ""),
    ],
)
def test_bad_listing_options_are_usage_errors(cli: Cli, args: tuple[str, ...]) -> None:
    result = cli("runs", "list", *args)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "Traceback" not in result.output


def test_rerun_starts_the_same_version_with_the_same_input(
    cli: Cli, operator: Client, live_api: LiveApi
) -> None:
    operator.workflows.create(QUICK)
    first = operator.runs.start("quick", {"doc": 7, "tags": ["a"]}, version=1)
    operator.workflows.apply({**QUICK, "description": "v2"})  # a newer version exists

    result = cli("runs", "rerun", first.run_id, "-o", "json")
    assert result.exit_code == 0, result.output
    again = TypeAdapter(Run).validate_json(result.stdout)
    assert again.run_id != first.run_id
    assert (again.workflow_id, again.version, again.input) == ("quick", 1, first.input)
    assert f"rerunning {first.run_id} (version 1)" in result.stderr

    latest = cli("runs", "rerun", first.run_id, "--latest", "-o", "json")
    assert latest.exit_code == 0, latest.output
    newest = TypeAdapter(Run).validate_json(latest.stdout)
    assert (newest.version, newest.input) == (2, first.input)
    assert f"rerunning {first.run_id} (version 2)" in latest.stderr  # the new run's version

    quiet = cli("runs", "rerun", again.run_id, "-q")
    assert quiet.exit_code == 0, quiet.output
    (run_id,) = quiet.stdout.split()
    assert "rerunning" not in quiet.stderr  # --quiet prints the run id alone, as `runs start`
    assert operator.runs.get(run_id).input == first.input

    waited = cli("runs", "rerun", first.run_id, "--wait", "-o", "json")
    assert waited.exit_code == ExitCode.OK, waited.output
    finished = TypeAdapter(Run).validate_json(waited.stdout)
    assert finished.status is RunStatus.SUCCEEDED
    assert finished.run_id not in (first.run_id, again.run_id, newest.run_id, run_id)
    # Every rerun is a run of its own: the first run and its reruns, newest first.
    listed = runs_of(cli, "--all")
    assert listed[-1] == first.run_id
    assert len(listed) == 5
    live_api.wait_for_run(first.run_id)


def test_rerun_of_a_missing_run_is_rejected(cli: Cli) -> None:
    result = cli("runs", "rerun", "00000000-0000-7000-8000-000000000000")
    assert result.exit_code == ExitCode.REJECTED, result.output
    assert "run_not_found" in result.output or "not found" in result.output
