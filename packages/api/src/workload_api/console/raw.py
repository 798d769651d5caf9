"""Whole values as JSON, for the signed-in console (ADR 0026; issue 33, D3).

A run's page shows each value cut at a bound (``_values.py``) and links the whole value here:
a run's input or output, a task's output or error, an attempt's error, an agent step's request or
response. Each answer is the value alone, as ``application/json`` — what the API's resource
holds under that name — behind the console's sign-in like every page (a viewer may read it).
Anything that does not name a value that exists is 404; a JSON ``null`` is a value that is
empty (a task with no output yet).
"""

from __future__ import annotations

import re
from typing import Any

from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from workload_api.console._web import Console, View
from workload_api.problems import HttpProblem

__all__ = ["routes"]

_NUMBER = re.compile(r"^[1-9][0-9]{0,8}$")
_RUN_PARTS = frozenset({"input", "output"})
_TASK_PARTS = frozenset({"output", "error"})
_STEP_PARTS = frozenset({"request", "response"})


def _json(value: Any) -> Response:
    return JSONResponse(value, headers={"Content-Disposition": "inline"})


def _number(view: View, name: str) -> int:
    raw = view.path(name)
    if not _NUMBER.fullmatch(raw):
        raise HttpProblem(404, "not_found", f"there is no {name} {raw[:40]!r}")
    return int(raw)


def _part(view: View, allowed: frozenset[str]) -> str:
    part = view.path("part")
    if part not in allowed:
        raise HttpProblem(404, "not_found", f"there is no value named {part[:40]!r} here")
    return part


async def run_value(view: View) -> Response:
    part = _part(view, _RUN_PARTS)
    run, _ = await view.console.usecases.runs.get(view.path("run_id"))
    return _json(run[part])


async def task_value(view: View) -> Response:
    part = _part(view, _TASK_PARTS)
    task = await view.console.usecases.runs.get_task(view.path("run_id"), view.path("task_key"))
    return _json(task[part])


async def attempt_value(view: View) -> Response:
    if view.path("part") != "error":
        raise HttpProblem(404, "not_found", "an attempt's page value is its error")
    attempt = _number(view, "attempt")
    found = await view.console.usecases.runs.get_attempt(
        view.path("run_id"), view.path("task_key"), attempt
    )
    if found is None:
        raise HttpProblem(404, "not_found", f"the task has no attempt {attempt}")
    return _json(found["error"])


async def step_value(view: View) -> Response:
    part = _part(view, _STEP_PARTS)
    attempt, sequence = _number(view, "attempt"), _number(view, "sequence")
    found = await view.console.usecases.runs.get_step(
        view.path("run_id"), view.path("task_key"), attempt, sequence
    )
    if found is None:
        raise HttpProblem(404, "not_found", f"attempt {attempt} has no step {sequence}")
    return _json(found[part])


def routes(console: Console) -> list[Route]:
    """The whole values a run's page links."""
    task = "/ui/runs/{run_id}/tasks/{task_key}"
    return [
        console.page("/ui/runs/{run_id}/raw/{part}", run_value),
        console.page(task + "/raw/{part}", task_value),
        console.page(task + "/attempts/{attempt}/raw/{part}", attempt_value),
        console.page(task + "/steps/{attempt}/{sequence}/raw/{part}", step_value),
    ]
