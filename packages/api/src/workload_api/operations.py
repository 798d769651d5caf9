"""One file because it is one table: the HTTP operations of SPEC §6, every route in one place.

The table drives both routing and the OpenAPI document.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from starlette.responses import Response

from workload_api import handlers as h
from workload_api import schemas
from workload_api.auth import Role
from workload_api.event_stream import stream_events
from workload_api.handlers import AFTER, PAGED, Call, QueryParam
from workload_api.runs_listing import RUNS_QUERY, list_runs
from workload_domain.approvals import ApprovalStatus

__all__ = ["OPERATIONS", "Call", "Operation", "QueryParam"]

Handler = Callable[[Call], Awaitable[Response]]
"""What serves an operation: the call in, the response out."""


# -- the table ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Operation:
    """One API operation: route, role, handler and what the document says about it."""

    method: str
    path: str
    operation_id: str
    summary: str
    role: Role
    handler: Handler
    success: int
    response: type[BaseModel] | Any
    errors: tuple[int, ...]
    query: tuple[QueryParam, ...] = ()
    body: str | type[BaseModel] | None = None  # "definition" | "start_run" | "empty" | a model
    etag: bool = False
    fenced: bool = False
    """A worker's report: fenced by its lease, so it takes no Idempotency-Key (SPEC §10)."""
    stream: bool = False
    """The success response is a ``text/event-stream`` of ``response`` items (SPEC §13)."""
    also: tuple[tuple[int, str], ...] = ()
    """Other success statuses, each with what it means (a cancel of a canceled run: 200)."""
    optional_key: bool = False
    """A write idempotent by itself (a PUT): an ``Idempotency-Key`` is accepted, not needed."""
    session: bool = False
    """A read the web console makes from the browser: its session cookie is accepted in place
    of a bearer token (an ``EventSource`` cannot send headers)."""

    @property
    def writes(self) -> bool:
        """Whether the operation is a POST that needs an ``Idempotency-Key``."""
        return self.method == "POST" and not self.fenced


# A worker token is refused (403) on everything that is not a worker's.
_APPROVALS_QUERY = (
    QueryParam(
        "status",
        {"type": "string", "enum": [s.value for s in ApprovalStatus]},
        "only approvals in this status",
    ),
)
_READ_ERRORS = (400, 401, 403, 404, 405, 503)
_WRITE_ERRORS = (400, 401, 403, 404, 405, 409, 413, 415, 503)
_WORKER_ERRORS = (400, 401, 403, 405, 409, 413, 415, 503)
_V = "/api/v1"


def _errors(
    common: tuple[int, ...], path: str, more: tuple[int, ...], *, may_be_missing: bool = True
) -> tuple[int, ...]:
    """``common`` and ``more``; a 404 only where ``path`` names one thing (it has an id).

    ``may_be_missing=False``: the operation creates what the path names (a PUT).
    """
    found = "{" in path and may_be_missing
    return (*(e for e in common if found or e != 404), *more)


def _read(
    path: str,
    operation_id: str,
    summary: str,
    handler: Handler,
    response: type[BaseModel] | Any,
    *,
    query: tuple[QueryParam, ...] = (),
    more_errors: tuple[int, ...] = (),
    etag: bool = False,
    stream: bool = False,
    session: bool = False,
) -> Operation:
    """A viewer's ``GET`` of ``/api/v1`` + ``path``, answered 200."""
    return Operation(
        "GET",
        _V + path,
        operation_id,
        summary,
        Role.VIEWER,
        handler,
        200,
        response,
        _errors(_READ_ERRORS, path, more_errors),
        query,
        etag=etag,
        stream=stream,
        session=session,
    )


def _list(
    path: str,
    operation_id: str,
    summary: str,
    handler: Handler,
    item: type[BaseModel],
    *,
    query: tuple[QueryParam, ...] = (),
) -> Operation:
    """A viewer's paged ``GET`` of a collection: a :class:`~schemas.Page` of ``item``.

    It takes the paging parameters, then ``query``.
    """
    page = schemas.Page[item]  # type: ignore[valid-type]  # the class is a value here
    return _read(path, operation_id, summary, handler, page, query=(*PAGED, *query))


