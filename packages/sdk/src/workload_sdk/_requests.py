"""Request building: one function per API operation, shared by the sync and async clients.

Each function returns an :class:`ApiRequest` (method, path, query, headers, body, and how to
parse the success body), so :class:`~workload_sdk.Client` and
:class:`~workload_sdk.AsyncClient` differ only in how they send it. Nothing here does I/O.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from workload_sdk.models import (
    Approval,
    Attempt,
    Claim,
    ClaimedAttempt,
    Cluster,
    Draft,
    Event,
    Lease,
    Page,
    QueueList,
    QueueStats,
    Run,
    RunStatus,
    ServiceStatus,
    Step,
    TaskRun,
    Version,
    VersionSummary,
    WorkerInfo,
    Workflow,
)

__all__ = [
    "CLAIM_READ_MARGIN",
    "STREAM_READ_TIMEOUT",
    "ApiRequest",
    "approve_draft",
    "cancel_run",
    "claim_attempts",
    "complete_attempt",
    "create_draft",
    "create_version",
    "create_workflow",
    "decide_approval",
    "fail_attempt",
    "get_approval",
    "get_cluster",
    "get_draft",
    "get_run",
    "get_status",
    "get_task",
    "get_version",
    "get_workflow",
    "heartbeat_attempt",
    "list_approvals",
    "list_attempts",
    "list_drafts",
    "list_events",
    "list_queues",
    "list_runs",
    "list_steps",
    "list_tasks",
    "list_versions",
    "list_workers",
    "list_workflows",
    "new_idempotency_key",
    "reject_draft",
    "start_run",
    "stream_events",
]

T = TypeVar("T")
_PREFIX = "/api/v1"
_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
CLAIM_READ_MARGIN = 10.0
"""Seconds a claim's read timeout exceeds its ``wait_seconds``: the server answers an empty
claim only after the whole wait, so a read timeout of just the wait would cut it off."""


@dataclass(frozen=True, slots=True)
class ApiRequest(Generic[T]):
    """One API call, ready to send: what to send and how to read the answer."""

    method: str
    path: str
    parse: Callable[[Any], T]
    params: Mapping[str, str | int] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    json: Mapping[str, Any] | None = None
    idempotency_key: str | None = None
    read_timeout: float | None = None
    """The least read timeout the call needs (a claim waits on the server); None: the client's."""

    @property
    def is_write(self) -> bool:
        """Whether the call writes (every POST); writes are never retried automatically.

        A worker's claim and reports are POSTs too: a claim that got no answer may have handed
        out attempts, and the worker decides itself when to repeat a report.
        """
        return self.method == "POST"


def new_idempotency_key() -> str:
    """A fresh ``Idempotency-Key`` (a random UUID).

    Generate one before a write when you want to be able to retry that exact write: passing the
    same key again makes the server answer the original outcome instead of writing twice.
    """
    return str(uuid.uuid4())


def _idempotency_key(given: str | None) -> str:
    if given is None:
        return new_idempotency_key()
    if not _IDEMPOTENCY_KEY.fullmatch(given):
        raise ValueError("idempotency_key must be 1-255 visible ASCII characters (0x21-0x7E)")
    return given


