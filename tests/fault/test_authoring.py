"""Python authoring end to end through real processes (SPEC §17, issue 26).

A user's module declares a worker with two typed actions and a workflow ending in an agent
whose tool is one of those actions; the real CLI applies it (created, then unchanged), runs
the worker (`workload worker mod:worker`), starts a run with input and waits (`workload runs
start … --wait`, which prints the run's output); the SDK's `runs.result` returns the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

from tests.fault.conftest import (
    OPERATOR_TOKEN,
    WORKER_TOKEN,
    Services,
    workload_executable,
)
from workload_sdk import Client

MODULE = textwrap.dedent(
    '''
    """A user's workflows, next to their handlers."""

    from pydantic import BaseModel

    from workload_worker import Context, Worker, Workflow


    class FetchIn(BaseModel):
        url: str


    class Page(BaseModel):
        url: str
        words: int


    class Verdict(BaseModel):
        ok: bool
        words: int


    worker = Worker(queues=["etl"], concurrency=4, grace_seconds=2, wait_seconds=2)


    @worker.action("fetch")
    async def fetch(ctx: Context, input: FetchIn) -> Page:
        """Fetch a page and count its words."""
        return Page(url=input.url, words=len(input.url.split("/")) * 10)


    @worker.action("summarize")
    def summarize(ctx: Context, input: dict) -> dict:
        page = ctx.upstream["fetch"]
        return {"summary": f"{page['url']} has {page['words']} words"}


    etl = Workflow("etl", description="fetch, summarize, review")
    a = etl.task("fetch", fetch, input={"url": "https://example.org/a/b"}, queue="etl")
    b = etl.task("summarize", summarize, depends_on=[a], queue="etl")
    c = etl.agent(
        "review",
        model="mock",
        prompt="Review {{upstream.summarize}}",
        tools=[fetch],
        output_type=Verdict,
        depends_on=[b],
        queue="etl",  # its remote tool calls wait in the agent task's queue
        script=[
            {"tool_calls": [{"name": "fetch", "arguments": {"url": "https://example.org/c"}}]},
            {"content": '{"ok": true, "words": 30}'},
        ],
    )
    '''
)


def cli(
    services: Services, base_url: str, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
    environment.update(
        {
            "WORKLOAD_URL": base_url,
            "WORKLOAD_TOKEN": OPERATOR_TOKEN,
            "XDG_RUNTIME_DIR": str(services.runtime_dir),
            "PYTHONPATH": str(cwd),
            **(env or {}),
        }
    )
    return subprocess.run(
        [str(workload_executable()), *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_module_is_applied_served_run_and_its_result_read(
    services: Services, database_url: str, tmp_path: Path
) -> None:
    service = services.start(database_url)
    service.wait_ready()
    project = tmp_path / "project"
    project.mkdir()
    (project / "pipelines.py").write_text(MODULE, encoding="utf-8")

    applied = cli(services, service.base_url, "workflows", "apply", "pipelines", cwd=project)
    assert applied.returncode == 0, applied.stderr
    assert "created etl version 1" in applied.stdout
    again = cli(
        services, service.base_url, "workflows", "apply", "pipelines", "-o", "json", cwd=project
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == [{"workflow_id": "etl", "version": 1, "created": False}]

    worker_log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [str(workload_executable()), "worker", "pipelines:worker"],
        cwd=project,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")},
            "WORKLOAD_URL": service.base_url,
            "WORKLOAD_WORKER_TOKEN": WORKER_TOKEN,
            "PYTHONPATH": str(project),
        },
        stdout=worker_log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    try:
        started = cli(
            services,
            service.base_url,
            "runs",
            "start",
            "etl",
            "--input",
            '{"team": "docs"}',
            "--wait",
            "--output",
            "json",
            cwd=project,
        )
        assert started.returncode == 0, f"{started.stderr}\n{(tmp_path / 'worker.log').read_text()}"
        run: dict[str, Any] = json.loads(started.stdout)
        assert run["status"] == "succeeded"
        review = run["output"]["review"]  # the run's only sink: the agent
        assert review["structured"] == {"ok": True, "words": 30}
        with Client(base_url=service.base_url, token=OPERATOR_TOKEN) as client:
            assert client.runs.result(run["run_id"], timeout=30) == run["output"]
            tasks = {t.task_key: t for t in client.runs.tasks(run["run_id"])}
        assert tasks["fetch"].output == {"url": "https://example.org/a/b", "words": 50}
        assert tasks["summarize"].output == {"summary": "https://example.org/a/b has 50 words"}
    finally:
        worker.terminate()
        assert worker.wait(timeout=30) == 0
        worker_log.close()
