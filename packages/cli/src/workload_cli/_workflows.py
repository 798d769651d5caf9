"""``workload workflows …``: create and apply workflows and versions, list and show them."""

from __future__ import annotations

from typing import Annotated

import typer

from workload_cli._definitions import definitions_to_apply
from workload_cli._exit import exit_code_for_error
from workload_cli._inputs import check_idempotency_key, read_object_file
from workload_cli._options import DefinitionArgument, IdempotencyKeyOption
from workload_cli._session import Session, client_command
from workload_cli._views import VERSION_COLUMNS, WORKFLOW_COLUMNS
from workload_sdk import Conflict, InvalidRequest, PayloadTooLarge, WorkloadError

__all__ = ["workflows_app"]

workflows_app = typer.Typer(help="Workflows and their immutable versions.", no_args_is_help=True)

WorkflowArgument = Annotated[str, typer.Argument(help="The workflow id.", show_default=False)]
ApplyArgument = Annotated[
    str,
    typer.Argument(
        help="A JSON workflow definition (- for standard input), a Python MODULE whose every "
        "workload_worker.Workflow is applied, or MODULE:ATTRIBUTE (a Workflow, or a list of "
        "them).",
        metavar="FILE|MODULE[:ATTRIBUTE]",
        show_default=False,
    ),
]


@workflows_app.command("create")
@client_command
def create(
    s: Session,
    file: DefinitionArgument,
    *,
    idempotency_key: IdempotencyKeyOption = None,
) -> None:
    """Create a workflow and its version 1 from a definition file; print the version."""
    definition = read_object_file(file)
    key = check_idempotency_key(idempotency_key)
    version = s.client.workflows.create(definition, idempotency_key=key)
    s.out.resource(version)
    s.out.say(f"created {version.workflow_id} version {version.version}")


@workflows_app.command("apply")
@client_command
def apply(s: Session, target: ApplyArgument) -> None:
    """Apply definitions by content: a new version only where one changed.

    Prints "created ID version N" or "unchanged ID version N" per workflow (--output json: a
    list of {workflow_id, version, created}). Every definition is read and built first: a file
    that is not JSON, a module that does not import or an attribute that is not a Workflow
    exits 2 with nothing written. A module is imported from the current directory too, as
    `workload worker` does. A definition the server refuses is said and the others are still
    applied; the command then exits with the first refusal's code. Applying is idempotent: run
    it again and nothing changes.
    """
    sources = definitions_to_apply(target)
    applied: list[dict[str, object]] = []
    refused: WorkloadError | None = None
    for source in sources:
        try:
            version = s.client.workflows.apply(source.definition)
        except (InvalidRequest, Conflict, PayloadTooLarge) as exc:  # this one's: the others go on
            s.out.say(f"{source.label}: not applied", style="red")
            s.out.problem(exc)
            refused = refused or exc
            continue
        except WorkloadError:  # the server, the network or the token: nothing else would go
            s.out.say(f"{source.label}: not applied", style="red")
            if s.out.is_json and applied:  # what was applied before, for a deploy step to read
                s.out.json(applied)
            raise
        applied.append(
            {
                "workflow_id": version.workflow_id,
                "version": version.version,
                "created": version.created,
            }
        )
        if not s.out.is_json:
            outcome = "created" if version.created else "unchanged"
            s.out.echo(f"{outcome} {version.workflow_id} version {version.version}")
    if s.out.is_json:
        s.out.json(applied)
    if refused is not None:
        raise typer.Exit(exit_code_for_error(refused))


@workflows_app.command("new-version")
@client_command
def new_version(
    s: Session,
    workflow_id: WorkflowArgument,
    file: DefinitionArgument,
    *,
    idempotency_key: IdempotencyKeyOption = None,
) -> None:
    """Create the next version of a workflow (the file's id may be omitted); print it."""
    definition = read_object_file(file)
    key = check_idempotency_key(idempotency_key)
    version = s.client.versions.create(workflow_id, definition, idempotency_key=key)
    s.out.resource(version)
    s.out.say(f"created {version.workflow_id} version {version.version}")


@workflows_app.command("list")
@client_command
def list_workflows(s: Session) -> None:
    """List every workflow, oldest first."""
    s.out.listing(s.client.workflows.list(limit=200), WORKFLOW_COLUMNS)


@workflows_app.command("show")
@client_command
def show(
    s: Session,
    workflow_id: WorkflowArgument,
    *,
    version: Annotated[
        int | None,
        typer.Option("--version", help="Show this version with its definition instead.", min=1),
    ] = None,
) -> None:
    """Show a workflow, or one of its versions with its normalized definition."""
    if version is None:
        s.out.resource(s.client.workflows.get(workflow_id))
    else:
        s.out.resource(s.client.versions.get(workflow_id, version))


@workflows_app.command("versions")
@client_command
def versions(s: Session, workflow_id: WorkflowArgument) -> None:
    """List a workflow's versions (summaries, without definitions)."""
    s.out.listing(s.client.versions.list(workflow_id, limit=200), VERSION_COLUMNS)
