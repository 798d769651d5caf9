"""``workflows apply FILE|MODULE[:ATTRIBUTE]``, ``runs start`` of the latest version, and the
run's output printed by ``runs start --wait`` and ``runs show`` (SPEC §8, §17).

Against the live API (in-process). Modules are written in a temporary directory that becomes
the working directory, as a user runs ``workload workflows apply pipelines`` next to their code.
"""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter
from typer.testing import Result

from tests.cli.conftest import Cli
from tests.plugins.live_api import VIEWER_TOKEN, LiveApi
from workload_cli._exit import ExitCode
from workload_sdk import APIConnectionError, Client, Run, RunStatus
from workload_sdk._resources import Workflows
from workload_sdk._run_resources import Runs

ETL: dict[str, Any] = {
    "id": "etl",
    "description": "fetch, then count and summarize",
    "tasks": [
        {"key": "fetch", "action": "mock", "input": {"output": {"rows": 3}}},
        {"key": "count", "action": "mock", "depends_on": ["fetch"], "input": {"output": {"n": 3}}},
        {
            "key": "summarize",
            "action": "mock",
            "depends_on": ["fetch"],
            "input": {"output": {"words": 42}},
        },
    ],
}
ETL_OUTPUT = {"count": {"n": 3}, "summarize": {"words": 42}}

# A module as a user writes it (SPEC §17): a worker, and workflows built next to it.
PIPELINES = textwrap.dedent(
    """
    from workload_worker import Worker, Workflow

    worker = Worker(queues=["etl"])

    @worker.action("shout")
    def shout(ctx, input):
        return {"text": str(input).upper()}

    etl = Workflow("etl", description="fetch, then count and summarize")
    fetch = etl.task("fetch", "mock", input={"output": {"rows": 3}})
    etl.task("count", "mock", depends_on=[fetch], input={"output": {"n": 3}})
    etl.task("summarize", "mock", depends_on=[fetch], input={"output": {"words": 42}})

    nightly = Workflow("nightly")
    nightly.task("shout", shout)

    also_etl = etl  # the same object twice: applied once
    both = [etl, nightly]
"""
)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, f"exit {result.exit_code}\n{result.output}"
    return result


@pytest.fixture
def operator(live_api: LiveApi) -> Iterator[Client]:
    with live_api.sdk() as client:
        yield client


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """Write a module with a fresh name in the working directory; its name."""
    monkeypatch.chdir(tmp_path)
    names: list[str] = []

    def write(source: str) -> str:
        name = f"flows_{uuid.uuid4().hex[:10]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        names.append(name)
        importlib.invalidate_caches()
        return name

    yield write
    for name in names:
        sys.modules.pop(name, None)


def lines(result: Result) -> list[str]:
    return result.stdout.splitlines()


# -- apply ---------------------------------------------------------------------------------------


def test_apply_a_file_creates_then_answers_unchanged_then_the_next_version(
    cli: Cli, tmp_path: Path
) -> None:
    path = tmp_path / "etl.json"
    path.write_text(json.dumps(ETL), encoding="utf-8")
    assert lines(ok(cli("workflows", "apply", str(path)))) == ["created etl version 1"]
    assert lines(ok(cli("workflows", "apply", str(path)))) == ["unchanged etl version 1"]
    path.write_text(json.dumps({**ETL, "description": "v2"}), encoding="utf-8")
    again = ok(cli("workflows", "apply", str(path), "-o", "json"))
    assert json.loads(again.stdout) == [{"workflow_id": "etl", "version": 2, "created": True}]


def test_apply_reads_standard_input(cli: Cli) -> None:
    created = ok(cli("workflows", "apply", "-", input=json.dumps(ETL)))
    assert lines(created) == ["created etl version 1"]
    same = ok(cli("workflows", "apply", "-", "-o", "json", input=json.dumps(ETL)))
    assert json.loads(same.stdout) == [{"workflow_id": "etl", "version": 1, "created": False}]


def test_apply_a_module_applies_every_workflow_once_and_again_changes_nothing(
    cli: Cli, module: Callable[[str], str], operator: Client
) -> None:
    name = module(PIPELINES)
    first = ok(cli("workflows", "apply", name))
    assert lines(first) == ["created etl version 1", "created nightly version 1"]
    again = ok(cli("workflows", "apply", name, "-o", "json"))
    assert json.loads(again.stdout) == [
        {"workflow_id": "etl", "version": 1, "created": False},
        {"workflow_id": "nightly", "version": 1, "created": False},
    ]
    # The builder's definition is what the server stored (normalized alike).
    nightly = operator.versions.get("nightly", 1).definition
    assert [(t["key"], t["action"]) for t in nightly["tasks"]] == [("shout", "shout")]
    assert operator.versions.get("etl", 1).definition["tasks"][1]["depends_on"] == ["fetch"]


