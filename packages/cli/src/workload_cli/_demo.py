"""``workload demo``: register a small document pipeline, start a run, and show it live.

The pipeline fans out to three extractions (one fails once, then succeeds on its retry) and fans
back in, so a first-time user sees dependencies, concurrency and a retry within seconds.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from workload_cli._options import OutputOption, TokenOption, UrlOption
from workload_cli._session import Session, session
from workload_cli._watch import watch_run
from workload_sdk import Conflict, Version

__all__ = ["DEMO_WORKFLOW_ID", "demo", "demo_definition"]

DEMO_WORKFLOW_ID = "demo-document-pipeline"
_INTERVAL = 0.2  # seconds between polls: short, so that every step shows up


def demo_definition(workflow_id: str = DEMO_WORKFLOW_ID) -> dict[str, Any]:
    """The sample workflow: fetch → split → 3 × extract (one retried) → merge → publish."""

    def mock(key: str, sleep_ms: int, *after: str, **extra: Any) -> dict[str, Any]:
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

    return {
        "id": workflow_id,
        "description": "Demo: a document pipeline with a fan-out, a fan-in and one retry",
        "tasks": [
            mock("fetch", 400),
            mock("split", 300, "fetch"),
            mock("extract-text", 700, "split"),
            mock(
                "extract-tables",
                500,
                "split",
                input={"fail_first": 1},
                retry={"max_attempts": 3, "initial_backoff_seconds": 1},
            ),
            mock("extract-images", 900, "split"),
            mock("merge", 300, "extract-text", "extract-tables", "extract-images"),
            mock("publish", 200, "merge"),
        ],
    }


def _register(s: Session, workflow_id: str) -> Version:
    definition = demo_definition(workflow_id)
    try:
        return s.client.workflows.create(definition)
    except Conflict as exc:
        if exc.code != "workflow_exists":
            raise
        # Versions are immutable: a rerun of the demo adds a version rather than failing.
        return s.client.versions.create(workflow_id, definition)


def demo(
    ctx: typer.Context,
    workflow_id: Annotated[
        str, typer.Option(help="The workflow id to register the sample under.")
    ] = DEMO_WORKFLOW_ID,
    *,
    url: UrlOption = None,
    token: TokenOption = None,
    output: OutputOption = None,
) -> None:
    """Register a sample document pipeline on the server, start a run, show it live."""
    with session(ctx, output, url=url, token=token) as s:
        version = _register(s, workflow_id)
        s.out.say(f"registered {version.workflow_id} version {version.version}")
        run = s.client.runs.start(version.workflow_id, version.version, {"document": "demo.pdf"})
        s.out.say(f"started run {run.run_id}")
        raise typer.Exit(watch_run(s, run.run_id, interval=_INTERVAL))
