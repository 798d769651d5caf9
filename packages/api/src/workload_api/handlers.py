"""The handlers of the HTTP operations: they translate HTTP to a use case and back, only.

Each parses its path, query string, headers (``Idempotency-Key``, ``If-Match``) and body,
calls one use case, and answers its :class:`~workload_api.usecases.Result`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

import anyio
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response

from workload_api._errors import single_errors
from workload_api.auth import Principal
from workload_api.jsonbody import read_json_object
from workload_api.jsonresponse import JSONResponse
from workload_api.problems import HttpProblem
from workload_api.usecases import Result, UseCases
from workload_api.usecases.approvals import decider
from workload_domain.approvals import ApprovalStatus
from workload_domain.cursors import DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT
from workload_domain.definition import VERSION_NUMBER_PATTERN, WORKFLOW_ID_PATTERN
from workload_domain.errors import WorkflowNotFound, quoted
from workload_domain.idempotency import IdempotencyClaim, request_hash
from workload_domain.workers import WORKER_ID_PATTERN

__all__ = [
    "AFTER",
    "CURSOR",
    "LIMIT",
    "PAGED",
    "SEQUENCE",
    "Call",
    "QueryParam",
    "bad_query",
    "check_query_names",
    "respond",
]

_E = TypeVar("_E", bound=StrEnum)

_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
_WORKFLOW_ID = re.compile(WORKFLOW_ID_PATTERN)
_WORKER_ID = re.compile(WORKER_ID_PATTERN)
_DIGITS = re.compile(r"^[0-9]{1,9}$")
_VERSION = re.compile(VERSION_NUMBER_PATTERN)
# One element of an If-Match list. It compares strongly (RFC 9110 §13.1.1): a weak tag never
# matches. (Our tags are digits: splitting the list on commas cannot cut one.)
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
AFTER = QueryParam(
    "after",
    {"type": "integer", "minimum": 0, "maximum": 999_999_999_999_999_999},
    "start after this sequence (Last-Event-ID, when sent, takes precedence)",
)
SEQUENCE = re.compile(r"^[0-9]{1,18}$")
"""An event sequence as a client may name it (``after``, ``Last-Event-ID``)."""


@dataclass(frozen=True, slots=True)
class Call:
    """What a handler gets: the request, the caller, the use cases."""

    request: Request
    principal: Principal | None
    usecases: UseCases

    def path(self, name: str) -> str:
        """A path parameter."""
        value: str = self.request.path_params[name]
        return value

    def workflow_id(self) -> str:
        """The path's workflow id; one that cannot exist is simply not found."""
        value = self.path("workflow_id")
        if not _WORKFLOW_ID.fullmatch(value):
            raise WorkflowNotFound(value)
        return value

    def claim(self, operation: str, body: Any) -> IdempotencyClaim:
        """The idempotency claim of a POST (SPEC §6: the key is required)."""
        keys = self.request.headers.getlist("idempotency-key")
        if not keys:
            raise HttpProblem(
                400, "idempotency_key_required", "POST requests need an Idempotency-Key header"
            )
        if len(keys) > 1:  # which one would a retry be matched by? (a proxy may add one)
            raise HttpProblem(
                400, "invalid_argument", "send one Idempotency-Key header, not several"
            )
        key = keys[0]
        if not _IDEMPOTENCY_KEY.fullmatch(key):
            raise HttpProblem(
                400,
                "invalid_argument",
                "Idempotency-Key must be 1-255 visible ASCII characters (0x21-0x7E)",
            )
        assert self.principal is not None  # every POST is authenticated
        digest = request_hash(operation, dict(self.request.path_params), body)
        return IdempotencyClaim(self.principal.id, key, operation, digest)

    def optional_claim(self, operation: str, body: Any) -> IdempotencyClaim | None:
        """The idempotency claim of a write whose key is optional (a PUT): None without one."""
        if self.request.headers.get("idempotency-key") is None:
            return None
        return self.claim(operation, body)

    def page_args(self, *extra: str) -> tuple[str | None, int]:
        """Validate the query string (only ``limit``, ``cursor`` and ``extra`` are known)."""
        query = self.request.query_params
        known = {"limit", "cursor", *extra}
        check_query_names(query, known)
        for name in known:
            if len(query.getlist(name)) > 1:
                raise bad_query(f"query parameter {quoted(name)} is repeated")
        raw_limit = query.get("limit")
        limit = DEFAULT_PAGE_LIMIT
        if raw_limit is not None:
            if not _DIGITS.fullmatch(raw_limit) or not 1 <= int(raw_limit) <= MAX_PAGE_LIMIT:
                raise bad_query(f"limit must be an integer from 1 to {MAX_PAGE_LIMIT}")
            limit = int(raw_limit)
        return query.get("cursor"), limit

    def enum_query(self, name: str, values: type[_E]) -> _E | None:
        """The query parameter ``name``, one of ``values`` (None when it is not given)."""
        raw = self.request.query_params.get(name)
        if raw is None:
            return None
        try:
            return values(raw)
        except ValueError:
            allowed = ", ".join(v.value for v in values)
            raise bad_query(f"{name} must be one of: {allowed}") from None


