"""``workload drafts …``: workflows written by a model, made versions by a person (SPEC §11).

``show`` prints a draft for a person: its fields, every problem of every answer, the definition
as JSON and its DAG as text (:mod:`workload_cli._dag`). ``approve`` shows the same on standard
error, asks (see :mod:`workload_cli._review`), and sends the ``definition_hash`` of what it
showed: if the server's draft differs, nothing is created (409 ``draft_changed``, exit 7).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Annotated, Any

import typer

from workload_cli._dag import dag_lines
from workload_cli._exit import CLIENT_CODES, ExitCode, exit_codes_help
from workload_cli._inputs import check_idempotency_key, read_json_file
from workload_cli._options import IdempotencyKeyOption, limit_option, page_size
from workload_cli._output import cell
from workload_cli._review import confirm, exact_json, not_as_shown
from workload_cli._session import Session, UsageError, client_command
from workload_cli._views import DRAFT_COLUMNS, usage_text
from workload_sdk import Draft, DraftChanged

__all__ = ["drafts_app"]

_CREATE_HELP = exit_codes_help(*CLIENT_CODES, ExitCode.WAIT_TIMEOUT)
_APPROVE_HELP = exit_codes_help(*CLIENT_CODES, ExitCode.DECLINED)

drafts_app = typer.Typer(
    help="Workflows written by a model from a prompt; a version only once a person approves.",
    no_args_is_help=True,
)

_POLL = 0.2  # seconds between polls of --wait

DraftArgument = Annotated[str, typer.Argument(help="The draft id.", show_default=False)]


def _script(path: str | None) -> list[dict[str, Any]] | None:
    """The mock model's turns from ``--script``: a JSON array of objects."""
    if path is None:
        return None
    turns = read_json_file(path)
    if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
        source = "standard input" if path == "-" else path
        raise UsageError(f'{source} must hold a JSON array of turns {{"content": "…"}}')
    return turns


def _summary(draft: Draft) -> list[tuple[str, Any]]:
    return [
        ("draft_id", draft.draft_id),
        ("status", draft.status),
        ("workflow_id", draft.workflow_id),
        ("version", draft.version),
        ("model", draft.model),
        ("prompt", draft.prompt),
        ("definition_hash", draft.definition_hash),
        ("usage", usage_text(draft.usage) or None),
        ("created_by", draft.created_by),
        ("created_at", draft.created_at),
        ("updated_at", draft.updated_at),
    ]


def _sections(draft: Draft) -> list[tuple[str, list[str]]]:
    """The problems, the definition and its DAG, each a titled block of lines."""
    sections = []
    if draft.problems:
        problems = [f"answer {p.answer}: {p.path or '/'}: {p.message}" for p in draft.problems]
        sections.append((f"problems ({len(draft.problems)})", problems))
    if draft.definition is not None:
        sections.append(("definition", exact_json(draft.definition)))
        sections.append(("dag (topological order)", dag_lines(draft.definition)))
    return sections


def _write_sections(write: Callable[[str], None], draft: Draft) -> None:
    for title, lines in _sections(draft):
        write(title)
        for line in lines:
            write(f"  {line}")


def _show(s: Session, draft: Draft) -> None:
    """A draft on standard output: the resource as JSON, else its fields and sections."""
    if s.out.is_json:
        s.out.resource(draft)
        return
    s.out.fields(_summary(draft))
    _write_sections(s.out.echo, draft)


