"""Drafts (SPEC §11): a workflow from a sentence, shown in full before a person approves it.

The list page has the **New draft** form (operators: a prompt, an optional workflow id, a model
— ``mock`` with a script of answers, for demos and tests, or ``<endpoint>:<model>``). A draft's page
follows its generation (``console.js`` re-reads ``…/live`` while it is ``generating``), then
shows the problems of each answer, the definition (JSON, every non-ASCII character escaped) and
its DAG, and — when approving it would add a version to an existing workflow — a line diff
against that workflow's latest version. **Approve** carries the definition hash the page showed
(a different one is refused: 409 ``draft_changed``); once approved the page links the version.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from workload_api.auth import Role
from workload_api.console._graph import dag
from workload_api.console._web import Console, View, exact_json, query_link, said
from workload_api.jsonbody import parse_json
from workload_api.problems import HttpProblem
from workload_api.usecases.approvals import decider
from workload_domain.errors import (
    DraftChanged,
    DraftNotReady,
    InvalidArgument,
    WorkflowNotFound,
)
from workload_domain.jsonvalues import JsonObject

__all__ = ["DiffLine", "definition_diff", "routes"]

PAGE_SIZE = 50


@dataclass(frozen=True, slots=True)
class DiffLine:
    """A line of a unified diff: ``kind`` is ``file``, ``hunk``, ``add``, ``del`` or ``same``."""

    kind: str
    text: str


def definition_diff(before: JsonObject, after: JsonObject, before_name: str) -> list[DiffLine]:
    """A unified line diff of two definitions' escaped, indented, key-sorted JSON."""
    lines = difflib.unified_diff(
        exact_json(before).splitlines(),
        exact_json(after).splitlines(),
        fromfile=before_name,
        tofile="this draft",
        lineterm="",
    )
    found = []
    for line in lines:
        if line.startswith(("---", "+++")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "same"
        found.append(DiffLine(kind, line))
    return found


class _FormError(Exception):
    """The new-draft form cannot be sent as it is (said back to the person)."""


def _script(text: str) -> list[Any]:
    try:
        value = parse_json(text, what="the script")
    except HttpProblem as problem:
        raise _FormError(problem.detail) from None
    if not isinstance(value, list):
        raise _FormError('the script is a JSON list of turns {"content": "…"}')
    return value


def _draft_body(form: dict[str, str]) -> JsonObject:
    body: JsonObject = {"prompt": form.get("prompt", ""), "model": form.get("model", "").strip()}
    workflow_id = form.get("workflow_id", "").strip()
    if workflow_id:
        body["workflow_id"] = workflow_id
    script = form.get("script", "").strip()
    if script:
        body["script"] = _script(script)
    return body


async def _drafts_page(
    view: View, *, status: int = 200, message: str | None = None, form: dict[str, str] | None = None
) -> Response:
    cursor = view.request.query_params.get("cursor") or None
    page = await view.console.usecases.drafts.list(cursor, PAGE_SIZE)
    next_link = None
    if page["next_cursor"]:
        next_link = query_link("/ui/drafts", {"cursor": page["next_cursor"]})
    shown = {"prompt": "", "workflow_id": "", "model": "mock", "script": ""} | (form or {})
    return await view.render(
        "drafts.html",
        status=status,
        drafts=page["items"],
        next_link=next_link,
        first_link="/ui/drafts" if cursor is not None else None,
        message=message,
        form=shown,
    )


async def drafts_page(view: View) -> Response:
    return await _drafts_page(view)


async def create(view: View) -> Response:
    form = dict(view.form)
    try:
        body = _draft_body(form)
        created_by = decider(view.principal.id, view.principal.role.name.lower())
        result = await view.console.usecases.drafts.create(
            body, view.claim("create_draft", body), created_by
        )
    except _FormError as error:
        return await _drafts_page(
            view, status=400, message=f"No draft was made: {error}", form=form
        )
    except InvalidArgument as error:
        message = f"No draft was made: {said(error)}"
        return await _drafts_page(view, status=400, message=message, form=form)
    return RedirectResponse(f"/ui/drafts/{result.body['draft_id']}", status_code=303)


async def _draft_context(view: View) -> dict[str, Any]:
    workflows = view.console.usecases.workflows
    draft = await view.console.usecases.drafts.get(view.path("draft_id"))
    definition = draft["definition"]
    target = draft["workflow_id"] or (definition or {}).get("id")
    base = None
    if definition is not None and target:
        if draft["status"] == "approved" and draft["version"]:
            number = int(draft["version"]) - 1
        else:
            try:
                number = int((await workflows.get(str(target)))["latest_version"])
            except WorkflowNotFound:
                number = 0
        if number:
            base = await workflows.get_version(str(target), number)
    diff = None
    if base is not None and definition is not None:
        diff = definition_diff(
            base["definition"], definition, f"{target} version {base['version']}"
        )
    problems = sorted(draft["problems"], key=lambda p: int(p.get("answer", 0)))
    by_answer = [
        (answer, list(found)) for answer, found in groupby(problems, lambda p: p["answer"])
    ]
    return {
        "draft": draft,
        "target": target,
        "base": base,
        "diff": diff,
        "changed": sum(1 for line in diff or () if line.kind in ("add", "del")),
        "dag": dag(definition["tasks"]) if definition is not None else None,
        "by_answer": by_answer,
        "generating": draft["status"] == "generating",
    }


async def _draft_page(view: View, *, status: int = 200, message: str | None = None) -> Response:
    return await view.render(
        "draft.html", status=status, message=message, **await _draft_context(view)
    )


async def draft_page(view: View) -> Response:
    return await _draft_page(view)


async def draft_live(view: View) -> Response:
    return await view.render("_draft_live.html", message=None, **await _draft_context(view))


async def approve(view: View) -> Response:
    draft_id = view.path("draft_id")
    body: JsonObject = {"definition_hash": view.form.get("definition_hash", "")}
    try:
        await view.console.usecases.drafts.approve(
            draft_id, body, view.claim("approve_draft", body)
        )
    except DraftChanged:
        message = (
            "Nothing was approved: the definition is no longer the one this page showed (its "
            "hash differs). Read it again below, then decide."
        )
        return await _draft_page(view, status=409, message=message)
    except DraftNotReady:
        message = "Nothing was approved: this draft is not ready for approval (see its status)."
        return await _draft_page(view, status=409, message=message)
    except InvalidArgument as error:
        return await _draft_page(view, status=400, message=f"Nothing was approved: {said(error)}")
    return RedirectResponse(f"/ui/drafts/{draft_id}", status_code=303)


async def reject(view: View) -> Response:
    draft_id = view.path("draft_id")
    try:
        await view.console.usecases.drafts.reject(draft_id, None, view.claim("reject_draft", {}))
    except DraftNotReady:
        message = "Nothing was rejected: an approved or generating draft cannot be rejected."
        return await _draft_page(view, status=409, message=message)
    return RedirectResponse(f"/ui/drafts/{draft_id}", status_code=303)


def routes(console: Console) -> list[Route]:
    """The drafts pages."""
    return [
        console.page("/ui/drafts", drafts_page),
        console.page("/ui/drafts", create, method="POST", role=Role.OPERATOR),
        console.page("/ui/drafts/{draft_id}", draft_page),
        console.page("/ui/drafts/{draft_id}/live", draft_live),
        console.page("/ui/drafts/{draft_id}/approve", approve, method="POST", role=Role.OPERATOR),
        console.page("/ui/drafts/{draft_id}/reject", reject, method="POST", role=Role.OPERATOR),
    ]
