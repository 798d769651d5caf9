"""``workload worker``, ``workload workers list`` and ``workload queues list``, with no server.

``workers`` and ``queues`` talk to an ``httpx.MockTransport``; ``worker`` runs a Worker of a
module written for the test against the worker tests' fake control plane (leases and all),
handed to the CLI as the root context's ``obj`` like any in-process transport.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter

from tests.cli.conftest import Cli
from tests.sdk.fakes import QUEUE, WORKER, page
from tests.waiting import wait_until
from tests.worker.fake_server import BASE_URL, WORKER_TOKEN, FakeControlPlane
from workload_cli._exit import ExitCode
from workload_sdk import (
    Forbidden,
    InvalidRequest,
    ProblemItem,
    QueueStats,
    WorkerInfo,
    WorkloadError,
    config,
)
from workload_worker import WorkflowApplyError

FILE_URL = "http://file.test:7000"


def ok(result: Any) -> Any:
    assert result.exit_code == 0, result.output
    return result


# -- workers list, queues list ------------------------------------------------------------------


def _listings(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/api/v1/queues":
        return httpx.Response(200, json={"items": [QUEUE, {**QUEUE, "queue": "gpu"}]})
    return httpx.Response(
        200, json=page([WORKER, {**WORKER, "worker_id": "w-2", "status": "gone"}])
    )


@pytest.fixture
def listing_cli(offline_cli: Cli) -> Cli:
    offline_cli.transport = httpx.MockTransport(_listings)
    return offline_cli


def test_workers_list_prints_workers_in_every_format(listing_cli: Cli) -> None:
    as_json = ok(listing_cli("workers", "list", "-o", "json", "--url", BASE_URL, "--token", "v"))
    workers = TypeAdapter(list[WorkerInfo]).validate_json(as_json.stdout)
    assert [(w.worker_id, w.status) for w in workers] == [("w-1", "active"), ("w-2", "gone")]
    plain = ok(listing_cli("-o", "plain", "workers", "list")).stdout.splitlines()
    assert plain[0].split("\t") == [
        "WORKER",
        "STATUS",
        "IN_FLIGHT",
        "QUEUES",
        "ACTIONS",
        "FIRST_SEEN",
        "LAST_SEEN",
    ]
    assert plain[1].split("\t")[:5] == ["w-1", "active", "2", "default", "resize"]
    table = ok(listing_cli("workers", "list", "-o", "table")).stdout
    assert "w-2" in table
    assert "gone" in table


def test_queues_list_prints_queues_in_every_format(listing_cli: Cli) -> None:
    as_json = ok(listing_cli("queues", "list", "--output", "json"))
    queues = TypeAdapter(list[QueueStats]).validate_json(as_json.stdout)
    assert [q.queue for q in queues] == ["default", "gpu"]
    plain = ok(listing_cli("queues", "list", "-o", "plain")).stdout.splitlines()
    assert plain == [
        "QUEUE\tQUEUED\tRUNNING\tOLDEST_QUEUED_S",
        "default\t3\t2\t1.5",
        "gpu\t3\t2\t1.5",
    ]


# -- workload worker: the module, the options ---------------------------------------------------


@dataclass
class WorkerModule:
    """A module written for one test, holding a Worker ``worker`` that echoes its input."""

    name: str
    module: ModuleType
    requests: list[httpx.Request] = field(default_factory=list)

    @property
    def target(self) -> str:
        return f"{self.name}:worker"

    def stop_on_first_claim(self, request: httpx.Request) -> httpx.Response:
        """A transport handler: record the claim, stop the worker, answer no work."""
        self.requests.append(request)
        self.module.worker.stop()
        return httpx.Response(200, json={"attempts": []})

    def last(self) -> tuple[str, str | None]:
        """Where the last request went and its bearer token."""
        request = self.requests[-1]
        auth = request.headers.get("authorization")
        url = f"{request.url.scheme}://{request.url.host}:{request.url.port}"
        return url, auth.removeprefix("Bearer ") if auth else None


@pytest.fixture
def make_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., WorkerModule]]:
    """Write ``wk_<random>.py`` in a directory that becomes the working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    names: list[str] = []

    def make(worker_args: str = "", body: str = "") -> WorkerModule:
        name = f"wk_{uuid.uuid4().hex[:10]}"
        source = f"""
            from workload_worker import Worker

            worker = Worker(
                worker_id="cli-test", wait_seconds=0.2, grace_seconds=5,
                backoff_initial_seconds=0.01, backoff_max_seconds=0.05, {worker_args}
            )

            @worker.action("echo")
            def echo(ctx, input):
                return {{"echo": input, "key": ctx.idempotency_key}}
            {body}
        """
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        names.append(name)
        return WorkerModule(name, importlib.import_module(name))

    yield make
    for name in names:
        sys.modules.pop(name, None)


