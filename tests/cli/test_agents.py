"""Agents from the command line (SPEC §11): ``runs steps``, usage in ``runs show``, ``demo --agent``
and the example agent workflows.

The service's ``openai:`` models point at the fake OpenAI-compatible server of ``tests/fakes``
for the whole module (``api_settings``), so the OpenAI example runs here too, with no network.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from tests.cli.conftest import Cli
from tests.fakes.openai_server import FakeOpenAI, running_fake_openai
from tests.plugins.live_api import WORKER_TOKEN, LiveApi, settings
from workload_api.settings import Settings
from workload_cli._demo_agent import (
    AGENT_TASK,
    AGENT_WORKFLOW_ID,
    SAMPLE_STATS,
    SAMPLE_TEXT,
    agent_definition,
)
from workload_cli._exit import ExitCode
from workload_sdk import Client, Run, RunStatus, Step, Usage
from workload_worker import Context
from workload_worker.examples import textstats

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
MISSING_RUN = "00000000-0000-7000-8000-000000000000"

NOTE = {"name": "note", "action": "mock", "parameters": {"type": "object"}}
AGENT: dict[str, Any] = {
    "id": "helper",
    "tasks": [
        {"key": "fetch", "action": "mock", "input": {"output": {"topic": "leases"}}},
        {
            "key": "agent",
            "action": "agent",
            "depends_on": ["fetch"],
            "input": {
                "model": "mock",
                "prompt": "Explain {{upstream.fetch}} to {{input.reader}}.",
                "tools": [NOTE],
                "output_schema": {"type": "object", "required": ["answer"]},
                "script": [
                    {
                        "tool_calls": [
                            {"name": "note", "arguments": {"output": {"seen": True}}},
                            {"name": "search", "arguments": {"q": "leases"}},  # not its tool
                        ]
                    },
                    {"content": '{"answer": "a lease fences a worker"}'},
                ],
            },
        },
    ],
}


def parse(model: Any, text: str) -> Any:
    return TypeAdapter(model).validate_json(text)


@pytest.fixture
def fake_model() -> Iterator[FakeOpenAI]:
    with running_fake_openai() as fake:
        yield fake


@pytest.fixture
def api_settings(fake_model: FakeOpenAI) -> Settings:
    return settings(openai_base_url=fake_model.base_url)


def create(cli: Cli, tmp_path: Path, definition: dict[str, Any]) -> None:
    path = tmp_path / f"{definition['id']}.json"
    path.write_text(json.dumps(definition), encoding="utf-8")
    created = cli("workflows", "create", str(path))
    assert created.exit_code == 0, created.output


def finished_run(cli: Cli, workflow_id: str, run_input: dict[str, Any]) -> Run:
    result = cli(
        "runs", "start", workflow_id, "--input", json.dumps(run_input), "--wait", "-o", "json"
    )
    assert result.exit_code == 0, result.output
    run: Run = parse(Run, result.stdout)
    return run


# -- runs steps --------------------------------------------------------------------------------


def test_runs_steps_lists_an_agents_journal(cli: Cli, tmp_path: Path) -> None:
    create(cli, tmp_path, AGENT)
    run = finished_run(cli, "helper", {"reader": "a newcomer"})

    steps = parse(list[Step], cli("runs", "steps", run.run_id, "agent", "-o", "json").stdout)
    assert [(s.attempt, s.sequence, s.kind, s.status) for s in steps] == [
        (1, 1, "model_call", "succeeded"),
        (1, 2, "tool_call", "succeeded"),
        (1, 3, "tool_call", "failed"),  # refused: not one of its tools
        (1, 4, "model_call", "succeeded"),
    ]
    prompt = steps[0].request["messages"][-1]["content"]
    assert prompt == 'Explain {"topic":"leases"} to a newcomer.'

    plain = cli("runs", "steps", run.run_id, "agent")
    assert plain.exit_code == 0, plain.output
    header, *rows = (line.split("\t") for line in plain.stdout.splitlines())
    assert header == [
        "ATTEMPT",
        "SEQ",
        "KIND",
        "STATUS",
        "CALL",
        "WORKER",
        "TOKENS",
        "SECONDS",
        "RESULT",
    ]
    assert [row[:5] for row in rows] == [
        ["1", "1", "model_call", "succeeded", "mock"],
        ["1", "2", "tool_call", "succeeded", "note"],
        ["1", "3", "tool_call", "failed", "search"],
        ["1", "4", "model_call", "succeeded", "mock"],
    ]
    first, note, refused, last = rows
    tokens = steps[0].usage or {}
    assert first[6] == f"{tokens['input_tokens']}/{tokens['output_tokens']}"
    assert first[8] == "calls note, search"
    assert (note[6], note[8]) == ("", '{"seen":true}')
    assert refused[8].startswith("error: unknown tool 'search'")
    assert last[8] == '{"answer": "a lease fences a worker"}'
    assert all(float(row[7]) >= 0 for row in rows)

    limited = cli("runs", "steps", run.run_id, "agent", "--limit", "2", "-o", "json")
    assert [s.sequence for s in parse(list[Step], limited.stdout)] == [1, 2]
    table = cli("runs", "steps", run.run_id, "agent", "-o", "table")
    assert "model_call" in table.stdout
    assert "\t" not in table.stdout


def test_a_task_of_another_action_has_no_steps(cli: Cli, tmp_path: Path) -> None:
    create(cli, tmp_path, AGENT)
    run = finished_run(cli, "helper", {"reader": "you"})
    assert parse(list[Step], cli("runs", "steps", run.run_id, "fetch", "-o", "json").stdout) == []
    assert cli("runs", "steps", run.run_id, "fetch").stdout.splitlines() == [
        "ATTEMPT\tSEQ\tKIND\tSTATUS\tCALL\tWORKER\tTOKENS\tSECONDS\tRESULT"
    ]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ((MISSING_RUN, "agent"), ExitCode.REJECTED, "run_not_found"),
        (("{run}", "nope"), ExitCode.REJECTED, "task_not_found"),
        (("../runs", "agent"), ExitCode.REJECTED, "not_found"),
        (("{run}", "agent", "--limit", "0"), ExitCode.USAGE, "--limit"),
        (("{run}", "agent", "--limit", "-3"), ExitCode.USAGE, "--limit"),
        (("{run}", "agent", "--limit", "many"), ExitCode.USAGE, "--limit"),
        (("{run}",), ExitCode.USAGE, "Missing argument"),
    ],
    ids=["unknown-run", "unknown-task", "path-in-run-id", "zero", "negative", "word", "no-task"],
)
def test_runs_steps_refuses_hostile_arguments(
    cli: Cli, tmp_path: Path, args: tuple[str, ...], code: int, message: str
) -> None:
    create(cli, tmp_path, AGENT)
    run = finished_run(cli, "helper", {"reader": "you"})
    result = cli("runs", "steps", *(a.replace("{run}", run.run_id) for a in args))
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert result.stdout == ""  # no header for a listing that failed


def test_runs_show_has_the_usage(cli: Cli, tmp_path: Path) -> None:
    create(cli, tmp_path, AGENT)
    run = finished_run(cli, "helper", {"reader": "you"})
    assert run.usage is not None
    assert (run.usage.model_calls, run.usage.tool_calls) == (2, 2)
    shown = dict(
        line.split("\t", 1) for line in cli("runs", "show", run.run_id).stdout.splitlines()
    )
    assert Usage.model_validate_json(shown["usage"]) == run.usage  # plain: always, as JSON
    table = cli("runs", "show", run.run_id, "-o", "table", env={"COLUMNS": "200"}).stdout
    assert (
        f"usage             model_calls=2 tool_calls=2 input_tokens={run.usage.input_tokens} "
        f"output_tokens={run.usage.output_tokens}"
    ) in table
    create(cli, tmp_path, {"id": "plain", "tasks": [{"key": "a", "action": "mock"}]})
    other = finished_run(cli, "plain", {})
    assert other.usage == Usage(model_calls=0, tool_calls=0, input_tokens=0, output_tokens=0)
    table = cli("runs", "show", other.run_id, "-o", "table").stdout
    assert "task_counts" in table
    assert "usage" not in table  # a table shows no usage for a run without agents


# -- demo --agent ------------------------------------------------------------------------------


def test_demo_agent_without_a_worker_runs_both_tools_in_process(cli: Cli) -> None:
    # No worker token here: the worker's tool is a mock tool answering the worker's statistics.
    result = cli("demo", "--agent")
    assert result.exit_code == 0, result.output
    assert "both tools run in-process" in result.stderr
    assert f"registered {AGENT_WORKFLOW_ID} version 1" in result.stderr
    lines = result.stdout.splitlines()
    _, word, run_id, status, *_ = lines[-6].split()  # "12:00:00 run <id> succeeded in 0.1s"
    assert (word, status) == ("run", "succeeded")
    header, *rows = (line.split("\t") for line in lines[-5:])
    assert header[:5] == ["ATTEMPT", "SEQ", "KIND", "STATUS", "CALL"]
    assert [(row[2], row[4], row[5]) for row in rows] == [
        ("model_call", "mock", ""),
        ("tool_call", "note", ""),
        ("tool_call", "text_stats", ""),
        ("model_call", "mock", ""),
    ]
    assert "usage: model_calls=2 tool_calls=2 input_tokens=" in result.stderr
    answer = result.stderr.split("answer (checked against output_schema): ")[1].splitlines()[0]
    assert json.loads(answer)["words"] == SAMPLE_STATS["words"]
    assert f"workload runs steps {run_id} {AGENT_TASK}" in result.stderr

    again = cli("demo", "--agent", "-o", "json")  # JSON: the final run only, with its usage
    assert again.exit_code == 0, again.output
    run = parse(Run, again.stdout)
    assert (run.workflow_id, run.version, run.status) == (AGENT_WORKFLOW_ID, 2, "succeeded")
    assert run.input == {"text": SAMPLE_TEXT}
    assert run.usage is not None
    assert (run.usage.model_calls, run.usage.tool_calls) == (2, 2)


def test_demo_agent_takes_no_directory(cli: Cli, tmp_path: Path) -> None:
    result = cli("demo", "--agent", "--directory", str(tmp_path))
    assert result.exit_code == ExitCode.USAGE
    assert "--directory is for the pipeline" in result.stderr


@pytest.mark.real_http_only  # the example worker reaches the service over real HTTP
def test_demo_agent_calls_the_example_workers_tool(cli: Cli, live_api: LiveApi) -> None:
    result = cli("demo", "--agent", "-o", "json", env={"WORKLOAD_WORKER_TOKEN": WORKER_TOKEN})
    assert result.exit_code == 0, result.output
    assert "started the example worker (actions: analyze_text, " in result.stderr
    run = parse(Run, result.stdout)
    assert run.status is RunStatus.SUCCEEDED
    with live_api.sdk() as client:
        steps = list(client.runs.steps(run.run_id, AGENT_TASK))
        task = client.runs.task(run.run_id, AGENT_TASK)
    note, stats = (s for s in steps if s.kind == "tool_call")
    assert (note.request["action"], note.worker_id) == ("mock", None)  # in the control plane
    assert stats.request["action"] == "analyze_text"
    assert stats.worker_id is not None  # claimed and run by the example worker
    assert stats.response == {"output": SAMPLE_STATS}  # what the script's answer says
    assert task.output is not None
    assert task.output["structured"]["words"] == SAMPLE_STATS["words"]
    assert task.usage == run.usage


# -- the example files -------------------------------------------------------------------------


def test_the_example_files_are_the_demos_definition() -> None:
    mock = json.loads((EXAMPLES / "agent_workflow.json").read_text(encoding="utf-8"))
    assert mock == agent_definition("summarize-text")
    openai = json.loads((EXAMPLES / "agent_workflow_openai.json").read_text(encoding="utf-8"))
    assert openai == agent_definition("summarize-text-openai", model="openai:llama3.2")
    assert "script" not in openai["tasks"][0]["input"]


def test_the_scripted_statistics_are_the_workers() -> None:
    computed = textstats.analyze_text(Context.standalone(), {"text": SAMPLE_TEXT})
    assert computed == SAMPLE_STATS


def test_the_openai_example_runs_on_an_openai_compatible_server(
    cli: Cli, fake_model: FakeOpenAI, operator: Client
) -> None:
    definition = json.loads((EXAMPLES / "agent_workflow.json").read_text(encoding="utf-8"))
    note_turn, answer_turn = definition["tasks"][0]["input"]["script"]
    note_only = {"tool_calls": note_turn["tool_calls"][:1]}  # no worker here: no text_stats
    fake_model.queue(note_only, answer_turn)
    created = cli("workflows", "create", str(EXAMPLES / "agent_workflow_openai.json"))
    assert created.exit_code == 0, created.output
    run = finished_run(cli, "summarize-text-openai", {"text": "Leases fence workers."})
    assert run.status is RunStatus.SUCCEEDED
    request = fake_model.chat_requests[0].json()
    assert request["model"] == "llama3.2"
    assert [t["function"]["name"] for t in request["tools"]] == ["note", "text_stats"]
    assert request["messages"][-1]["content"].endswith("Text: Leases fence workers.")
    task = operator.runs.task(run.run_id, "summarize")
    assert task.output is not None
    assert task.output["structured"]["keywords"] == ["workflows", "leases", "journal"]


@pytest.fixture
def operator(live_api: LiveApi) -> Iterator[Client]:
    with live_api.sdk() as client:
        yield client