@pytest.mark.parametrize(
    ("attribute", "expected"),
    [
        pytest.param("nightly", ["created nightly version 1"], id="one-workflow"),
        pytest.param("both", ["created etl version 1", "created nightly version 1"], id="a-list"),
    ],
)
def test_apply_module_attribute(
    cli: Cli, module: Callable[[str], str], attribute: str, expected: list[str]
) -> None:
    name = module(PIPELINES)
    assert lines(ok(cli("workflows", "apply", f"{name}:{attribute}"))) == expected


def test_a_module_that_prints_as_it_loads_keeps_json_output_clean(
    cli: Cli, module: Callable[[str], str]
) -> None:
    name = module(PIPELINES + "\nprint('loading pipelines')\n")
    result = ok(cli("workflows", "apply", f"{name}:etl", "-o", "json"))
    assert json.loads(result.stdout) == [{"workflow_id": "etl", "version": 1, "created": True}]
    assert "loading pipelines" in result.stderr


BAD_MODULES = [
    (
        "module-does-not-import",
        "import no_such_dependency_here\n",
        "{name}",
        "does not import: ModuleNotFoundError: No module named 'no_such_dependency_here' (",
    ),
    (
        "module-raises",
        "raise RuntimeError('the config is missing')\n",
        "{name}",
        "does not import: RuntimeError: the config is missing (",
    ),
    ("module-syntax-error", "def broken(:\n", "{name}", "does not import: SyntaxError: "),
    (
        "builder-refuses",
        "from workload_worker import Workflow\nw = Workflow('x')\nw.task('a', 'mock')\n"
        "w.task('a', 'mock')\n",
        "{name}",
        "task key 'a' is used already in workflow 'x'",
    ),
    ("no-such-module", "", "no_such_module_anywhere", "no module named 'no_such_module_anywhere'"),
    ("no-attribute", PIPELINES, "{name}:nothing", "has no attribute 'nothing'"),
    ("a-worker", PIPELINES, "{name}:worker", "is a Worker, not a workload_worker.Workflow"),
    ("a-dict", PIPELINES + "\nd = {}\n", "{name}:d", "is a dict, not a workload_worker.Workflow"),
    (
        "a-list-with-a-stranger",
        PIPELINES + "\nmixed = [etl, 'nightly']\n",
        "{name}:mixed",
        "is a list, not a workload_worker.Workflow",
    ),
    ("empty-list", PIPELINES + "\nnone = []\n", "{name}:none", "is a list, not a"),
    ("no-workflows", "x = 1\n", "{name}", "holds no workload_worker.Workflow"),
    (
        "an-id-twice",
        PIPELINES + "\nagain = Workflow('etl')\n",
        "{name}",
        "workflow id(s) etl defined twice",
    ),
    ("empty-module-name", PIPELINES, ":etl", "names no module"),
]


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [case[1:] for case in BAD_MODULES],
    ids=[case[0] for case in BAD_MODULES],
)
def test_a_bad_module_target_exits_2_and_writes_nothing(
    cli: Cli,
    module: Callable[[str], str],
    operator: Client,
    source: str,
    target: str,
    message: str,
) -> None:
    name = module(source)
    result = cli("workflows", "apply", target.format(name=name))
    assert result.exit_code == ExitCode.USAGE, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""
    assert list(operator.workflows.list()) == []


BAD_FILES = [
    ("not-json", "etl.json", "this is not JSON", "etl.json is not valid JSON"),
    ("json-but-not-an-object", "etl.json", "[1, 2]", "must hold a JSON object"),
    ("duplicate-keys", "etl.json", '{"id": "a", "id": "b"}', "duplicate key 'id'"),
    ("nan", "etl.json", '{"id": NaN}', "NaN is not JSON"),
    ("missing", None, "", "cannot read missing.json"),
    ("a-python-file", "etl.py", "x = 1", "is a Python file: name its module instead"),
    ("not-utf8", "etl.json", b"\xff\xfe{", "cannot read etl.json"),
    # apply names the workflow by its id (PUT /workflows/{id}): without one, nothing to name.
    ("no-id", "etl.json", '{"tasks": [{"key": "a", "action": "mock"}]}', 'has no "id"'),
    ("id-not-a-string", "etl.json", '{"id": 7, "tasks": []}', 'has no "id"'),
    ("empty-id", "etl.json", '{"id": "", "tasks": []}', 'has no "id"'),
]