def test_workload_worker_runs_the_modules_worker_with_the_overrides(
    offline_cli: Cli, make_module: Callable[..., WorkerModule], caplog: pytest.LogCaptureFixture
) -> None:
    mod = make_module()
    fake = FakeControlPlane()
    offline_cli.transport = fake.transport
    attempt = fake.add("echo", {"n": 1}, queue="special")
    results: list[Any] = []
    argv = ["worker", mod.target, "-q", "special", "--queue", "other", "--concurrency", "3"]
    argv += ["--url", BASE_URL, "--token", WORKER_TOKEN]
    thread = threading.Thread(target=lambda: results.append(offline_cli(*argv)))
    thread.start()
    try:
        wait_until(lambda: attempt.status == "succeeded", message="the attempt ran")
    finally:
        wait_until(lambda: mod.module.worker.is_serving or results, message="serving")
        mod.module.worker.stop()
        thread.join(15)
    [result] = results
    assert result.exit_code == 0, result.output
    assert attempt.output == {"echo": {"n": 1}, "key": f"run-1:{attempt.task_key}"}
    claim = fake.claims[0]
    assert (claim["queues"], claim["actions"], claim["max_attempts"]) == (
        ["special", "other"],
        ["echo"],
        3,
    )
    assert f"worker cli-test: {BASE_URL} (token from --token)" in result.stderr
    # The worker logs (on stderr when the application has not set up logging; pytest has).
    assert f"attempt {attempt.attempt_id}" in caplog.text


def test_a_module_alone_names_its_only_worker(
    offline_cli: Cli, make_module: Callable[..., WorkerModule]
) -> None:
    mod = make_module()
    offline_cli.transport = httpx.MockTransport(mod.stop_on_first_claim)
    ok(offline_cli("worker", mod.name, "--token", "t"))
    assert mod.requests[0].url.path == "/api/v1/workers/cli-test/claim"


BAD_TARGETS = [
    ("no-module", "no_such_module_here:worker", "no module named 'no_such_module_here'"),
    ("no-attribute", "{name}:nothing", "has no attribute 'nothing'"),
    ("not-a-worker", "{name}:Worker", "is a type, not a workload_worker.Worker"),
    ("empty", ":worker", "names no module"),
    ("two-workers", "{name}", "holds 2 Worker objects"),
]


@pytest.mark.parametrize(
    ("target", "message"), [c[1:] for c in BAD_TARGETS], ids=[c[0] for c in BAD_TARGETS]
)
def test_a_target_that_is_not_a_worker_is_a_usage_error(
    offline_cli: Cli, make_module: Callable[..., WorkerModule], target: str, message: str
) -> None:
    mod = make_module(body="other = Worker()")
    result = offline_cli("worker", target.format(name=mod.name), "--token", "t")
    assert result.exit_code == ExitCode.USAGE, result.output
    assert message in result.stderr


def test_without_a_worker_token_it_says_where_to_put_one(
    offline_cli: Cli, make_module: Callable[..., WorkerModule]
) -> None:
    mod = make_module()
    # An operator's token is not a worker's: WORKLOAD_TOKEN is never used by `workload worker`.
    result = offline_cli("worker", mod.target, env={"WORKLOAD_TOKEN": "operator"})
    assert result.exit_code == ExitCode.USAGE
    assert "no worker token: give --token, set WORKLOAD_WORKER_TOKEN" in result.stderr


