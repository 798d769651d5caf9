"""The HTTP operations of SPEC §6: one table drives both routing and the OpenAPI document."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from workload_api import schemas
from workload_api.auth import Principal, Role
from workload_api.jsonbody import read_json_object
from workload_api.problems import HttpProblem
from workload_api.service import ControlPlane
from workload_domain.cursors import DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT
from workload_domain.definition import TASK_KEY_PATTERN, WORKFLOW_ID_PATTERN
from workload_domain.errors import TaskNotFound, WorkflowNotFound
from workload_domain.idempotency import IdempotencyClaim, Outcome, request_hash
from workload_domain.statuses import RunStatus

__all__ = ["OPERATIONS", "Call", "Operation", "QueryParam"]

_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
_WORKFLOW_ID = re.compile(WORKFLOW_ID_PATTERN)
_TASK_KEY = re.compile(TASK_KEY_PATTERN)
_DIGITS = re.compile(r"^[0-9]{1,9}$")
_VERSION = re.compile(r"^[1-9][0-9]{0,8}$")  # one spelling per version: no sign, no leading 0
# If-Match compares strongly (RFC 9110 §13.1.1): a weak tag never matches.
_ETAG = re.compile(r'^\s*"([0-9]{1,18})"\s*$')


@dataclass(frozen=True, slots=True)
class QueryParam:
    """A query parameter an operation accepts."""

    name: str
    schema: Mapping[str, Any]
    description: str


LIMIT = QueryParam(
    "limit",
    {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_LIMIT, "default": DEFAULT_PAGE_LIMIT},
    "page size",
)
CURSOR = QueryParam(
    "cursor", {"type": "string", "maxLength": 1024}, "the next_cursor of the previous page"
)
PAGED = (LIMIT, CURSOR)


@dataclass(frozen=True, slots=True)
class Call:
    """What a handler gets: the request, the caller, the services."""

    request: Request
    principal: Principal | None
    service: ControlPlane

    def path(self, name: str) -> str:
        """A path parameter."""
        value: str = self.request.path_params[name]
        return value

    def workflow_id(self) -> str:
        """The path's workflow id; one that cannot exist is simply not found."""
        value = self.path("workflow_id")
        if not _WORKFLOW_ID.match(value):
            raise WorkflowNotFound(value)
        return value

    async def task_key(self, run_id: str) -> str:
        """The path's task key; one that cannot exist is not found (after its run is)."""
        value = self.path("task_key")
        if not _TASK_KEY.match(value):
            await self.service.store.get_run(run_id)  # a missing run is the answer first
            raise TaskNotFound(run_id, value)
        return value

    def claim(self, operation: str, body: Any) -> IdempotencyClaim:
        """The idempotency claim of a POST (SPEC §6: the key is required)."""
        key = self.request.headers.get("idempotency-key")
        if key is None:
            raise HttpProblem(
                400, "idempotency_key_required", "POST requests need an Idempotency-Key header"
            )
        if not _IDEMPOTENCY_KEY.match(key):
            raise HttpProblem(
                400,
                "invalid_argument",
                "Idempotency-Key must be 1-255 visible ASCII characters (0x21-0x7E)",
            )
        assert self.principal is not None  # every POST is authenticated
        digest = request_hash(operation, dict(self.request.path_params), body)
        return IdempotencyClaim(self.principal.id, key, operation, digest)

    def page_args(self, *extra: str) -> tuple[str | None, int]:
        """Validate the query string (only ``limit``, ``cursor`` and ``extra`` are known)."""
        query = self.request.query_params
        known = {"limit", "cursor", *extra}
        for name in query:
            if name not in known:
                raise _bad_query(f"unknown query parameter {name!r}")
        for name in known:
            if len(query.getlist(name)) > 1:
                raise _bad_query(f"query parameter {name!r} is repeated")
        raw_limit = query.get("limit")
        limit = DEFAULT_PAGE_LIMIT
        if raw_limit is not None:
            if not _DIGITS.match(raw_limit) or not 1 <= int(raw_limit) <= MAX_PAGE_LIMIT:
                raise _bad_query(f"limit must be an integer from 1 to {MAX_PAGE_LIMIT}")
            limit = int(raw_limit)
        return query.get("cursor"), limit


def _bad_query(detail: str) -> HttpProblem:
    return HttpProblem(400, "invalid_argument", detail)