def check_query_names(query: QueryParams, accepted: Collection[str]) -> None:
    """Refuse a query parameter that is not ``accepted`` (SPEC §6: query strings are validated).

    Every operation's accepted names are those its OpenAPI entry declares (``Operation.query``):
    a name no operation reads is refused, not ignored.
    """
    for name in query:
        if name not in accepted:
            raise bad_query(f"unknown query parameter {quoted(name)}")


def bad_query(detail: str) -> HttpProblem:
    """The 400 of a malformed query string."""
    return HttpProblem(400, "invalid_argument", detail)


def respond(result: Result, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The response of a use case's result (``Idempotent-Replayed: true`` on a replay)."""
    merged = dict(headers or {})
    if result.replayed:
        merged["Idempotent-Replayed"] = "true"
    return JSONResponse(result.body, status_code=result.status_code, headers=merged)


# -- handlers ----------------------------------------------------------------------------------


async def create_workflow(call: Call) -> Response:
    body = await read_json_object(call.request)
    claim = call.claim("create_workflow", body)
    return respond(await call.usecases.workflows.create(body or {}, claim))


async def list_workflows(call: Call) -> Response:
    cursor, limit = call.page_args()
    return JSONResponse(await call.usecases.workflows.list(cursor, limit))


async def get_workflow(call: Call) -> Response:
    call.page_args()  # no query parameters
    return JSONResponse(await call.usecases.workflows.get(call.workflow_id()))


async def create_version(call: Call) -> Response:
    workflow_id = call.workflow_id()
    body = await read_json_object(call.request)
    claim = call.claim("create_version", body)
    return respond(await call.usecases.workflows.create_version(workflow_id, body or {}, claim))


async def apply_workflow(call: Call) -> Response:
    # The path may name a workflow to create: an id the compiler refuses is a 400, not a 404.
    workflow_id = call.path("workflow_id")
    call.page_args()  # no query parameters
    body = await read_json_object(call.request)
    claim = call.optional_claim("apply_workflow", body)
    return respond(await call.usecases.workflows.apply(workflow_id, body or {}, claim))


async def list_versions(call: Call) -> Response:
    cursor, limit = call.page_args()
    workflows = call.usecases.workflows
    return JSONResponse(await workflows.list_versions(call.workflow_id(), cursor, limit))


def _version(call: Call) -> int | str:
    raw = call.path("version")
    return int(raw) if _VERSION.fullmatch(raw) else raw


async def get_version(call: Call) -> Response:
    call.page_args()
    workflows = call.usecases.workflows
    return JSONResponse(await workflows.get_version(call.workflow_id(), _version(call)))


async def start_run(call: Call) -> Response:
    workflow_id = call.workflow_id()
    version = _version(call)
    body = await read_json_object(call.request, optional=True)
    # An absent body and {"input": {}} are the same request.
    claim = call.claim("start_run", {"input": {}, **(body or {})})
    if isinstance(version, str):  # names no version: the right 404 for the path
        await call.usecases.workflows.get_version(workflow_id, version)
    result = await call.usecases.runs.start(workflow_id, int(version), body, claim)
    return respond(result, {"Location": f"/api/v1/runs/{result.body['run_id']}"})


async def get_run(call: Call) -> Response:
    call.page_args()
    body, revision = await call.usecases.runs.get(call.path("run_id"))
    return JSONResponse(body, headers={"ETag": f'"{revision}"'})


def _if_match(call: Call) -> frozenset[int] | None:
    """The revisions an ``If-Match`` list names (RFC 9110 §13.1.1), or None for none or ``*``.

    A list matches when any of its strong tags does; a weak tag or an element that is no ETag of
    ours matches nothing. A list that names no revision at all is an empty set: it fails as a
    precondition (412) once the run is found — a missing run is still 404 (RFC 9110 §13.2.1).
    """
    raw = call.request.headers.get("if-match")
    if raw is None or raw.strip() == "*":
        return None
    return frozenset(
        int(match[1]) for match in map(_ETAG.fullmatch, raw.split(",")) if match is not None
    )


async def cancel_run(call: Call) -> Response:
    run_id = call.path("run_id")
    body = await read_json_object(call.request, optional=True)
    if body:
        raise HttpProblem(400, "invalid_argument", "cancel takes no body fields")
    claim = call.claim("cancel_run", {})
    if_revisions = _if_match(call)
    return respond(await call.usecases.runs.cancel(run_id, if_revisions, claim))


async def list_tasks(call: Call) -> Response:
    cursor, limit = call.page_args()
    return JSONResponse(await call.usecases.runs.list_tasks(call.path("run_id"), cursor, limit))


async def get_task(call: Call) -> Response:
    call.page_args()
    runs = call.usecases.runs
    return JSONResponse(await runs.get_task(call.path("run_id"), call.path("task_key")))


async def list_attempts(call: Call) -> Response:
    cursor, limit = call.page_args()
    run_id, key = call.path("run_id"), call.path("task_key")
    return JSONResponse(await call.usecases.runs.list_attempts(run_id, key, cursor, limit))


async def list_steps(call: Call) -> Response:
    cursor, limit = call.page_args()
    run_id, key = call.path("run_id"), call.path("task_key")
    return JSONResponse(await call.usecases.runs.list_steps(run_id, key, cursor, limit))


async def list_events(call: Call) -> Response:
    cursor, limit = call.page_args()
    return JSONResponse(await call.usecases.runs.list_events(call.path("run_id"), cursor, limit))


# -- workers (SPEC §10) ------------------------------------------------------------------------


async def claim_attempts(call: Call) -> Response:
    worker_id = call.path("worker_id")
    if not _WORKER_ID.fullmatch(worker_id):
        raise HttpProblem(
            400, "invalid_argument", "worker_id must be 1-128 of A-Z a-z 0-9 . _ - (SPEC §10)"
        )
    call.page_args()  # no query parameters
    body = await read_json_object(call.request)
    gone = anyio.Event()

    async def watch() -> None:
        # The body is read: the next message is the worker hanging up (or the answer's end).
        while (await call.request.receive())["type"] != "http.disconnect":
            pass
        gone.set()

    async with single_errors(), anyio.create_task_group() as tg:
        tg.start_soon(watch)
        principal = "" if call.principal is None else call.principal.id
        claimed = await call.usecases.workers.claim(worker_id, body, gone, principal=principal)
        tg.cancel_scope.cancel()
    return JSONResponse(claimed)


async def heartbeat(call: Call) -> Response:
    call.page_args()
    body = await read_json_object(call.request)
    workers = call.usecases.workers
    return JSONResponse(await workers.heartbeat(call.path("attempt_id"), body))


async def complete_attempt(call: Call) -> Response:
    call.page_args()
    body = await read_json_object(call.request)
    workers = call.usecases.workers
    return JSONResponse(await workers.complete(call.path("attempt_id"), body))


async def fail_attempt(call: Call) -> Response:
    call.page_args()
    body = await read_json_object(call.request)
    return JSONResponse(await call.usecases.workers.fail(call.path("attempt_id"), body))


async def list_workers(call: Call) -> Response:
    cursor, limit = call.page_args()
    return JSONResponse(await call.usecases.workers.list_workers(cursor, limit))


async def list_queues(call: Call) -> Response:
    call.page_args()
    return JSONResponse(await call.usecases.workers.list_queues())


# -- approvals (SPEC §11) ----------------------------------------------------------------------


async def list_approvals(call: Call) -> Response:
    cursor, limit = call.page_args("status")
    status = call.enum_query("status", ApprovalStatus)
    return JSONResponse(await call.usecases.approvals.list(status, cursor, limit))


async def get_approval(call: Call) -> Response:
    call.page_args()
    return JSONResponse(await call.usecases.approvals.get(call.path("approval_id")))


async def decide_approval(call: Call) -> Response:
    approval_id = call.path("approval_id")
    body = await read_json_object(call.request)
    claim = call.claim("decide_approval", body)
    assert call.principal is not None  # an operator's write
    decided_by = decider(call.principal.id, call.principal.role.name.lower())
    return respond(await call.usecases.approvals.decide(approval_id, body, claim, decided_by))


# -- drafts (SPEC §11) -------------------------------------------------------------------------


async def create_draft(call: Call) -> Response:
    body = await read_json_object(call.request)
    claim = call.claim("create_draft", body)
    assert call.principal is not None  # an operator's write
    created_by = decider(call.principal.id, call.principal.role.name.lower())
    return respond(await call.usecases.drafts.create(body, claim, created_by))


async def list_drafts(call: Call) -> Response:
    cursor, limit = call.page_args()
    return JSONResponse(await call.usecases.drafts.list(cursor, limit))


async def get_draft(call: Call) -> Response:
    call.page_args()
    return JSONResponse(await call.usecases.drafts.get(call.path("draft_id")))


async def approve_draft(call: Call) -> Response:
    body = await read_json_object(call.request)
    claim = call.claim("approve_draft", body)
    return respond(await call.usecases.drafts.approve(call.path("draft_id"), body, claim))


async def reject_draft(call: Call) -> Response:
    body = await read_json_object(call.request, optional=True)
    claim = call.claim("reject_draft", {})
    return respond(await call.usecases.drafts.reject(call.path("draft_id"), body, claim))


# -- the service (SPEC §12) --------------------------------------------------------------------


async def get_status(call: Call) -> Response:
    call.page_args()
    return JSONResponse(await call.usecases.status.status())


async def get_cluster(call: Call) -> Response:
    call.page_args()
    return JSONResponse(await call.usecases.status.cluster())
