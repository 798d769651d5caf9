"""``workload approvals …``: decide on agents' tool calls that require a person (SPEC §11).

``approve`` and ``reject`` read the approval, show its tool, run, task and exact arguments on
standard error, ask (see :mod:`workload_cli._review`), and send the ``arguments_digest`` of
what they showed: if the server's approval differs, nothing is decided (409
``approval_changed``, exit 7).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable
from typing import Annotated

import typer

from workload_cli._exit import CLIENT_CODES, ExitCode, exit_codes_help
from workload_cli._inputs import check_idempotency_key
from workload_cli._options import IdempotencyKeyOption, limit_option, page_size
from workload_cli._output import cell
from workload_cli._review import confirm, exact_json, not_as_shown, shown
from workload_cli._session import Session, client_command
from workload_cli._views import APPROVAL_COLUMNS
from workload_sdk import Approval, ApprovalChanged

__all__ = ["approvals_app"]

_DECIDE_HELP = exit_codes_help(*CLIENT_CODES, ExitCode.DECLINED)

approvals_app = typer.Typer(
    help="Approvals of agents' tool calls: list, show, approve, reject.", no_args_is_help=True
)


class ApprovalStatus(enum.StrEnum):
    """The statuses ``--status`` accepts."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELED = "canceled"


ApprovalArgument = Annotated[str, typer.Argument(help="The approval id.", show_default=False)]
CommentOption = Annotated[
    str | None,
    typer.Option(
        help="Recorded with the decision; a rejection's comment is told to the model.",
        show_default=False,
    ),
]
YesOption = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="Decide without a prompt (required when standard input is not a terminal).",
    ),
]


@approvals_app.command("list")
@client_command
def list_approvals(
    s: Session,
    *,
    status: Annotated[
        ApprovalStatus | None,
        typer.Option(help="Only approvals in this status.", show_default=False),
    ] = None,
    limit: Annotated[int | None, limit_option("approvals")] = None,
) -> None:
    """List approvals, oldest first: status, run and task, tool, arguments (shortened)."""
    pager = s.client.approvals.list(
        status=None if status is None else status.value, limit=page_size(limit)
    )
    s.out.listing(itertools.islice(pager, limit), APPROVAL_COLUMNS)


@approvals_app.command("show")
@client_command
def show(s: Session, approval_id: ApprovalArgument) -> None:
    """Show an approval: its tool call's arguments and digest, its status and decision."""
    s.out.resource(s.client.approvals.get(approval_id))


def _review(s: Session, approval: Approval) -> None:
    """What the decision is about, on standard error."""
    expires = cell(approval.expires_at, human=True)
    s.out.say(f"approval   {approval.approval_id} ({approval.status}, expires {expires} UTC)")
    s.out.say(f"run        {shown(approval.run_id)}")
    s.out.say(f"task       {shown(approval.task_key)}")
    s.out.say(f"tool       {shown(approval.tool)}")
    s.out.say(f"arguments  {shown(approval.arguments_digest)}")
    for line in exact_json(approval.arguments):
        s.out.say(f"  {line}")


def _decision(decision: str, doc: str) -> Callable[..., None]:
    """The ``approve`` or ``reject`` command: described by ``doc``, sending ``decision``."""

    def decide(
        s: Session,
        approval_id: ApprovalArgument,
        *,
        comment: CommentOption = None,
        yes: YesOption = False,
        idempotency_key: IdempotencyKeyOption = None,
    ) -> None:
        key = check_idempotency_key(idempotency_key)
        approval = s.client.approvals.get(approval_id)
        _review(s, approval)
        if approval.is_pending:  # else the server says why nothing can be decided
            verb = "Approve" if decision == "approve" else "Reject"
            confirm(s.out, f"{verb} this call of {shown(approval.tool)}?", yes=yes)
        send = s.client.approvals.approve if decision == "approve" else s.client.approvals.reject
        try:
            decided = send(
                approval_id, approval.arguments_digest, comment=comment, idempotency_key=key
            )
        except ApprovalChanged as exc:
            not_as_shown(s.out, exc, "decided", "approval")
        s.out.resource(decided)
        if decision == "approve":
            s.out.say(f"approved: {shown(decided.tool)} runs once, with exactly these arguments")
        else:
            s.out.say(f"rejected: {shown(decided.tool)} does not run; the model is told")

    decide.__doc__ = doc
    return client_command(decide)


_APPROVE = """\
Show a pending tool call and, once confirmed, approve exactly its arguments.

The tool then runs once with those arguments. Exit 7 if the approval changed since it was
shown (approval_changed) or is no longer pending (approval_decided); 2 without a terminal
and without --yes; 13 when the answer is not yes.
"""
_REJECT = """\
Show a pending tool call and, once confirmed, reject it (the model is told, with --comment).

Exit codes as for approve.
"""
approvals_app.command("approve", epilog=_DECIDE_HELP)(_decision("approve", _APPROVE))
approvals_app.command("reject", epilog=_DECIDE_HELP)(_decision("reject", _REJECT))
