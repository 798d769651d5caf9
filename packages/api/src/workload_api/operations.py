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


# -- the table ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Operation:
    """One API operation: route, role, handler and what the document says about it."""

    method: str
    path: str
    operation_id: str
    summary: str
    role: Role
    handler: Callable[[Call], Awaitable[Response]]
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

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "POST",
        f"{_V}/workflows",
        "createWorkflow",
        "Create a workflow and its version 1",
        Role.OPERATOR,
        h.create_workflow,
        201,
        schemas.Version,
        tuple(e for e in _WRITE_ERRORS if e != 404),
        body="definition",
    ),
    Operation(
        "GET",
        f"{_V}/workflows",
        "listWorkflows",
        "List workflows",
        Role.VIEWER,
        h.list_workflows,
        200,
        schemas.Page[schemas.Workflow],
        tuple(e for e in _READ_ERRORS if e != 404),
        PAGED,
    ),
    Operation(
        "GET",
        f"{_V}/workflows/{{workflow_id}}",
        "getWorkflow",
        "Get a workflow",
        Role.VIEWER,
        h.get_workflow,
        200,
        schemas.Workflow,
        _READ_ERRORS,
    ),
    Operation(
        "PUT",
        f"{_V}/workflows/{{workflow_id}}",
        "applyWorkflow",
        "Apply a definition: a new version only when it differs from the latest (SPEC §6)",
        Role.OPERATOR,
        h.apply_workflow,
        201,
        schemas.Version,
        tuple(e for e in _WRITE_ERRORS if e != 404),
        body="definition",
        also=((200, "the latest version has this definition already: nothing was written"),),
        optional_key=True,
    ),
    Operation(
        "POST",
        f"{_V}/workflows/{{workflow_id}}/versions",
        "createVersion",
        "Create the next version of a workflow",
        Role.OPERATOR,
        h.create_version,
        201,
        schemas.Version,
        _WRITE_ERRORS,
        body="definition",
    ),
    Operation(
        "GET",
        f"{_V}/workflows/{{workflow_id}}/versions",
        "listVersions",
        "List a workflow's versions",
        Role.VIEWER,
        h.list_versions,
        200,
        schemas.Page[schemas.VersionSummary],
        _READ_ERRORS,
        PAGED,
    ),
    Operation(
        "GET",
        f"{_V}/workflows/{{workflow_id}}/versions/{{version}}",
        "getVersion",
        "Get a version with its definition",
        Role.VIEWER,
        h.get_version,
        200,
        schemas.Version,
        _READ_ERRORS,
    ),
    Operation(
        "POST",
        f"{_V}/workflows/{{workflow_id}}/versions/{{version}}/runs",
        "startRun",
        "Start a run of a version",
        Role.OPERATOR,
        h.start_run,
        202,
        schemas.Run,
        _WRITE_ERRORS,
        body="start_run",
    ),
    Operation(
        "GET",
        f"{_V}/runs",
        "listRuns",
        "List runs",
        Role.VIEWER,
        list_runs,
        200,
        schemas.Page[schemas.Run],
        tuple(e for e in _READ_ERRORS if e != 404),
        (*PAGED, *RUNS_QUERY),
    ),
    Operation(
        "GET",
        f"{_V}/runs/{{run_id}}",
        "getRun",
        "Get a run",
        Role.VIEWER,
        h.get_run,
        200,
        schemas.Run,
        _READ_ERRORS,
        etag=True,
    ),
    Operation(
        "POST",
        f"{_V}/runs/{{run_id}}/cancel",
        "cancelRun",
        "Cancel a run",
        Role.OPERATOR,
        h.cancel_run,
        202,
        schemas.Run,
        (*_WRITE_ERRORS, 412),
        body="empty",
        also=((200, "the run was already canceled"),),
    ),
    Operation(
        "GET",
        f"{_V}/runs/{{run_id}}/tasks",
        "listTasks",
        "List a run's tasks",
        Role.VIEWER,
        h.list_tasks,
        200,
        schemas.Page[schemas.TaskRun],
        _READ_ERRORS,
        PAGED,
    ),
    Operation(
        "GET",
        f"{_V}/runs/{{run_id}}/tasks/{{task_key}}",
        "getTask",
        "Get a task of a run",
        Role.VIEWER,
        h.get_task,
        200,
        schemas.TaskRun,
        _READ_ERRORS,
    ),
    Operation(
        "GET",
        f"{_V}/runs/{{run_id}}/tasks/{{task_key}}/attempts",
        "listAttempts",
        "List a task's attempts",
        Role.VIEWER,
        h.list_attempts,
        200,
        schemas.Page[schemas.Attempt],
        _READ_ERRORS,
        PAGED,
    ),
    Operation(
        "GET",
        f"{_V}/runs/{{run_id}}/tasks/{{task_key}}/steps",
        "listSteps",
        "List an agent task's steps (model and tool calls) by attempt and sequence",
        Role.VIEWER,
        h.list_steps,
        200,
        schemas.Page[schemas.Step],
        _READ_ERRORS,
        PAGED,
    ),
    Operation(
        "GET",
        f"{_V}/runs/{{run_id}}/events",
        "listEvents",
        "List a run's events",
        Role.VIEWER,
        h.list_events,
        200,
        schemas.Page[schemas.Event],
        _READ_ERRORS,
        PAGED,
    ),
    Operation(
        "GET",
        f"{_V}/runs/{{run_id}}/events/stream",
        "streamEvents",
        "Follow a run's events live (server-sent events; resumes after Last-Event-ID)",
        Role.VIEWER,
        stream_events,
        200,
        schemas.Event,
        (*_READ_ERRORS, 429),  # 429: capped per caller (ADR 0025)
        (AFTER,),
        stream=True,
        session=True,
    ),
    Operation(
        "POST",
        f"{_V}/workers/{{worker_id}}/claim",
        "claimAttempts",
        "Claim queued attempts (a worker; long-poll up to wait_seconds)",
        Role.WORKER,
        h.claim_attempts,
        200,
        schemas.ClaimResponse,
        (*_WORKER_ERRORS, 429),  # 429: capped per caller (ADR 0025)
        body=schemas.ClaimRequest,
        fenced=True,
    ),
    Operation(
        "POST",
        f"{_V}/attempts/{{attempt_id}}/heartbeat",
        "heartbeatAttempt",
        "Renew the lease of a claimed attempt (and report progress)",
        Role.WORKER,
        h.heartbeat,
        200,
        schemas.Lease,
        _WORKER_ERRORS,
        body=schemas.HeartbeatRequest,
        fenced=True,
    ),
    Operation(
        "POST",
        f"{_V}/attempts/{{attempt_id}}/complete",
        "completeAttempt",
        "Report a claimed attempt's success",
        Role.WORKER,
        h.complete_attempt,
        200,
        schemas.Attempt,
        _WORKER_ERRORS,
        body=schemas.CompleteRequest,
        fenced=True,
    ),
    Operation(
        "POST",
        f"{_V}/attempts/{{attempt_id}}/fail",
        "failAttempt",
        "Report a claimed attempt's failure",
        Role.WORKER,
        h.fail_attempt,
        200,
        schemas.Attempt,
        _WORKER_ERRORS,
        body=schemas.FailRequest,
        fenced=True,
    ),
    Operation(
        "GET",
        f"{_V}/approvals",
        "listApprovals",
        "List approvals of agents' tool calls (optionally ?status=pending)",
        Role.VIEWER,
        h.list_approvals,
        200,
        schemas.Page[schemas.Approval],
        tuple(e for e in _READ_ERRORS if e != 404),
        (*PAGED, *_APPROVALS_QUERY),
    ),
    Operation(
        "GET",
        f"{_V}/approvals/{{approval_id}}",
        "getApproval",
        "Get an approval",
        Role.VIEWER,
        h.get_approval,
        200,
        schemas.Approval,
        _READ_ERRORS,
    ),
    Operation(
        "POST",
        f"{_V}/approvals/{{approval_id}}/decision",
        "decideApproval",
        "Approve or reject a pending approval, for exactly the arguments its digest names",
        Role.OPERATOR,
        h.decide_approval,
        200,
        schemas.Approval,
        _WRITE_ERRORS,
        body=schemas.DecisionRequest,
    ),
    Operation(
        "POST",
        f"{_V}/drafts",
        "createDraft",
        "Ask a model for a workflow from a prompt (generated asynchronously)",
        Role.OPERATOR,
        h.create_draft,
        202,
        schemas.Draft,
        tuple(e for e in _WRITE_ERRORS if e != 404),
        body=schemas.CreateDraftRequest,
    ),
    Operation(
        "GET",
        f"{_V}/drafts",
        "listDrafts",
        "List drafts",
        Role.VIEWER,
        h.list_drafts,
        200,
        schemas.Page[schemas.Draft],
        tuple(e for e in _READ_ERRORS if e != 404),
        PAGED,
    ),
    Operation(
        "GET",
        f"{_V}/drafts/{{draft_id}}",
        "getDraft",
        "Get a draft",
        Role.VIEWER,
        h.get_draft,
        200,
        schemas.Draft,
        _READ_ERRORS,
    ),
    Operation(
        "POST",
        f"{_V}/drafts/{{draft_id}}/approve",
        "approveDraft",
        "Make a ready draft a workflow version, for exactly the definition hash given",
        Role.OPERATOR,
        h.approve_draft,
        200,
        schemas.Draft,
        _WRITE_ERRORS,
        body=schemas.ApproveDraftRequest,
    ),
    Operation(
        "POST",
        f"{_V}/drafts/{{draft_id}}/reject",
        "rejectDraft",
        "Reject a ready or invalid draft (no body)",
        Role.OPERATOR,
        h.reject_draft,
        200,
        schemas.Draft,
        _WRITE_ERRORS,
    ),
    Operation(
        "GET",
        f"{_V}/workers",
        "listWorkers",
        "List workers",
        Role.VIEWER,
        h.list_workers,
        200,
        schemas.Page[schemas.Worker],
        tuple(e for e in _READ_ERRORS if e != 404),
        PAGED,
    ),
    Operation(
        "GET",
        f"{_V}/queues",
        "listQueues",
        "List queues with their work",
        Role.VIEWER,
        h.list_queues,
        200,
        schemas.Queues,
        tuple(e for e in _READ_ERRORS if e != 404),
    ),
    Operation(
        "GET",
        f"{_V}/status",
        "getStatus",
        "The service at a glance: role, epoch, active runs and workers, approvals, queues",
        Role.VIEWER,
        h.get_status,
        200,
        schemas.ServiceStatus,
        tuple(e for e in _READ_ERRORS if e != 404),
    ),
    Operation(
        "GET",
        f"{_V}/cluster",
        "getCluster",
        "The live replicas and the shards each owns (SPEC §16)",
        Role.VIEWER,
        h.get_cluster,
        200,
        schemas.Cluster,
        tuple(e for e in _READ_ERRORS if e != 404),
    ),
)
