"""The approvals inbox (SPEC §11): what agents wait for, and an operator's decision on it.

The inbox lists pending approvals by default (oldest first: the first to expire), or those of
another status. An approval's page shows the tool, its run and task, and the exact arguments
(JSON with every non-ASCII character escaped) with their digest; operators get **Approve** and
**Reject** with an optional comment. The form carries the digest the page showed, so a decision
on arguments other than those shown is refused (409 ``approval_changed``), and so is one on an
approval no longer pending (409 ``approval_decided``): the page is shown again, saying so.
"""

from __future__ import annotations

from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from workload_api.auth import Role
from workload_api.console._web import Console, View, query_link, said
from workload_api.problems import HttpProblem
from workload_api.usecases.approvals import decider
from workload_domain.approvals import ApprovalStatus
from workload_domain.errors import ApprovalChanged, ApprovalDecided, InvalidArgument

__all__ = ["routes"]

PAGE_SIZE = 50
ALL = "all"
"""The status filter's value for every status (the inbox shows pending ones by default)."""


def _status(view: View) -> ApprovalStatus | None:
    raw = view.request.query_params.get("status") or ApprovalStatus.PENDING.value
    if raw == ALL:
        return None
    try:
        return ApprovalStatus(raw)
    except ValueError:
        raise HttpProblem(400, "invalid_argument", f"unknown status {raw[:40]!r}") from None


async def inbox(view: View) -> Response:
    status = _status(view)
    cursor = view.request.query_params.get("cursor") or None
    page = await view.console.usecases.approvals.list(status, cursor, PAGE_SIZE)
    shown = status.value if status else ALL
    next_link = None
    if page["next_cursor"]:
        next_link = query_link("/ui/approvals", {"status": shown, "cursor": page["next_cursor"]})
    return await view.render(
        "approvals.html",
        approvals=page["items"],
        status_filter=shown,
        statuses=[s.value for s in ApprovalStatus] + [ALL],
        next_link=next_link,
        first_link=query_link("/ui/approvals", {"status": shown}) if cursor is not None else None,
    )


async def _approval_page(
    view: View, *, status: int = 200, message: str | None = None, comment: str = ""
) -> Response:
    approval = await view.console.usecases.approvals.get(view.path("approval_id"))
    return await view.render(
        "approval.html", status=status, approval=approval, message=message, comment=comment
    )


async def approval_page(view: View) -> Response:
    return await _approval_page(view)


async def decide(view: View) -> Response:
    approval_id = view.path("approval_id")
    comment = view.form.get("comment", "").strip()
    body: dict[str, object] = {
        "decision": view.form.get("decision", ""),
        "arguments_digest": view.form.get("arguments_digest", ""),
    }
    if comment:
        body["comment"] = comment
    decided_by = decider(view.principal.id, view.principal.role.name.lower())
    try:
        await view.console.usecases.approvals.decide(
            approval_id, body, view.claim("decide_approval", body), decided_by
        )
    except ApprovalChanged:
        message = (
            "Nothing was decided: the arguments are no longer the ones this page showed (their "
            "digest differs). Read them again below, then decide."
        )
        return await _approval_page(view, status=409, message=message, comment=comment)
    except ApprovalDecided:
        message = "Nothing was decided: this approval was no longer pending (see below)."
        return await _approval_page(view, status=409, message=message, comment=comment)
    except InvalidArgument as error:
        message = f"Nothing was decided: {said(error)}"
        return await _approval_page(view, status=400, message=message, comment=comment)
    if view.form.get("back") == "inbox":  # decided from the inbox: back to it (a fixed place)
        return RedirectResponse("/ui/approvals", status_code=303)
    return RedirectResponse(f"/ui/approvals/{approval_id}", status_code=303)


def routes(console: Console) -> list[Route]:
    """The approvals pages."""
    return [
        console.page("/ui/approvals", inbox),
        console.page("/ui/approvals/{approval_id}", approval_page),
        console.page(
            "/ui/approvals/{approval_id}/decision", decide, method="POST", role=Role.OPERATOR
        ),
    ]
