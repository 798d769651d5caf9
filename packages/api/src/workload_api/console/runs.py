"""Runs: the list (server-side filters, keyset pages, task counts kept live) and a run's page.

The list is newest first (the API's order) and filters by status, workflow and creation time: a
window back from now (``since``: the first page and its refresh slide with it; a later page
carries the first page's moment ``at``, since its cursor is bound to the exact bounds) and
From / To (``created_after`` / ``created_before``: a ``datetime-local`` value read as UTC, or an
RFC 3339 time with an offset). A value it cannot read is a 400 page, never a 500.

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
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from workload_api.auth import Role
from workload_api.console._graph import dag, timeline
from workload_api.console._web import Console, View, query_link
from workload_api.problems import HttpProblem
from workload_api.runs_listing import parse_instant
from workload_domain.definition import WORKFLOW_ID_PATTERN
from workload_domain.statuses import RunStatus, TaskStatus

__all__ = ["EVENTS_SHOWN", "PAGE_SIZE", "routes"]

PAGE_SIZE = 25
EVENTS_SHOWN = 100
"""Events a run's page shows (the latest): at load, and kept while it follows the run live
(console.js drops the oldest rows past it); the history page has all, paged."""
ATTEMPTS_SHOWN = 500
TASK_ATTEMPTS_SHOWN = 100
"""A page of a task's attempts on its own page (every attempt of a run beyond those shown)."""
STEPS_SHOWN = 100
"""Steps of each agent task on a run's page (the task's steps page has all, paged)."""
AGENT_TASKS_SHOWN = 20
"""Agent tasks whose steps a run's page shows (the others link their steps page)."""
TERMINAL = frozenset({"succeeded", "failed", "canceled"})


WINDOWS: dict[str, tuple[str, timedelta]] = {
    "1h": ("the last hour", timedelta(hours=1)),
    "24h": ("the last 24 hours", timedelta(hours=24)),
    "7d": ("the last 7 days", timedelta(days=7)),
}
"""The runs page's time windows (``since``): back from the moment the first page was read."""
_LOCAL_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,9})?)?"
)
"""A ``<input type=datetime-local>`` value (no offset): the console reads it as UTC."""
_TIME_TEXT_MAX = 35
_TIME_FIELDS = {"created_after": "From", "created_before": "To"}


def _bad(detail: str) -> HttpProblem:
    return HttpProblem(400, "invalid_argument", detail)


@dataclass(frozen=True, slots=True)
class RunsQuery:
    """The runs page's filters as read from its query string (every one checked)."""

    workflow_id: str | None
    status: RunStatus | None
    cursor: str | None
    since: str | None
    """A key of :data:`WINDOWS`, or None."""
    at: datetime | None
    """The moment ``since`` counts back from: a later page's (its cursor was issued for it)."""
    created_after: str | None
    created_before: str | None
    """The From and To fields as given (each a valid time)."""
    after: datetime | None
    before: datetime | None
    """The exclusive bounds the store is asked for."""

    def links(self, *, anchored: bool) -> dict[str, str | None]:
        """The query that lists the same runs (``anchored``: ``since`` from this ``at``)."""
        at = None
        if anchored and self.since and self.at is not None:
            at = self.at.isoformat().replace("+00:00", "Z")
        return {
            "workflow_id": self.workflow_id,
            "status": self.status.value if self.status else None,
            "since": self.since,
            "at": at,
            "created_after": self.created_after,
            "created_before": self.created_before,
        }


def _time(raw: str | None, name: str, *, round_up: bool) -> datetime | None:
    if not raw:
        return None
    text = raw
    if len(text) <= _TIME_TEXT_MAX and _LOCAL_TIME.fullmatch(text):
        text += (":00" if len(text) == len("2026-12-01T09:30") else "") + "Z"
    instant = parse_instant(text, round_up=round_up) if len(text) <= _TIME_TEXT_MAX else None
    if instant is None:
        raise _bad(
            f"{name} is not a time: give one such as 2026-12-01T09:30 (read as UTC), "
            "or an RFC 3339 time with an offset such as 2026-12-01T09:30:00+01:00."
        )
    return instant


