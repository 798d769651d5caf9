"""Request building: one function per API operation, shared by the sync and async clients.

This module holds the request type and its helpers, and the operations on workflows, versions,
runs and the service; the worker protocol's are in :mod:`workload_sdk._worker_requests`, the
approvals' and drafts' in :mod:`workload_sdk._approval_requests`.

Each function returns an :class:`ApiRequest` (method, path, query, headers, body, and how to
parse the success body), so :class:`~workload_sdk.Client` and
:class:`~workload_sdk.AsyncClient` differ only in how they send it. Nothing here does I/O.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from workload_sdk.models import (
    Attempt,
    Cluster,
    Event,
    Page,
    Run,
    RunStatus,
    ServiceStatus,
    Step,
    TaskRun,
    Version,
    VersionSummary,
    Workflow,
)

__all__ = [
    "STREAM_READ_TIMEOUT",
    "ApiRequest",
    "apply_workflow",
    "cancel_run",
    "check_run_input",
    "create_version",
    "create_workflow",
    "get_cluster",
    "get_run",
    "get_status",
    "get_task",
    "get_version",
    "get_workflow",
    "list_attempts",
    "list_events",
    "list_runs",
    "list_steps",
    "list_tasks",
    "list_versions",
    "list_workflows",
    "new_idempotency_key",
    "start_run",
    "stream_events",
]

T = TypeVar("T")
_PREFIX = "/api/v1"
_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")


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
    def safe_to_repeat(self) -> bool:
        """Whether the SDK may send the call again after a transient failure.

        Reads may; a write never is (SPEC §8): one that got no answer may have been applied,
        and only its caller can repeat it, with the same idempotency key. That holds for an
        apply (``PUT``) too: repeated without its key, it would answer "unchanged" for the
        version its lost try created. A worker's claim and reports are POSTs: a claim that got
        no answer may have handed out attempts, and the worker decides itself when to repeat a
        report.
        """
        return self.method == "GET"


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
    """A path segment, escaped so that no id can reach another route.

    A ``.`` or ``..`` segment would be removed from the URL (RFC 3986's dot segments): its
    dots are percent-encoded, which the server decodes back into the id.
    """
    segment = quote(str(value), safe="")
    return segment.replace(".", "%2E") if segment in (".", "..") else segment


def _listing(
    path: str,
    parse: Callable[[Any], Page[T]],
    limit: int | None,
    cursor: str | None,
    **filters: str | int | None,
) -> ApiRequest[Page[T]]:
    """``GET`` one page of a listing: ``limit``, ``cursor`` and the filters given, as the query."""
    params = {"limit": limit, "cursor": cursor, **filters}
    query = {name: value for name, value in params.items() if value is not None}
    return ApiRequest("GET", path, parse, params=query)


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


def apply_workflow(
    definition: Mapping[str, Any], idempotency_key: str | None
) -> ApiRequest[Version]:
    """``PUT /workflows/{id}``: apply a definition by content, under its own ``id``.

    201 when it created a version, 200 when the latest version has this definition already
    (see :meth:`~workload_sdk.AppliedVersion.of`). Sent once with an ``Idempotency-Key``, a new
    one unless given, as every write is: repeated with it, the first answer (and its
    ``created``) is replayed.

    Raises:
        TypeError: the definition is not a mapping.
        ValueError: the definition has no ``id`` (a non-empty string), or the key is malformed.
    """
    if not isinstance(definition, Mapping):
        raise TypeError(f"a definition is a mapping (a JSON object), not {type(definition)!r}")
    workflow_id = definition.get("id")
    if not isinstance(workflow_id, str) or not workflow_id:
        raise ValueError("the definition has no id: apply names the workflow by its 'id'")
    key = _idempotency_key(idempotency_key)
    return ApiRequest(
        "PUT",
        _workflow(workflow_id),
        Version.model_validate,
        headers={"Idempotency-Key": key},
        json=dict(definition),
        idempotency_key=key,
    )


def list_workflows(limit: int | None, cursor: str | None) -> ApiRequest[Page[Workflow]]:
    """``GET /workflows``: one page of workflows."""
    return _listing(f"{_PREFIX}/workflows", Page[Workflow].model_validate, limit, cursor)


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
    return _listing(
        f"{_workflow(workflow_id)}/versions", Page[VersionSummary].model_validate, limit, cursor
    )


def get_version(workflow_id: str, version: int) -> ApiRequest[Version]:
    """``GET /workflows/{workflow_id}/versions/{version}``: a version with its definition."""
    return ApiRequest(
        "GET", f"{_workflow(workflow_id)}/versions/{_segment(version)}", Version.model_validate
    )


# -- runs ----------------------------------------------------------------------------------------


def check_run_input(input: object) -> None:
    """Refuse a run input that is not a mapping (or None) before anything is sent.

    Raises:
        TypeError: e.g. a version number passed where the input now goes.
    """
    if input is not None and not isinstance(input, Mapping):
        raise TypeError(
            f"a run's input is a mapping (a JSON object) or None, not {type(input).__name__}; "
            "the version is a keyword: runs.start(workflow_id, input, version=N)"
        )


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
    *,
    order: str | None = None,
    created_after: datetime | str | None = None,
    created_before: datetime | str | None = None,
) -> ApiRequest[Page[Run]]:
    """``GET /runs?workflow_id=&status=&order=&created_after=&created_before=``: one page.

    Raises:
        ValueError: a creation bound is a naive datetime (a time needs its offset).
    """
    bounds = {"created_after": created_after, "created_before": created_before}
    return _listing(
        f"{_PREFIX}/runs",
        Page[Run].model_validate,
        limit,
        cursor,
        workflow_id=workflow_id,
        status=None if status is None else str(status),
        order=None if order is None else str(order),
        **{name: None if b is None else _rfc3339(name, b) for name, b in bounds.items()},
    )


def _rfc3339(name: str, value: datetime | str) -> str:
    if not isinstance(value, datetime):
        return value
    if value.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime (with a tzinfo)")
    return value.isoformat()


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
    return _listing(f"{_run(run_id)}/tasks", Page[TaskRun].model_validate, limit, cursor)


def get_task(run_id: str, task_key: str) -> ApiRequest[TaskRun]:
    """``GET /runs/{run_id}/tasks/{task_key}``."""
    return ApiRequest("GET", _task(run_id, task_key), TaskRun.model_validate)


def list_attempts(
    run_id: str, task_key: str, limit: int | None, cursor: str | None
) -> ApiRequest[Page[Attempt]]:
    """``GET /runs/{run_id}/tasks/{task_key}/attempts``: one page of attempts."""
    return _listing(
        f"{_task(run_id, task_key)}/attempts", Page[Attempt].model_validate, limit, cursor
    )


def list_steps(
    run_id: str, task_key: str, limit: int | None, cursor: str | None
) -> ApiRequest[Page[Step]]:
    """``GET /runs/{run_id}/tasks/{task_key}/steps``: one page of an agent task's journal."""
    return _listing(f"{_task(run_id, task_key)}/steps", Page[Step].model_validate, limit, cursor)


def list_events(run_id: str, limit: int | None, cursor: str | None) -> ApiRequest[Page[Event]]:
    """``GET /runs/{run_id}/events``: one page of a run's history, by sequence."""
    return _listing(f"{_run(run_id)}/events", Page[Event].model_validate, limit, cursor)


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


# -- the service (SPEC §12) --------------------------------------------------------------------


def get_cluster() -> ApiRequest[Cluster]:
    """``GET /cluster``: the live replicas and the shards each owns (SPEC §16)."""
    return ApiRequest("GET", f"{_PREFIX}/cluster", Cluster.model_validate)


def get_status() -> ApiRequest[ServiceStatus]:
    """``GET /status``: role, epoch, active runs and workers, pending approvals, queues."""
    return ApiRequest("GET", f"{_PREFIX}/status", ServiceStatus.model_validate)