def test_settings_the_worker_refuses_are_usage_errors(
    offline_cli: Cli, make_module: Callable[..., WorkerModule]
) -> None:
    mod = make_module()
    result = offline_cli("worker", mod.target, "--queue", "Not A Queue", "--token", "t")
    assert result.exit_code == ExitCode.USAGE
    assert "queue 'Not A Queue' does not match" in result.stderr
    bad_level = offline_cli("worker", mod.target, "--log-level", "LOUD", "--token", "t")
    assert bad_level.exit_code == ExitCode.USAGE


REFUSALS = [
    (
        "invalid",
        InvalidRequest(
            "the definition is invalid",
            status=400,
            code="invalid_definition",
            errors=[ProblemItem(path="/tasks", message="must not be empty")],
        ),
        ExitCode.REJECTED,
        "/tasks: must not be empty",
    ),
    ("forbidden", Forbidden("no", status=403, code="forbidden"), ExitCode.UNAUTHORIZED, "403"),
]


@pytest.mark.parametrize(
    ("cause", "code", "said"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_a_workflow_refused_at_start_is_said_with_its_problems_and_its_exit_code(
    offline_cli: Cli,
    make_module: Callable[..., WorkerModule],
    monkeypatch: pytest.MonkeyPatch,
    cause: WorkloadError,
    code: ExitCode,
    said: str,
) -> None:
    # SPEC §8: a refusal exits with the problem's code and detail, as `workflows apply` does
    # (the worker raising it for apply_on_start is tests/worker/test_apply_on_start.py's).
    mod = make_module()

    def refused() -> None:
        raise WorkflowApplyError("etl", cause)

    monkeypatch.setattr(mod.module.worker, "run", refused)
    result = offline_cli("worker", mod.target, "--token", "t")
    assert result.exit_code == code, result.output
    assert "workflow 'etl' not applied" in result.stderr
    assert said in result.stderr
    assert "--idempotency-key" not in result.stderr


# -- workload worker: where it connects --------------------------------------------------------


def write_credentials(data_dir: Path, url: str = FILE_URL, **tokens: str) -> None:
    document = {"url": url, "operator_token": "op", "viewer_token": "view", **tokens}
    (data_dir / "credentials.json").write_text(json.dumps(document), encoding="utf-8")


CONNECTIONS: list[tuple[str, str, list[str], dict[str, str], tuple[str, str]]] = [
    # id, the Worker's arguments in code, argv, environment, (server, token) expected
    ("file-alone", "", [], {}, (FILE_URL, "file-worker")),
    (
        "env-wins-over-file",
        "",
        [],
        {"WORKLOAD_URL": "http://env.test:1", "WORKLOAD_WORKER_TOKEN": "env-worker"},
        ("http://env.test:1", "env-worker"),
    ),
    ("env-token-file-url", "", [], {"WORKLOAD_WORKER_TOKEN": "env"}, (FILE_URL, "env")),
    (
        "operator-token-ignored",
        "",
        [],
        {"WORKLOAD_TOKEN": "operator"},
        (FILE_URL, "file-worker"),
    ),
    (
        "code-wins-over-env",
        'url="http://code.test:2", token="code"',
        [],
        {"WORKLOAD_URL": "http://env.test:1", "WORKLOAD_WORKER_TOKEN": "env"},
        ("http://code.test:2", "code"),
    ),
    (
        "flags-win-over-code",
        'url="http://code.test:2", token="code"',
        ["--url", "http://flag.test:3", "--token", "flag"],
        {"WORKLOAD_WORKER_TOKEN": "env"},
        ("http://flag.test:3", "flag"),
    ),
    (
        "flags-before-the-command",
        "",
        ["--url", "http://flag.test:3", "--token", "flag", "@"],
        {"WORKLOAD_WORKER_TOKEN": "env"},
        ("http://flag.test:3", "flag"),
    ),
    (
        "default-url-gets-the-file-token",
        "",
        ["--url", config.DEFAULT_BASE_URL],
        {},
        ("http://127.0.0.1:8080", "file-worker"),
    ),
]


@pytest.mark.parametrize(
    ("code_args", "argv", "env", "expected"),
    [c[1:] for c in CONNECTIONS],
    ids=[c[0] for c in CONNECTIONS],
)
def test_where_the_worker_connects(
    offline_cli: Cli,
    make_module: Callable[..., WorkerModule],
    data_dir: Path,
    code_args: str,
    argv: list[str],
    env: dict[str, str],
    expected: tuple[str, str],
) -> None:
    write_credentials(data_dir, worker_token="file-worker")
    mod = make_module(code_args)
    offline_cli.transport = httpx.MockTransport(mod.stop_on_first_claim)
    if "@" in argv:  # the options go before the command
        before = argv[: argv.index("@")]
        ok(offline_cli(*before, "worker", mod.target, env=env))
    else:
        ok(offline_cli("worker", mod.target, *argv, env=env))
    assert mod.last() == expected


def test_the_file_token_is_not_sent_to_another_server(
    offline_cli: Cli, make_module: Callable[..., WorkerModule], data_dir: Path
) -> None:
    write_credentials(data_dir, worker_token="file-worker")
    mod = make_module()
    result = offline_cli("worker", mod.target, "--url", "http://elsewhere.test")
    assert result.exit_code == ExitCode.USAGE
    assert "no worker token" in result.stderr


def test_a_file_without_a_worker_token_gives_none(
    offline_cli: Cli, make_module: Callable[..., WorkerModule], data_dir: Path
) -> None:
    write_credentials(data_dir)  # written by a server older than workers
    mod = make_module()
    result = offline_cli("worker", mod.target)
    assert result.exit_code == ExitCode.USAGE
    assert "no worker token" in result.stderr


EXAMPLE_WORKFLOW = Path(__file__).resolve().parents[2] / "examples" / "textstats_workflow.json"


def test_the_example_workflow_is_a_valid_definition(cli: Cli) -> None:
    created = ok(cli("workflows", "create", str(EXAMPLE_WORKFLOW), "-o", "json"))
    version = json.loads(created.stdout)
    assert version["workflow_id"] == "textstats"
    assert [t["action"] for t in version["definition"]["tasks"]] == [
        "list_files",
        "text_stats",
        "write_report",
    ]


def test_the_other_commands_do_not_load_the_worker_sdk() -> None:
    code = "import sys, workload_cli.main; print('workload_worker' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_the_worker_log_goes_to_stderr_when_nothing_else_logs() -> None:
    code = (
        "import logging\n"
        "from workload_cli._worker_command import _LogTo\n"
        "with _LogTo('info'):\n"
        "    logging.getLogger('workload.worker').info('claimed')\n"
        "    logging.getLogger('workload.worker').debug('hidden')\n"
        "logging.getLogger('workload.worker').warning('after')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "INFO workload.worker: claimed" in done.stderr
    assert "hidden" not in done.stderr
    assert "after" in done.stderr  # Python's last-resort handler: the handler was removed
    assert "INFO" not in done.stderr.split("claimed", 1)[1]


def test_a_signal_as_the_worker_hands_its_signals_back_is_a_stop(
    offline_cli: Cli, make_module: Callable[..., WorkerModule]
) -> None:
    """Worker.run() puts the command's handler back as it returns: a signal just then reaches
    the command's handler, which raises ``Interrupted``; the worker has served and stopped."""
    lines = [
        "import signal",
        "from workload_cli._stop import Interrupted",
        "def run():",
        "    worker.ran = True",
        "    raise Interrupted(signal.SIGTERM)",
        "worker.run = run",
    ]
    mod = make_module(body=("\n" + " " * 12).join(lines))  # the template's indentation
    result = offline_cli("worker", mod.target, "--url", BASE_URL, "--token", WORKER_TOKEN)
    assert result.exit_code == 0, result.output
    assert mod.module.worker.ran is True
    assert "before the worker served" not in result.stderr, result.stderr