def _write(
    path: str,
    operation_id: str,
    summary: str,
    handler: Handler,
    response: type[BaseModel],
    *,
    success: int = 200,
    body: str | type[BaseModel] | None = None,
    method: str = "POST",
    more_errors: tuple[int, ...] = (),
    creates: bool = False,
    also: tuple[tuple[int, str], ...] = (),
    optional_key: bool = False,
) -> Operation:
    """An operator's write (a ``POST`` unless ``method`` says otherwise) to ``/api/v1`` + ``path``.

    ``creates``: the write creates what its path names, so it is never a 404 (a PUT).
    """
    return Operation(
        method,
        _V + path,
        operation_id,
        summary,
        Role.OPERATOR,
        handler,
        success,
        response,
        _errors(_WRITE_ERRORS, path, more_errors, may_be_missing=not creates),
        body=body,
        also=also,
        optional_key=optional_key,
    )


def _report(
    path: str,
    operation_id: str,
    summary: str,
    handler: Handler,
    response: type[BaseModel],
    *,
    body: type[BaseModel],
    more_errors: tuple[int, ...] = (),
) -> Operation:
    """A worker's ``POST`` to ``/api/v1`` + ``path``, answered 200 and fenced by its lease."""
    return Operation(
        "POST",
        _V + path,
        operation_id,
        summary,
        Role.WORKER,
        handler,
        200,
        response,
        (*_WORKER_ERRORS, *more_errors),
        body=body,
        fenced=True,
    )


