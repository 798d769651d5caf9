"""Workflows and versions: lists, a version's definition and DAG, the start-run form.

A workflow's page shows its latest version as the version's own page does (``_version.html``:
the start-run form, the DAG, the definition) above the list of every version, so a workflow is
started from its page. The start-run form (operators only) takes the run's input as a JSON
object.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from workload_api.auth import Role
from workload_api.console._graph import dag
from workload_api.console._web import Console, View, query_link
from workload_api.jsonbody import parse_json_object
from workload_api.problems import HttpProblem
from workload_domain.definition import VERSION_NUMBER_PATTERN
from workload_domain.errors import InvalidArgument, VersionNotFound

__all__ = ["routes"]

PAGE_SIZE = 50
_VERSION = re.compile(VERSION_NUMBER_PATTERN)


def _cursor(view: View) -> str | None:
    return view.request.query_params.get("cursor") or None


async def workflows_page(view: View) -> Response:
    page = await view.console.usecases.workflows.list(_cursor(view), PAGE_SIZE)
    next_link = None
    if page["next_cursor"]:
        next_link = query_link("/ui/workflows", {"cursor": str(page["next_cursor"])})
    return await view.render("workflows.html", workflows=page["items"], next_link=next_link)


async def _version_view(
    view: View, workflow_id: str, number: int, input_text: str, message: str | None
) -> dict[str, Any]:
    """What a version's part of a page needs: the version, its DAG, the start form's state."""
    version = await view.console.usecases.workflows.get_version(workflow_id, number)
    return {
        "version": version,
        "dag": dag(version["definition"]["tasks"]),
        "input_text": input_text,
        "message": message,
    }


async def _workflow_page(
    view: View, *, status: int = 200, input_text: str = "{}", message: str | None = None
) -> Response:
    workflows = view.console.usecases.workflows
    workflow_id = view.path("workflow_id")
    workflow = await workflows.get(workflow_id)
    page = await workflows.list_versions(workflow_id, _cursor(view), PAGE_SIZE)
    next_link = None
    if page["next_cursor"]:
        link = f"/ui/workflows/{workflow_id}"
        next_link = query_link(link, {"cursor": str(page["next_cursor"])})
    latest = await _version_view(
        view, workflow_id, int(workflow["latest_version"]), input_text, message
    )
    return await view.render(
        "workflow.html",
        status=status,
        workflow=workflow,
        versions=page["items"],
        next_link=next_link,
        **latest,
    )


async def workflow_page(view: View) -> Response:
    return await _workflow_page(view)


def _version_number(view: View) -> int:
    raw = view.path("version")
    if not _VERSION.fullmatch(raw):
        raise VersionNotFound(view.path("workflow_id"), raw[:40])
    return int(raw)


async def _version_page(
    view: View, *, status: int = 200, input_text: str = "{}", message: str | None = None
) -> Response:
    shown = await _version_view(
        view, view.path("workflow_id"), _version_number(view), input_text, message
    )
    return await view.render("version.html", status=status, **shown)


async def version_page(view: View) -> Response:
    return await _version_page(view)


async def start_run(view: View) -> Response:
    """Start a run of a version (its form is on the version's page and its workflow's).

    With ``back=workflow`` (the workflow's page), an input the run cannot take is shown back
    on the workflow's page.
    """
    workflow_id, number = view.path("workflow_id"), _version_number(view)
    again = _workflow_page if view.form.get("back") == "workflow" else _version_page
    text = view.form.get("input", "").strip() or "{}"
    try:
        run_input = parse_json_object(text)
    except HttpProblem as problem:
        return await again(
            view, status=400, input_text=text, message=f"The input is not used: {problem.detail}"
        )
    body = {"input": run_input}
    try:
        result = await view.console.usecases.runs.start(
            workflow_id, number, body, view.claim("start_run", body)
        )
    except InvalidArgument as error:
        return await again(view, status=400, input_text=text, message=error.message)
    return RedirectResponse(f"/ui/runs/{result.body['run_id']}", status_code=303)


def routes(console: Console) -> list[Route]:
    """The workflows pages."""
    return [
        console.page("/ui/workflows", workflows_page),
        console.page("/ui/workflows/{workflow_id}", workflow_page),
        console.page("/ui/workflows/{workflow_id}/versions/{version}", version_page),
        console.page(
            "/ui/workflows/{workflow_id}/versions/{version}/runs",
            start_run,
            method="POST",
            role=Role.OPERATOR,
        ),
    ]