def _filters(view: View) -> RunsQuery:
    query = view.request.query_params
    workflow_id = query.get("workflow_id") or None
    if workflow_id is not None and not re.fullmatch(WORKFLOW_ID_PATTERN, workflow_id):
        raise _bad("workflow_id is not a valid workflow id")
    raw = query.get("status") or None
    status = None
    if raw is not None:
        try:
            status = RunStatus(raw)
        except ValueError:
            raise _bad(f"unknown status {raw[:40]!r}") from None
    since = query.get("since") or None
    if since is not None and since not in WINDOWS:
        raise _bad("Created within must be one of: any time, " + ", ".join(WINDOWS) + ".")
    at = _time(query.get("at"), "The page's moment (at)", round_up=False)
    texts = {name: query.get(name) or None for name in _TIME_FIELDS}
    after = _time(texts["created_after"], "From", round_up=False)
    before = _time(texts["created_before"], "To", round_up=True)
    if since is not None:
        at = at or view.console.clock.now().astimezone(UTC)
        try:
            start = at - WINDOWS[since][1]
        except OverflowError:
            raise _bad("The page's moment (at) is too early for its time window.") from None
        after = start if after is None else max(after, start)
    return RunsQuery(
        workflow_id,
        status,
        query.get("cursor") or None,
        since,
        at if since is not None else None,
        texts["created_after"],
        texts["created_before"],
        after,
        before,
    )


def _local(value: datetime | None) -> str:
    """An instant as an ``<input type=datetime-local>`` value, in UTC."""
    if value is None:
        return ""
    text = value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{value.microsecond // 1000:03d}" if value.microsecond else "")


async def _runs_context(view: View) -> dict[str, Any]:
    q = _filters(view)
    page = await view.console.usecases.runs.list(
        q.workflow_id,
        q.status,
        q.cursor,
        PAGE_SIZE,
        created_after=q.after,
        created_before=q.before,
    )
    base = q.links(anchored=False)
    next_link = None
    if page["next_cursor"]:
        anchored = q.links(anchored=True)
        next_link = query_link("/ui/runs", {**anchored, "cursor": str(page["next_cursor"])})
    # The first page follows a sliding window; a later one its first page's moment.
    rows = q.links(anchored=q.cursor is not None)
    runs = page["items"]
    counts = await view.console.usecases.runs.active_counts(q.workflow_id)
    from_value = _time(q.created_after, "From", round_up=False)
    to_value = _time(q.created_before, "To", round_up=False)
    return {
        "active_counts": counts,
        "runs": runs,
        "workflow_id": q.workflow_id or "",
        "status_filter": q.status.value if q.status else "",
        "statuses": [s.value for s in RunStatus],
        "task_statuses": [s.value for s in TaskStatus],
        "windows": {key: label for key, (label, _) in WINDOWS.items()},
        "since": q.since or "",
        "created_after": _local(from_value),
        "created_before": _local(to_value),
        "first_link": query_link("/ui/runs", base) if q.cursor is not None else None,
        "next_link": next_link,
        "rows_link": query_link("/ui/runs/rows", {**rows, "cursor": q.cursor}),
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
        "events.html",
        run=run,
        run_id=run_id,
        events=page["items"],
        first_link=f"/ui/runs/{run_id}/events",
        next_link=next_link,
    )


async def task_steps(view: View) -> Response:
    return await _task_page(view, "steps", STEPS_SHOWN)


async def task_attempts(view: View) -> Response:
    return await _task_page(view, "attempts", TASK_ATTEMPTS_SHOWN)


async def _task_page(view: View, listing: Literal["steps", "attempts"], size: int) -> Response:
    """A task's page of its steps or of its attempts (``{listing}.html``), ``size`` a page."""
    run_id, task_key = view.path("run_id"), view.path("task_key")
    cursor = view.request.query_params.get("cursor") or None
    runs = view.console.usecases.runs
    run, _ = await runs.get(run_id)
    task = await runs.get_task(run_id, task_key)
    lister = runs.list_steps if listing == "steps" else runs.list_attempts
    page = await lister(run_id, task_key, cursor, size)
    link = f"/ui/runs/{run_id}/tasks/{task_key}/{listing}"
    next_link = None
    if page["next_cursor"]:
        next_link = query_link(link, {"cursor": str(page["next_cursor"])})
    return await view.render(
        f"{listing}.html",
        run=run,
        run_id=run_id,
        task=task,
        items=[item | {"task_key": task_key} for item in page["items"]],
        page_size=size,
        first_link=link if cursor is not None else None,
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
        console.page("/ui/runs/{run_id}/tasks/{task_key}/attempts", task_attempts),
        console.page("/ui/runs/{run_id}/cancel", cancel, method="POST", role=Role.OPERATOR),
    ]