@pytest.mark.parametrize(
    ("filename", "content", "message"),
    [case[1:] for case in BAD_FILES],
    ids=[case[0] for case in BAD_FILES],
)
def test_a_bad_file_exits_2_and_writes_nothing(
    cli: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    operator: Client,
    filename: str | None,
    content: str | bytes,
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    target = filename or "missing.json"
    if filename is not None:
        data = content if isinstance(content, bytes) else content.encode()
        (tmp_path / filename).write_bytes(data)
    result = cli("workflows", "apply", target)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert message in result.stderr
    assert list(operator.workflows.list()) == []


def test_standard_input_that_is_not_json_exits_2(cli: Cli, operator: Client) -> None:
    result = cli("workflows", "apply", "-", input="{not json")
    assert result.exit_code == ExitCode.USAGE
    assert "standard input is not valid JSON" in result.stderr
    assert list(operator.workflows.list()) == []


def test_the_server_refusing_a_definition_is_exit_7_and_names_it(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    bad = {"id": "bad", "tasks": [{"key": "a", "action": "mock", "depends_on": ["a"]}]}
    path.write_text(json.dumps(bad), encoding="utf-8")
    result = cli("workflows", "apply", str(path))
    assert result.exit_code == ExitCode.REJECTED
    assert f"{path}: not applied" in result.stderr
    assert "/tasks/0/depends_on" in result.stderr  # every problem listed


def test_a_refused_workflow_of_a_module_does_not_stop_the_others(
    cli: Cli, module: Callable[[str], str], operator: Client
) -> None:
    # SPEC §17: each definition is applied and its outcome printed; the refusal's exit code.
    name = module(
        """
        from workload_worker import Workflow

        first = Workflow("first")
        first.task("a", "mock")
        looped = Workflow("looped")
        looped.task("a", "mock", depends_on=["a"])
        big = Workflow("big")
        big.task("a", "mock", input={"blob": "x" * 1_100_000})
        last = Workflow("last")
        last.task("a", "mock")
        """
    )
    result = cli("workflows", "apply", name, "-o", "json")
    assert result.exit_code == ExitCode.REJECTED, result.output
    assert json.loads(result.stdout) == [
        {"workflow_id": "first", "version": 1, "created": True},
        {"workflow_id": "last", "version": 1, "created": True},
    ]
    assert "looped" in result.stderr
    assert "big" in result.stderr
    assert "(big): not applied" in result.stderr
    assert '"code": "payload_too_large"' in result.stderr
    assert result.stderr.count("not applied") == 2
    assert "/tasks/0/depends_on" in result.stderr
    assert sorted(w.workflow_id for w in operator.workflows.list()) == ["first", "last"]


def test_no_answer_stops_apply_and_json_still_says_what_was_applied(
    cli: Cli, module: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name = module(PIPELINES)
    real = Workflows.apply
    calls: list[str] = []

    def apply_once_then_lose_the_server(self: Workflows, definition: Any, **kwargs: Any) -> Any:
        calls.append(definition["id"])
        if len(calls) > 1:
            raise APIConnectionError("no answer (the test's)", idempotency_key="key-1")
        return real(self, definition, **kwargs)

    monkeypatch.setattr(Workflows, "apply", apply_once_then_lose_the_server)
    result = cli("workflows", "apply", name, "-o", "json")
    assert result.exit_code == ExitCode.UNREACHABLE, result.output
    assert calls == ["etl", "nightly"]  # stopped there: nothing after would be answered either
    assert json.loads(result.stdout) == [{"workflow_id": "etl", "version": 1, "created": True}]
    assert "nightly): not applied" in result.stderr


def test_a_lost_answer_says_the_key_only_to_a_command_that_takes_one(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def lose_the_answer(self: object, *args: Any, **kwargs: Any) -> Any:
        raise APIConnectionError("no answer (the test's)", idempotency_key="key-2")

    monkeypatch.setattr(Runs, "start", lose_the_answer)
    monkeypatch.setattr(Workflows, "apply", lose_the_answer)
    started = cli("runs", "start", "etl", "--version", "1")
    assert started.exit_code == ExitCode.UNREACHABLE, started.output
    assert "idempotency key: key-2 (retry with --idempotency-key" in started.stderr
    path = tmp_path / "etl.json"
    path.write_text(json.dumps(ETL), encoding="utf-8")
    applied = cli("workflows", "apply", str(path))
    assert applied.exit_code == ExitCode.UNREACHABLE, applied.output
    assert "no answer (the test's)" in applied.stderr
    # apply has no --idempotency-key to repeat the write with (it is idempotent by content).
    assert "--idempotency-key" not in applied.stderr


def test_a_viewer_cannot_apply(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "etl.json"
    path.write_text(json.dumps(ETL), encoding="utf-8")
    result = cli("workflows", "apply", str(path), env={"WORKLOAD_TOKEN": VIEWER_TOKEN})
    assert result.exit_code == ExitCode.UNAUTHORIZED
    assert "(403 forbidden)" in result.stderr


# -- runs: the latest version, and the output ----------------------------------------------------


def test_apply_a_module_then_start_with_input_and_wait_prints_the_output(
    cli: Cli, module: Callable[[str], str]
) -> None:
    name = module(PIPELINES)
    assert lines(ok(cli("workflows", "apply", name)))[0] == "created etl version 1"
    assert lines(ok(cli("workflows", "apply", name)))[0] == "unchanged etl version 1"
    waited = ok(
        cli("runs", "start", "etl", "--input", '{"doc": 7}', "--wait", "--interval", "0.05")
    )
    # Progress lines first, then the output: JSON on one line in plain text.
    assert json.loads(lines(waited)[-1]) == ETL_OUTPUT
    assert " succeeded in " in lines(waited)[-2]
    assert "of etl version 1" in waited.stderr


def test_start_runs_the_latest_version_unless_told(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "etl.json"
    path.write_text(json.dumps(ETL), encoding="utf-8")
    ok(cli("workflows", "apply", str(path)))
    path.write_text(json.dumps({**ETL, "description": "v2"}), encoding="utf-8")
    ok(cli("workflows", "apply", str(path)))
    latest = ok(cli("runs", "start", "etl", "-o", "json"))
    assert TypeAdapter(Run).validate_json(latest.stdout).version == 2
    assert "of etl version 2" in latest.stderr
    pinned = ok(cli("runs", "start", "etl", "--version", "1", "-o", "json"))
    assert TypeAdapter(Run).validate_json(pinned.stdout).version == 1


def test_start_wait_json_carries_the_output(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "etl.json"
    path.write_text(json.dumps(ETL), encoding="utf-8")
    ok(cli("workflows", "apply", str(path)))
    waited = ok(cli("runs", "start", "etl", "--wait", "--interval", "0.05", "-o", "json"))
    run = TypeAdapter(Run).validate_json(waited.stdout)  # one document: the final run
    assert run.status is RunStatus.SUCCEEDED
    assert run.output == ETL_OUTPUT
    quiet = ok(cli("runs", "start", "etl", "--wait", "--quiet", "--interval", "0.05"))
    assert len(lines(quiet)) == 1  # the run id only: no output


def test_show_prints_the_output(cli: Cli, tmp_path: Path, operator: Client) -> None:
    path = tmp_path / "etl.json"
    path.write_text(json.dumps(ETL), encoding="utf-8")
    ok(cli("workflows", "apply", str(path)))
    run = operator.runs.start("etl")
    assert operator.runs.result(run.run_id, timeout=30, poll_interval=0.05) == ETL_OUTPUT

    plain = ok(cli("runs", "show", run.run_id, "-o", "plain"))
    assert f"output\t{json.dumps(ETL_OUTPUT, separators=(',', ':'))}" in lines(plain)
    shown = ok(cli("runs", "show", run.run_id, "-o", "json"))
    assert json.loads(shown.stdout)["output"] == ETL_OUTPUT
    table = ok(cli("runs", "show", run.run_id, "-o", "table"))
    assert '"words": 42' in table.stdout  # pretty JSON in a table


def test_a_failed_run_prints_no_output(cli: Cli, tmp_path: Path) -> None:
    failing = {
        "id": "fails",
        "tasks": [{"key": "a", "action": "mock", "input": {"fail_always": True}}],
    }
    path = tmp_path / "fails.json"
    path.write_text(json.dumps(failing), encoding="utf-8")
    ok(cli("workflows", "apply", str(path)))
    waited = cli("runs", "start", "fails", "--wait", "--interval", "0.05")
    assert waited.exit_code == ExitCode.RUN_FAILED
    assert "{" not in waited.stdout