def _outcome(outcome: Outcome, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(outcome.body, status_code=outcome.status_code, headers=headers)


def _run_location(outcome: Outcome) -> dict[str, str]:
    return {"Location": f"/api/v1/runs/{outcome.body['run_id']}"}


# -- handlers ----------------------------------------------------------------------------------


async def create_workflow(call: Call) -> Response:
    body = await read_json_object(call.request)
    claim = call.claim("create_workflow", body)
    return _outcome(await call.service.create_workflow(body or {}, claim))


async def list_workflows(call: Call) -> Response:
    cursor, limit = call.page_args()
    return JSONResponse(await call.service.list_workflows(cursor, limit))


async def get_workflow(call: Call) -> Response:
    call.page_args()  # no query parameters
    return JSONResponse(await call.service.get_workflow(call.workflow_id()))


async def create_version(call: Call) -> Response:
    workflow_id = call.workflow_id()
    body = await read_json_object(call.request)
    claim = call.claim("create_version", body)
    return _outcome(await call.service.create_version(workflow_id, body or {}, claim))


async def list_versions(call: Call) -> Response:
    cursor, limit = call.page_args()
    return JSONResponse(await call.service.list_versions(call.workflow_id(), cursor, limit))


def _version(call: Call) -> int | str:
    raw = call.path("version")
    return int(raw) if _VERSION.match(raw) else raw


async def get_version(call: Call) -> Response:
    call.page_args()
    return JSONResponse(await call.service.get_version(call.workflow_id(), _version(call)))


async def start_run(call: Call) -> Response:
    workflow_id = call.workflow_id()
    version = _version(call)
    body = await read_json_object(call.request, optional=True)
    # An absent body and {"input": {}} are the same request.
    claim = call.claim("start_run", {"input": {}, **(body or {})})
    if isinstance(version, str):  # names no version: the right 404 for the path
        await call.service.get_version(workflow_id, version)
    outcome = await call.service.start_run(workflow_id, int(version), body, claim)
    return _outcome(outcome, _run_location(outcome))


async def list_runs(call: Call) -> Response:
    cursor, limit = call.page_args("workflow_id", "status")
    query = call.request.query_params
    workflow_id = query.get("workflow_id")
    if workflow_id is not None and not _WORKFLOW_ID.match(workflow_id):
        raise _bad_query("workflow_id is not a valid workflow id")
    raw_status = query.get("status")
    status = None
    if raw_status is not None:
        try:
            status = RunStatus(raw_status)
        except ValueError:
            allowed = ", ".join(s.value for s in RunStatus)
            raise _bad_query(f"status must be one of: {allowed}") from None
    return JSONResponse(await call.service.list_runs(workflow_id, status, cursor, limit))


async def get_run(call: Call) -> Response:
    call.page_args()
    body, revision = await call.service.get_run(call.path("run_id"))
    return JSONResponse(body, headers={"ETag": f'"{revision}"'})


def _if_match(call: Call) -> int | None:
    raw = call.request.headers.get("if-match")
    if raw is None or raw.strip() == "*":
        return None
    match = _ETAG.match(raw)
    if match is None:
        raise HttpProblem(412, "precondition_failed", "If-Match names no revision of this run")
    return int(match[1])


async def cancel_run(call: Call) -> Response:
    run_id = call.path("run_id")
    body = await read_json_object(call.request, optional=True)
    if body:
        raise HttpProblem(400, "invalid_argument", "cancel takes no body fields")
    claim = call.claim("cancel_run", {})
    if_revision = _if_match(call)
    return _outcome(await call.service.cancel_run(run_id, if_revision, claim))


async def list_tasks(call: Call) -> Response:
    cursor, limit = call.page_args()
    return JSONResponse(await call.service.list_tasks(call.path("run_id"), cursor, limit))


async def get_task(call: Call) -> Response:
    call.page_args()
    run_id = call.path("run_id")
    return JSONResponse(await call.service.get_task(run_id, await call.task_key(run_id)))


async def list_attempts(call: Call) -> Response:
    cursor, limit = call.page_args()
    run_id = call.path("run_id")
    key = await call.task_key(run_id)
    return JSONResponse(await call.service.list_attempts(run_id, key, cursor, limit))


async def list_events(call: Call) -> Response:
    cursor, limit = call.page_args()
    return JSONResponse(await call.service.list_events(call.path("run_id"), cursor, limit))


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
    body: str | None = None  # "definition" | "start_run" | "empty"
    etag: bool = False

    @property
    def writes(self) -> bool:
        """Whether the operation writes (POST): operator role and an Idempotency-Key."""
        return self.method == "POST"


_READ_ERRORS = (400, 401, 404, 405, 503)
_WRITE_ERRORS = (400, 401, 403, 404, 405, 409, 413, 415, 503)
_V = "/api/v1"
_RUNS_QUERY = (
    QueryParam(
        "workflow_id",
        {"type": "string", "pattern": WORKFLOW_ID_PATTERN},
        "only this workflow's runs",
    ),
    QueryParam(
        "status",
        {"type": "string", "enum": [s.value for s in RunStatus]},
        "only runs in this status",
    ),
)

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "POST",
        f"{_V}/workflows",
        "createWorkflow",
        "Create a workflow and its version 1",
        Role.OPERATOR,
        create_workflow,
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
        list_workflows,
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
        get_workflow,
        200,
        schemas.Workflow,
        _READ_ERRORS,
    ),
    Operation(
        "POST",
        f"{_V}/workflows/{{workflow_id}}/versions",
        "createVersion",
        "Create the next version of a workflow",
        Role.OPERATOR,
        create_version,
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
        list_versions,
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
        get_version,
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
        start_run,
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
        (*PAGED, *_RUNS_QUERY),
    ),
    Operation(
        "GET",
        f"{_V}/runs/{{run_id}}",
        "getRun",
        "Get a run",
        Role.VIEWER,
        get_run,
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
        cancel_run,
        202,
        schemas.Run,
        (*_WRITE_ERRORS, 412),
        body="empty",
    ),
    Operation(
        "GET",
        f"{_V}/runs/{{run_id}}/tasks",
        "listTasks",
        "List a run's tasks",
        Role.VIEWER,
        list_tasks,
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
        get_task,
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
        list_attempts,
        200,
        schemas.Page[schemas.Attempt],
        _READ_ERRORS,
        PAGED,
    ),
    Operation(
        "GET",
        f"{_V}/runs/{{run_id}}/events",
        "listEvents",
        "List a run's events",
        Role.VIEWER,
        list_events,
        200,
        schemas.Page[schemas.Event],
        _READ_ERRORS,
        PAGED,
    ),
)