OPERATIONS: tuple[Operation, ...] = (
    _write(
        "/workflows",
        "createWorkflow",
        "Create a workflow and its version 1",
        h.create_workflow,
        schemas.Version,
        success=201,
        body="definition",
    ),
    _list("/workflows", "listWorkflows", "List workflows", h.list_workflows, schemas.Workflow),
    _read(
        "/workflows/{workflow_id}",
        "getWorkflow",
        "Get a workflow",
        h.get_workflow,
        schemas.Workflow,
    ),
    _write(
        "/workflows/{workflow_id}",
        "applyWorkflow",
        "Apply a definition: a new version only when it differs from the latest (SPEC §6)",
        h.apply_workflow,
        schemas.Version,
        success=201,
        body="definition",
        method="PUT",
        creates=True,
        also=((200, "the latest version has this definition already: nothing was written"),),
        optional_key=True,
    ),
    _write(
        "/workflows/{workflow_id}/versions",
        "createVersion",
        "Create the next version of a workflow",
        h.create_version,
        schemas.Version,
        success=201,
        body="definition",
    ),
    _list(
        "/workflows/{workflow_id}/versions",
        "listVersions",
        "List a workflow's versions",
        h.list_versions,
        schemas.VersionSummary,
    ),
    _read(
        "/workflows/{workflow_id}/versions/{version}",
        "getVersion",
        "Get a version with its definition",
        h.get_version,
        schemas.Version,
    ),
    _write(
        "/workflows/{workflow_id}/versions/{version}/runs",
        "startRun",
        "Start a run of a version",
        h.start_run,
        schemas.Run,
        success=202,
        body="start_run",
    ),
    _list("/runs", "listRuns", "List runs", list_runs, schemas.Run, query=RUNS_QUERY),
    _read("/runs/{run_id}", "getRun", "Get a run", h.get_run, schemas.Run, etag=True),
    _write(
        "/runs/{run_id}/cancel",
        "cancelRun",
        "Cancel a run",
        h.cancel_run,
        schemas.Run,
        success=202,
        body="empty",
        more_errors=(412,),
        also=((200, "the run was already canceled"),),
    ),
    _list("/runs/{run_id}/tasks", "listTasks", "List a run's tasks", h.list_tasks, schemas.TaskRun),
    _read(
        "/runs/{run_id}/tasks/{task_key}",
        "getTask",
        "Get a task of a run",
        h.get_task,
        schemas.TaskRun,
    ),
    _list(
        "/runs/{run_id}/tasks/{task_key}/attempts",
        "listAttempts",
        "List a task's attempts",
        h.list_attempts,
        schemas.Attempt,
    ),
    _list(
        "/runs/{run_id}/tasks/{task_key}/steps",
        "listSteps",
        "List an agent task's steps (model and tool calls) by attempt and sequence",
        h.list_steps,
        schemas.Step,
    ),
    _list(
        "/runs/{run_id}/events", "listEvents", "List a run's events", h.list_events, schemas.Event
    ),
    _read(
        "/runs/{run_id}/events/stream",
        "streamEvents",
        "Follow a run's events live (server-sent events; resumes after Last-Event-ID)",
        stream_events,
        schemas.Event,
        query=(AFTER,),
        more_errors=(429,),
        stream=True,
        session=True,
    ),
    _report(
        "/workers/{worker_id}/claim",
        "claimAttempts",
        "Claim queued attempts (a worker; long-poll up to wait_seconds)",
        h.claim_attempts,
        schemas.ClaimResponse,
        body=schemas.ClaimRequest,
        more_errors=(429,),
    ),
    _report(
        "/attempts/{attempt_id}/heartbeat",
        "heartbeatAttempt",
        "Renew the lease of a claimed attempt (and report progress)",
        h.heartbeat,
        schemas.Lease,
        body=schemas.HeartbeatRequest,
    ),
    _report(
        "/attempts/{attempt_id}/complete",
        "completeAttempt",
        "Report a claimed attempt's success",
        h.complete_attempt,
        schemas.Attempt,
        body=schemas.CompleteRequest,
    ),
    _report(
        "/attempts/{attempt_id}/fail",
        "failAttempt",
        "Report a claimed attempt's failure",
        h.fail_attempt,
        schemas.Attempt,
        body=schemas.FailRequest,
    ),
    _list(
        "/approvals",
        "listApprovals",
        "List approvals of agents' tool calls (optionally ?status=pending)",
        h.list_approvals,
        schemas.Approval,
        query=_APPROVALS_QUERY,
    ),
    _read(
        "/approvals/{approval_id}",
        "getApproval",
        "Get an approval",
        h.get_approval,
        schemas.Approval,
    ),
    _write(
        "/approvals/{approval_id}/decision",
        "decideApproval",
        "Approve or reject a pending approval, for exactly the arguments its digest names",
        h.decide_approval,
        schemas.Approval,
        body=schemas.DecisionRequest,
    ),
    _write(
        "/drafts",
        "createDraft",
        "Ask a model for a workflow from a prompt (generated asynchronously)",
        h.create_draft,
        schemas.Draft,
        success=202,
        body=schemas.CreateDraftRequest,
    ),
    _list("/drafts", "listDrafts", "List drafts", h.list_drafts, schemas.Draft),
    _read("/drafts/{draft_id}", "getDraft", "Get a draft", h.get_draft, schemas.Draft),
    _write(
        "/drafts/{draft_id}/approve",
        "approveDraft",
        "Make a ready draft a workflow version, for exactly the definition hash given",
        h.approve_draft,
        schemas.Draft,
        body=schemas.ApproveDraftRequest,
    ),
    _write(
        "/drafts/{draft_id}/reject",
        "rejectDraft",
        "Reject a ready or invalid draft (no body)",
        h.reject_draft,
        schemas.Draft,
    ),
    _list("/workers", "listWorkers", "List workers", h.list_workers, schemas.Worker),
    _read("/queues", "listQueues", "List queues with their work", h.list_queues, schemas.Queues),
    _read(
        "/status",
        "getStatus",
        "The service at a glance: role, epoch, active runs and workers, approvals, queues",
        h.get_status,
        schemas.ServiceStatus,
    ),
    _read(
        "/cluster",
        "getCluster",
        "The live replicas and the shards each owns (SPEC §16)",
        h.get_cluster,
        schemas.Cluster,
    ),
)
