"""Runs: the list (server-side filters, keyset pages, task counts kept live) and a run's page.

A run's page shows its DAG coloured by status, the task table with output and error viewers,
a timeline of every attempt (earlier failed ones too), the latest events, and — to operators,
while the run is not finished — a cancel button. An agent task (SPEC §11) shows what it used and
its steps (each model call and tool call, with its request and response); a task waiting for
approval links the pending approval. ``console.js`` keeps it live: it follows the
run's event stream (``/api/v1/runs/{run_id}/events/stream``, authenticated by the session
cookie), appends each event to the log, and re-reads the live part (``…/live``) after events,
at most once a second. Values (outputs, errors, inputs, steps' requests and responses) are
shown cut at a bound per value and per page, each linked whole as JSON (``raw.py``, ADR 0026).
"""

from __future__ import annotations

import re
from typing import Any

from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from workload_api.auth import Role
from workload_api.console._graph import dag, timeline
from workload_api.console._web import Console, View, query_link
from workload_api.problems import HttpProblem
from workload_domain.definition import WORKFLOW_ID_PATTERN
from workload_domain.statuses import RunStatus, TaskStatus

__all__ = ["EVENTS_SHOWN", "PAGE_SIZE", "routes"]

PAGE_SIZE = 25
EVENTS_SHOWN = 100
"""Events a run's page shows (the latest): at load, and kept while it follows the run live
(console.js drops the oldest rows past it); the history page has all, paged."""
ATTEMPTS_SHOWN = 500
STEPS_SHOWN = 100
"""Steps of each agent task on a run's page (the task's steps page has all, paged)."""
AGENT_TASKS_SHOWN = 20
"""Agent tasks whose steps a run's page shows (the others link their steps page)."""
TERMINAL = frozenset({"succeeded", "failed", "canceled"})


def _filters(view: View) -> tuple[str | None, RunStatus | None, str | None]:
    query = view.request.query_params
    workflow_id = query.get("workflow_id") or None
    if workflow_id is not None and not re.fullmatch(WORKFLOW_ID_PATTERN, workflow_id):
        raise HttpProblem(400, "invalid_argument", "workflow_id is not a valid workflow id")
    raw = query.get("status") or None
    status = None
    if raw is not None:
        try:
            status = RunStatus(raw)
        except ValueError:
            raise HttpProblem(400, "invalid_argument", f"unknown status {raw[:40]!r}") from None
    return workflow_id, status, query.get("cursor") or None


async def _runs_context(view: View) -> dict[str, Any]:
    workflow_id, status, cursor = _filters(view)
    page = await view.console.usecases.runs.list(workflow_id, status, cursor, PAGE_SIZE)
    base = {"workflow_id": workflow_id, "status": status.value if status else None}
    next_link = None
    if page["next_cursor"]:
        next_link = query_link("/ui/runs", {**base, "cursor": str(page["next_cursor"])})
    runs = page["items"]
    counts = await view.console.usecases.runs.active_counts(workflow_id)
    return {
        "active_counts": counts,
        "runs": runs,
        "workflow_id": workflow_id or "",
        "status_filter": status.value if status else "",
        "statuses": [s.value for s in RunStatus],
        "task_statuses": [s.value for s in TaskStatus],
        "paged": cursor is not None,
        "first_link": query_link("/ui/runs", base),
        "next_link": next_link,
        "rows_link": query_link("/ui/runs/rows", {**base, "cursor": cursor}),
        "active": any(r["status"] not in TERMINAL for r in runs) or any(counts.values()),
    }


async def runs_page(view: View) -> Response:
    return await view.render("runs.html", **await _runs_context(view))


async def runs_rows(view: View) -> Response:
    return await view.render("_runs_live.html", **await _runs_context(view))


async def _run_context(view: View) -> dict[str, Any]:
    run_id = view.path("run_id")
    detail = await view.console.usecases.runs.detail(
        run_id, attempts=ATTEMPTS_SHOWN, events=EVENTS_SHOWN
    )
    run = detail["run"]
    tasks = detail["tasks"]
    drawn = dag([{"key": t["task_key"], **t} for t in tasks])
    pending: dict[str, list[dict[str, Any]]] = {}
    for approval in detail["approvals"]:
        if approval["status"] == "pending":
            pending.setdefault(approval["task_key"], []).append(approval)
    agents = [t for t in tasks if t["action"] == "agent"]
    steps = {}
    for task in [t for t in agents if t["attempt_count"]][:AGENT_TASKS_SHOWN]:
        page = await view.console.usecases.runs.list_steps(
            run_id, task["task_key"], None, STEPS_SHOWN
        )
        steps[task["task_key"]] = (page["items"], page["next_cursor"] is not None)
    return {
        **detail,
        "run_id": run_id,
        "pending": pending,
        "agents": agents,
        "agent_steps": steps,
        "terminal": run["status"] in TERMINAL,
        "events_kept": EVENTS_SHOWN,
        "dag": drawn,
        "timeline": timeline(tasks, detail["attempts"], view.console.clock.now()),
        "task_statuses": [s.value for s in TaskStatus],
    }


async def run_page(view: View) -> Response:
    return await view.render("run.html", **await _run_context(view))


async def run_live(view: View) -> Response:
    return await view.render("_run_live.html", **await _run_context(view))


async def run_events(view: View) -> Response:
    run_id = view.path("run_id")
    cursor = view.request.query_params.get("cursor") or None
    run, _ = await view.console.usecases.runs.get(run_id)
    page = await view.console.usecases.runs.list_events(run_id, cursor, 200)
    next_link = None
    if page["next_cursor"]:
        next_link = query_link(f"/ui/runs/{run_id}/events", {"cursor": str(page["next_cursor"])})
    return await view.render(
        "events.html", run=run, run_id=run_id, events=page["items"], next_link=next_link
    )


async def task_steps(view: View) -> Response:
    run_id, task_key = view.path("run_id"), view.path("task_key")
    cursor = view.request.query_params.get("cursor") or None
    run, _ = await view.console.usecases.runs.get(run_id)
    task = await view.console.usecases.runs.get_task(run_id, task_key)
    page = await view.console.usecases.runs.list_steps(run_id, task_key, cursor, STEPS_SHOWN)
    next_link = None
    if page["next_cursor"]:
        link = f"/ui/runs/{run_id}/tasks/{task_key}/steps"
        next_link = query_link(link, {"cursor": str(page["next_cursor"])})
    return await view.render(
        "steps.html",
        run=run,
        run_id=run_id,
        task=task,
        steps=page["items"],
        paged=cursor is not None,
        next_link=next_link,
    )


async def cancel(view: View) -> Response:
    run_id = view.path("run_id")
    await view.console.usecases.runs.cancel(run_id, None, view.claim("cancel_run", {}))
    return RedirectResponse(f"/ui/runs/{run_id}", status_code=303)


def routes(console: Console) -> list[Route]:
    """The runs pages."""
    return [
        console.page("/ui/runs", runs_page),
        console.page("/ui/runs/rows", runs_rows),
        console.page("/ui/runs/{run_id}", run_page),
        console.page("/ui/runs/{run_id}/live", run_live),
        console.page("/ui/runs/{run_id}/events", run_events),
        console.page("/ui/runs/{run_id}/tasks/{task_key}/steps", task_steps),
        console.page("/ui/runs/{run_id}/cancel", cancel, method="POST", role=Role.OPERATOR),
    ]
