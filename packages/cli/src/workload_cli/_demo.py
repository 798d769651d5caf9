"""``workload demo``: a pipeline that does real work on a worker, started here, shown live.

The pipeline mixes in-process tasks (``mock``: a fan-out, a retry) with remote ones executed by
the example worker of ``workload_worker.examples.textstats`` (SPEC §10): it lists the text files
of a directory, computes their statistics and writes a report, each step passing its output to
the next through ``upstream``. The demo starts that worker in this process, with the development
worker token, so a newcomer sees remote execution with no setup. The worker ships inside
``workload-worker``: nothing is read from a source checkout, so the demo works from any
directory (SPEC §18). Where no worker token is found (the server is not a development one and
``WORKLOAD_WORKER_TOKEN`` is unset), the demo runs its in-process tasks only and says so.

``workload demo --agent`` runs an agent instead (:mod:`workload_cli._demo_agent`), one of whose
tools is served by the same worker.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from workload_cli._config import WORKER_TOKEN, ConfigError, Given, resolve_config
from workload_cli._demo_agent import (
    AGENT_WORKFLOW_ID,
    SAMPLE_TEXT,
    agent_definition,
    show_agent_outcome,
)
from workload_cli._session import Session, UsageError, client_command
from workload_cli._watch import watch_run
from workload_sdk import Conflict, Version
from workload_sdk.config import WORKER_TOKEN_ENV

if TYPE_CHECKING:
    from workload_worker import Worker

__all__ = ["DEMO_WORKFLOW_ID", "demo", "demo_definition"]

DEMO_WORKFLOW_ID = "demo-document-pipeline"
EXAMPLE_WORKER = "workload_worker.examples.textstats"
_INTERVAL = 0.2  # seconds between polls: short, so that every step shows up


def _mock(key: str, sleep_ms: int, *after: str, **extra: Any) -> dict[str, Any]:
    task: dict[str, Any] = {
        "key": key,
        "action": "mock",
        "input": {"sleep_ms": sleep_ms, "output": {"step": key}},
    }
    if after:
        task["depends_on"] = list(after)
    task["input"].update(extra.pop("input", {}))
    task.update(extra)
    return task


def demo_definition(workflow_id: str = DEMO_WORKFLOW_ID, *, remote: bool = True) -> dict[str, Any]:
    """The sample workflow.

    With ``remote``: fetch → list files (worker) → text statistics (worker) → report (worker),
    and beside it a mock extraction that fails once and succeeds on its retry, both joined by
    publish. Without: the same shape with mock tasks only.
    """
    retried = _mock(
        "extract-tables",
        500,
        "fetch",
        input={"fail_first": 1},
        retry={"max_attempts": 3, "initial_backoff_seconds": 1},
    )
    if remote:
        work = [
            {"key": "list", "action": "list_files", "depends_on": ["fetch"]},
            {"key": "stats", "action": "text_stats", "depends_on": ["list"]},
            {"key": "report", "action": "write_report", "depends_on": ["stats"]},
        ]
    else:
        work = [
            _mock("list", 300, "fetch"),
            _mock("stats", 700, "list"),
            _mock("report", 300, "stats"),
        ]
    return {
        "id": workflow_id,
        "description": "Demo: a fan-out of in-process and remote tasks, a retry, a fan-in",
        "tasks": [
            _mock("fetch", 300),
            *work,
            retried,
            _mock("publish", 200, "report", "extract-tables"),
        ],
    }


def _register(s: Session, definition: dict[str, Any]) -> Version:
    try:
        return s.client.workflows.create(definition)
    except Conflict as exc:
        if exc.code != "workflow_exists":
            raise
        # Versions are immutable: a rerun of the demo adds a version rather than failing.
        return s.client.versions.create(definition["id"], definition)


def _example_worker() -> Worker:
    """The example worker, imported from the installed ``workload-worker`` (never a checkout)."""
    module = importlib.import_module(EXAMPLE_WORKER)  # at run time: only the demo needs it
    worker: Worker = module.worker
    return worker


def _worker_token(url: str) -> str | None:
    """The worker token: ``WORKLOAD_WORKER_TOKEN``, else the development credentials file's."""
    given = os.environ.get(WORKER_TOKEN_ENV)
    try:
        config = resolve_config(
            url=Given(url, "--url"),
            token=Given(given, WORKER_TOKEN_ENV) if given else None,
            file_token=WORKER_TOKEN,
        )
    except ConfigError:
        return None
    return config.token


@contextlib.contextmanager
def _serving(worker: Worker | None, url: str, token: str | None) -> Iterator[bool]:
    """Run ``worker`` in a thread while the block runs; whether one runs."""
    if worker is None or token is None:
        yield False
        return
    worker.configure(url=url, token=token, concurrency=4)
    thread = threading.Thread(target=worker.run, name="demo-worker", daemon=True)
    thread.start()
    try:
        yield True
    finally:
        worker.stop()
        thread.join(timeout=35)


@client_command
def demo(
    s: Session,
    workflow_id: Annotated[
        str | None,
        typer.Option(
            help=f"The workflow id to register the sample under (default: {DEMO_WORKFLOW_ID}; "
            f"with --agent: {AGENT_WORKFLOW_ID}).",
            show_default=False,
        ),
    ] = None,
    *,
    agent: Annotated[
        bool,
        typer.Option(
            "--agent",
            help="Run an agent on the mock model instead: it calls an in-process tool and "
            "the worker's tool, answers with checked JSON; its steps and usage are printed.",
        ),
    ] = False,
    directory: Annotated[
        Path | None,
        typer.Option(
            help="The text files the worker analyses (default: ./docs, else this directory; "
            "not with --agent).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run a sample pipeline on the server: in-process tasks, a retry, and a worker's tasks.

    The worker (workload_worker.examples.textstats) is started here with the development
    worker token; its report is written to a temporary directory, printed at the end. With
    --agent, an agent task instead: see docs/agents.md.
    """
    if agent and directory is not None:
        raise UsageError("--directory is for the pipeline: the agent reads a text")
    worker_token = _worker_token(s.config.url)
    remote = worker_token is not None
    if not remote:
        s.out.say(
            f"no worker token (a development server's, or {WORKER_TOKEN_ENV}) to start the "
            "example worker with: "
            + ("both tools run in-process" if agent else "in-process tasks only")
        )
    if agent:
        definition = agent_definition(workflow_id or AGENT_WORKFLOW_ID, remote=remote)
    else:
        definition = demo_definition(workflow_id or DEMO_WORKFLOW_ID, remote=remote)
    version = _register(s, definition)
    s.out.say(f"registered {version.workflow_id} version {version.version}")
    reports: Path | None = None
    if agent:
        run_input: dict[str, Any] = {"text": SAMPLE_TEXT}
    else:
        source = directory or (Path("docs") if Path("docs").is_dir() else Path("."))
        reports = Path(tempfile.mkdtemp(prefix="workload-demo-"))
        run_input = {"directory": str(source.resolve()), "output_dir": str(reports)}
    worker = _example_worker() if remote else None
    with _serving(worker, s.config.url, worker_token) as serving:
        if serving and worker is not None:
            s.out.say(f"started the example worker (actions: {', '.join(worker.actions)})")
        run = s.client.runs.start(version.workflow_id, run_input, version=version.version)
        s.out.say(f"started run {run.run_id}")
        code = watch_run(s, run.run_id, interval=_INTERVAL)
    if agent:
        show_agent_outcome(s, run.run_id)
    for report in sorted(reports.iterdir()) if reports is not None else ():
        s.out.say(f"report: {report}")
    raise typer.Exit(code)