def _write(
    path: str,
    parse: Callable[[Any], T],
    idempotency_key: str | None,
    *,
    json: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> ApiRequest[T]:
    key = _idempotency_key(idempotency_key)
    return ApiRequest(
        "POST",
        path,
        parse,
        headers={"Idempotency-Key": key, **(headers or {})},
        json=json,
        idempotency_key=key,
    )


def _segment(value: str | int) -> str:
    """A path segment, escaped so that no id can reach another route."""
    return quote(str(value), safe="")


def _page_params(limit: int | None, cursor: str | None) -> dict[str, str | int]:
    params: dict[str, str | int] = {}
    if limit is not None:
        params["limit"] = limit
    if cursor is not None:
        params["cursor"] = cursor
    return params


def _workflow(workflow_id: str) -> str:
    return f"{_PREFIX}/workflows/{_segment(workflow_id)}"


def _run(run_id: str) -> str:
    return f"{_PREFIX}/runs/{_segment(run_id)}"


def _task(run_id: str, task_key: str) -> str:
    return f"{_run(run_id)}/tasks/{_segment(task_key)}"


# -- workflows and versions --------------------------------------------------------------------


def create_workflow(
    definition: Mapping[str, Any], idempotency_key: str | None
) -> ApiRequest[Version]:
    """``POST /workflows``: create a workflow and its version 1."""
    return _write(
        f"{_PREFIX}/workflows", Version.model_validate, idempotency_key, json=dict(definition)
    )


def list_workflows(limit: int | None, cursor: str | None) -> ApiRequest[Page[Workflow]]:
    """``GET /workflows``: one page of workflows."""
    return ApiRequest(
        "GET",
        f"{_PREFIX}/workflows",
        Page[Workflow].model_validate,
        params=_page_params(limit, cursor),
    )


def get_workflow(workflow_id: str) -> ApiRequest[Workflow]:
    """``GET /workflows/{workflow_id}``."""
    return ApiRequest("GET", _workflow(workflow_id), Workflow.model_validate)


def create_version(
    workflow_id: str, definition: Mapping[str, Any], idempotency_key: str | None
) -> ApiRequest[Version]:
    """``POST /workflows/{workflow_id}/versions``: the next version of a workflow."""
    return _write(
        f"{_workflow(workflow_id)}/versions",
        Version.model_validate,
        idempotency_key,
        json=dict(definition),
    )


def list_versions(
    workflow_id: str, limit: int | None, cursor: str | None
) -> ApiRequest[Page[VersionSummary]]:
    """``GET /workflows/{workflow_id}/versions``: one page of version summaries."""
    return ApiRequest(
        "GET",
        f"{_workflow(workflow_id)}/versions",
        Page[VersionSummary].model_validate,
        params=_page_params(limit, cursor),
    )


def get_version(workflow_id: str, version: int) -> ApiRequest[Version]:
    """``GET /workflows/{workflow_id}/versions/{version}``: a version with its definition."""
    return ApiRequest(
        "GET", f"{_workflow(workflow_id)}/versions/{_segment(version)}", Version.model_validate
    )


# -- runs ----------------------------------------------------------------------------------------


def start_run(
    workflow_id: str,
    version: int,
    input: Mapping[str, Any] | None,
    idempotency_key: str | None,
) -> ApiRequest[Run]:
    """``POST /workflows/{workflow_id}/versions/{version}/runs`` (no body without ``input``)."""
    return _write(
        f"{_workflow(workflow_id)}/versions/{_segment(version)}/runs",
        Run.model_validate,
        idempotency_key,
        json=None if input is None else {"input": dict(input)},
    )


def list_runs(
    workflow_id: str | None,
    status: RunStatus | str | None,
    limit: int | None,
    cursor: str | None,
) -> ApiRequest[Page[Run]]:
    """``GET /runs?workflow_id=&status=``: one page of runs, optionally filtered."""
    params = _page_params(limit, cursor)
    if workflow_id is not None:
        params["workflow_id"] = workflow_id
    if status is not None:
        params["status"] = str(status)
    return ApiRequest("GET", f"{_PREFIX}/runs", Page[Run].model_validate, params=params)


def get_run(run_id: str) -> ApiRequest[Run]:
    """``GET /runs/{run_id}`` (answered with ``ETag: "<revision>"``)."""
    return ApiRequest("GET", _run(run_id), Run.model_validate)


def cancel_run(
    run_id: str,
    *,
    if_revision: int | None,
    if_match: str | None,
    idempotency_key: str | None,
) -> ApiRequest[Run]:
    """``POST /runs/{run_id}/cancel``, conditional on a revision when one is given."""
    if if_revision is not None and if_match is not None:
        raise ValueError("pass if_revision or if_match, not both")
    if if_revision is not None:
        if_match = f'"{if_revision}"'
    headers = {} if if_match is None else {"If-Match": if_match}
    return _write(f"{_run(run_id)}/cancel", Run.model_validate, idempotency_key, headers=headers)


def list_tasks(run_id: str, limit: int | None, cursor: str | None) -> ApiRequest[Page[TaskRun]]:
    """``GET /runs/{run_id}/tasks``: one page of task runs, in definition order."""
    return ApiRequest(
        "GET",
        f"{_run(run_id)}/tasks",
        Page[TaskRun].model_validate,
        params=_page_params(limit, cursor),
    )


def get_task(run_id: str, task_key: str) -> ApiRequest[TaskRun]:
    """``GET /runs/{run_id}/tasks/{task_key}``."""
    return ApiRequest("GET", _task(run_id, task_key), TaskRun.model_validate)


def list_attempts(
    run_id: str, task_key: str, limit: int | None, cursor: str | None
) -> ApiRequest[Page[Attempt]]:
    """``GET /runs/{run_id}/tasks/{task_key}/attempts``: one page of attempts."""
    return ApiRequest(
        "GET",
        f"{_task(run_id, task_key)}/attempts",
        Page[Attempt].model_validate,
        params=_page_params(limit, cursor),
    )


def list_steps(
    run_id: str, task_key: str, limit: int | None, cursor: str | None
) -> ApiRequest[Page[Step]]:
    """``GET /runs/{run_id}/tasks/{task_key}/steps``: one page of an agent task's journal."""
    return ApiRequest(
        "GET",
        f"{_task(run_id, task_key)}/steps",
        Page[Step].model_validate,
        params=_page_params(limit, cursor),
    )


def list_events(run_id: str, limit: int | None, cursor: str | None) -> ApiRequest[Page[Event]]:
    """``GET /runs/{run_id}/events``: one page of a run's history, by sequence."""
    return ApiRequest(
        "GET",
        f"{_run(run_id)}/events",
        Page[Event].model_validate,
        params=_page_params(limit, cursor),
    )


STREAM_READ_TIMEOUT = 45.0
"""Seconds an event stream may stay silent before it is taken for dead: three keep-alives."""


def _no_body(data: object) -> None:
    return None


def stream_events(run_id: str, after: int) -> ApiRequest[None]:
    """``GET /runs/{run_id}/events/stream``: the events after sequence ``after``, live (SSE)."""
    headers = {"Accept": "text/event-stream"}
    if after:
        headers["Last-Event-ID"] = str(after)
    return ApiRequest(
        "GET",
        f"{_run(run_id)}/events/stream",
        _no_body,
        headers=headers,
        read_timeout=STREAM_READ_TIMEOUT,
    )


# -- workers (SPEC §10) ------------------------------------------------------------------------
# Claims and reports are fenced by the lease, not by an Idempotency-Key: a report repeated with
# the same token and body is answered the same 200, anything late is 409 lease_lost.


def _attempt(attempt_id: str) -> str:
    return f"{_PREFIX}/attempts/{_segment(attempt_id)}"


def _claimed(data: Any) -> list[ClaimedAttempt]:
    return Claim.model_validate(data).attempts


def claim_attempts(
    worker_id: str,
    queues: Sequence[str],
    actions: Sequence[str],
    max_attempts: int,
    wait_seconds: float,
) -> ApiRequest[list[ClaimedAttempt]]:
    """``POST /workers/{worker_id}/claim``: up to ``max_attempts``, waiting for work.

    The read timeout is ``wait_seconds`` plus :data:`CLAIM_READ_MARGIN`.
    """
    if not queues or not actions:
        raise ValueError("a claim names at least one queue and one action")
    return ApiRequest(
        "POST",
        f"{_PREFIX}/workers/{_segment(worker_id)}/claim",
        _claimed,
        json={
            "queues": list(queues),
            "actions": list(actions),
            "max_attempts": max_attempts,
            # 20.0 goes as 20: a whole number of seconds is an integer in JSON.
            "wait_seconds": int(wait_seconds) if float(wait_seconds).is_integer() else wait_seconds,
        },
        read_timeout=wait_seconds + CLAIM_READ_MARGIN,
    )


def heartbeat_attempt(
    attempt_id: str, lease_token: str, progress: Mapping[str, Any] | None
) -> ApiRequest[Lease]:
    """``POST /attempts/{attempt_id}/heartbeat``: renew the lease (and record progress)."""
    body: dict[str, Any] = {"lease_token": lease_token}
    if progress is not None:
        body["progress"] = dict(progress)
    return ApiRequest("POST", f"{_attempt(attempt_id)}/heartbeat", Lease.model_validate, json=body)


def complete_attempt(
    attempt_id: str, lease_token: str, output: Mapping[str, Any]
) -> ApiRequest[Attempt]:
    """``POST /attempts/{attempt_id}/complete``: the attempt succeeded with ``output``."""
    return ApiRequest(
        "POST",
        f"{_attempt(attempt_id)}/complete",
        Attempt.model_validate,
        json={"lease_token": lease_token, "output": dict(output)},
    )


def fail_attempt(
    attempt_id: str, lease_token: str, code: str, message: str, retryable: bool
) -> ApiRequest[Attempt]:
    """``POST /attempts/{attempt_id}/fail``: the attempt failed with an error object."""
    error = {"code": code, "message": message, "retryable": retryable}
    return ApiRequest(
        "POST",
        f"{_attempt(attempt_id)}/fail",
        Attempt.model_validate,
        json={"lease_token": lease_token, "error": error},
    )


def list_workers(limit: int | None, cursor: str | None) -> ApiRequest[Page[WorkerInfo]]:
    """``GET /workers``: one page of the workers the server has seen."""
    return ApiRequest(
        "GET",
        f"{_PREFIX}/workers",
        Page[WorkerInfo].model_validate,
        params=_page_params(limit, cursor),
    )


def _queues(data: Any) -> list[QueueStats]:
    return QueueList.model_validate(data).items


def list_queues() -> ApiRequest[list[QueueStats]]:
    """``GET /queues``: every queue with work or history (not paged)."""
    return ApiRequest("GET", f"{_PREFIX}/queues", _queues)


# -- the service (SPEC §12) --------------------------------------------------------------------


def get_cluster() -> ApiRequest[Cluster]:
    """``GET /cluster``: the live replicas and the shards each owns (SPEC §16)."""
    return ApiRequest("GET", f"{_PREFIX}/cluster", Cluster.model_validate)


def get_status() -> ApiRequest[ServiceStatus]:
    """``GET /status``: role, epoch, active runs and workers, pending approvals, queues."""
    return ApiRequest("GET", f"{_PREFIX}/status", ServiceStatus.model_validate)


# -- approvals and drafts (SPEC §11) -----------------------------------------------------------


def _approval(approval_id: str) -> str:
    return f"{_PREFIX}/approvals/{_segment(approval_id)}"


def _draft(draft_id: str) -> str:
    return f"{_PREFIX}/drafts/{_segment(draft_id)}"


def list_approvals(
    status: str | None, limit: int | None, cursor: str | None
) -> ApiRequest[Page[Approval]]:
    """``GET /approvals?status=``: one page of approvals, optionally of one status."""
    params = _page_params(limit, cursor)
    if status is not None:
        params["status"] = status
    return ApiRequest("GET", f"{_PREFIX}/approvals", Page[Approval].model_validate, params=params)


def get_approval(approval_id: str) -> ApiRequest[Approval]:
    """``GET /approvals/{approval_id}``."""
    return ApiRequest("GET", _approval(approval_id), Approval.model_validate)


def decide_approval(
    approval_id: str,
    decision: str,
    arguments_digest: str,
    comment: str | None,
    idempotency_key: str | None,
) -> ApiRequest[Approval]:
    """``POST /approvals/{approval_id}/decision``: approve or reject exactly these arguments."""
    body: dict[str, Any] = {"decision": decision, "arguments_digest": arguments_digest}
    if comment is not None:
        body["comment"] = comment
    return _write(
        f"{_approval(approval_id)}/decision", Approval.model_validate, idempotency_key, json=body
    )


def create_draft(
    prompt: str,
    workflow_id: str | None,
    model: str,
    script: Sequence[Mapping[str, Any]] | None,
    idempotency_key: str | None,
) -> ApiRequest[Draft]:
    """``POST /drafts``: ask a model for a workflow definition (answered 202, generating)."""
    body: dict[str, Any] = {"prompt": prompt, "model": model}
    if workflow_id is not None:
        body["workflow_id"] = workflow_id
    if script is not None:
        body["script"] = [dict(turn) for turn in script]
    return _write(f"{_PREFIX}/drafts", Draft.model_validate, idempotency_key, json=body)


def list_drafts(limit: int | None, cursor: str | None) -> ApiRequest[Page[Draft]]:
    """``GET /drafts``: one page of drafts."""
    return ApiRequest(
        "GET", f"{_PREFIX}/drafts", Page[Draft].model_validate, params=_page_params(limit, cursor)
    )


def get_draft(draft_id: str) -> ApiRequest[Draft]:
    """``GET /drafts/{draft_id}``."""
    return ApiRequest("GET", _draft(draft_id), Draft.model_validate)


def approve_draft(
    draft_id: str, definition_hash: str, idempotency_key: str | None
) -> ApiRequest[Draft]:
    """``POST /drafts/{draft_id}/approve``: make exactly this definition a version."""
    return _write(
        f"{_draft(draft_id)}/approve",
        Draft.model_validate,
        idempotency_key,
        json={"definition_hash": definition_hash},
    )


def reject_draft(draft_id: str, idempotency_key: str | None) -> ApiRequest[Draft]:
    """``POST /drafts/{draft_id}/reject`` (no body)."""
    return _write(f"{_draft(draft_id)}/reject", Draft.model_validate, idempotency_key)