@drafts_app.command("create", epilog=_CREATE_HELP)
@client_command
def create(
    s: Session,
    prompt: Annotated[str, typer.Argument(help="What the workflow should do.", show_default=False)],
    *,
    workflow_id: Annotated[
        str | None,
        typer.Option(help="Draft the next version of this workflow.", show_default=False),
    ] = None,
    model: Annotated[
        str, typer.Option(help="The model: mock, or <endpoint>:<model-name> (openai:gpt-4o).")
    ] = "mock",
    script: Annotated[
        str | None,
        typer.Option(
            help="The mock model's answers: a JSON file (- for standard input) holding an "
            'array of turns {"content": "…"}.',
            metavar="FILE",
            show_default=False,
        ),
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait until it is written, then show it.")
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            help="With --wait: give up after this many seconds (exit 12; it goes on).",
            min=0,
            show_default=False,
        ),
    ] = None,
    idempotency_key: IdempotencyKeyOption = None,
) -> None:
    """Ask a model for a workflow; print the draft (with --wait: once written, as show does)."""
    turns = _script(script)
    key = check_idempotency_key(idempotency_key)
    draft = s.client.drafts.create(
        prompt, workflow_id=workflow_id, model=model, script=turns, idempotency_key=key
    )
    if not wait:
        s.out.resource(draft)
        s.out.say(f"created draft {draft.draft_id} (generating)")
        return
    s.out.say(f"created draft {draft.draft_id}; the model is writing it…")
    draft = s.client.drafts.wait(draft.draft_id, timeout=timeout, poll_interval=_POLL)
    _show(s, draft)
    s.out.say(f"draft {draft.draft_id} is {draft.status}")


@drafts_app.command("list")
@client_command
def list_drafts(
    s: Session,
    *,
    limit: Annotated[int | None, limit_option("drafts")] = None,
) -> None:
    """List drafts, oldest first: status, workflow and version, tasks, problems, prompt."""
    pager = s.client.drafts.list(limit=page_size(limit))
    s.out.listing(itertools.islice(pager, limit), DRAFT_COLUMNS)


@drafts_app.command("show")
@client_command
def show(s: Session, draft_id: DraftArgument) -> None:
    """Show a draft: status, problems, the definition as JSON and its DAG as text.

    The DAG lists each task with its action and what it depends on, in topological order.
    --output json prints the draft resource only.
    """
    _show(s, s.client.drafts.get(draft_id))


@drafts_app.command("approve", epilog=_APPROVE_HELP)
@client_command
def approve(
    s: Session,
    draft_id: DraftArgument,
    *,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Approve without a prompt (required when standard input is not a terminal).",
        ),
    ] = False,
    idempotency_key: IdempotencyKeyOption = None,
) -> None:
    """Show a ready draft and, once confirmed, make exactly its definition a version.

    Exit 7 if the draft changed since it was shown (draft_changed) or is not ready
    (draft_not_ready); 2 without a terminal and without --yes; 13 when the answer is not yes.
    """
    key = check_idempotency_key(idempotency_key)
    draft = s.client.drafts.get(draft_id)
    for name, value in _summary(draft):
        if value is not None:
            s.out.say(f"{name:<16}{cell(value, human=True)}")
    _write_sections(s.out.say, draft)
    if draft.status == "ready":  # else the server says why nothing can be approved
        target = f"workflow {draft.workflow_id}" if draft.workflow_id else "a workflow"
        confirm(s.out, f"Make this definition a version of {target}?", yes=yes)
    try:
        approved = s.client.drafts.approve(
            draft_id, draft.definition_hash or "", idempotency_key=key
        )
    except DraftChanged as exc:
        not_as_shown(s.out, exc, "created", "draft")
    s.out.resource(approved)
    already = "already " if draft.status == "approved" else ""
    s.out.say(f"{already}approved: {approved.workflow_id} version {approved.version}")


@drafts_app.command("reject")
@client_command
def reject(
    s: Session,
    draft_id: DraftArgument,
    *,
    idempotency_key: IdempotencyKeyOption = None,
) -> None:
    """Reject a ready or invalid draft: it never becomes a version."""
    key = check_idempotency_key(idempotency_key)
    rejected = s.client.drafts.reject(draft_id, idempotency_key=key)
    s.out.resource(rejected)
    s.out.say(f"rejected draft {rejected.draft_id}")
