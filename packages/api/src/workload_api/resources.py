"""Resources of the API (SPEC §6) from the domain's records, as JSON-ready objects.

The pydantic models of :mod:`workload_api.schemas` read each record by attribute
(``from_attributes``), so no field is copied by hand; the same models generate the OpenAPI
document, so what handlers send cannot drift from what it says.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import fields
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from workload_api import schemas
from workload_domain.agent.journal import StepRecord, StepStatus
from workload_domain.approvals import ApprovalRecord
from workload_domain.cursors import Page
from workload_domain.drafts import DraftRecord
from workload_domain.jsonvalues import JsonObject
from workload_domain.records import (
    AttemptRecord,
    EventRecord,
    RunRecord,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.shards import Member
from workload_domain.statuses import TaskStatus
from workload_domain.workers import ClaimedAttempt, QueueStats, WorkerRecord, worker_status

__all__ = [
    "approval",
    "attempt",
    "claim_item",
    "draft",
    "event",
    "member",
    "page",
    "queue",
    "run",
    "step",
    "task",
    "tool_call_report",
    "version",
    "version_summary",
    "worker",
    "workflow",
]

T = TypeVar("T")


def _dump(model: type[BaseModel], source: Any) -> JsonObject:
    body: JsonObject = model.model_validate(source).model_dump(mode="json")
    return body


# The resources that show a record as it is, each read by its schema.
workflow: Callable[[WorkflowRecord], JsonObject] = functools.partial(_dump, schemas.Workflow)
"""The workflow resource."""
version_summary: Callable[[VersionRecord], JsonObject] = functools.partial(
    _dump, schemas.VersionSummary
)
"""A version without its definition (in lists)."""
version: Callable[[VersionRecord], JsonObject] = functools.partial(_dump, schemas.Version)
"""A version with its normalized definition."""
task: Callable[[TaskRecord], JsonObject] = functools.partial(_dump, schemas.TaskRun)
"""The task run resource."""
attempt: Callable[[AttemptRecord], JsonObject] = functools.partial(_dump, schemas.Attempt)
"""The attempt resource."""
event: Callable[[EventRecord], JsonObject] = functools.partial(_dump, schemas.Event)
"""The event resource."""
approval: Callable[[ApprovalRecord], JsonObject] = functools.partial(_dump, schemas.Approval)
"""The approval resource."""
draft: Callable[[DraftRecord], JsonObject] = functools.partial(_dump, schemas.Draft)
"""The draft resource."""
step: Callable[[StepRecord], JsonObject] = functools.partial(_dump, schemas.Step)
"""A step of an agent attempt's journal."""
member: Callable[[Member], JsonObject] = functools.partial(_dump, schemas.ClusterMember)
"""A live replica and its shards (SPEC §16)."""


def run(record: RunRecord, task_counts: Mapping[str, int]) -> JsonObject:
    """The run resource: the record, and how many of its tasks are in each status."""
    counts = {s.value: int(task_counts.get(s.value, 0)) for s in TaskStatus}
    return _dump(schemas.Run, {**_attributes(record), "task_counts": counts})


def _attributes(record: object) -> dict[str, object]:
    return {f.name: getattr(record, f.name) for f in fields(record)}  # type: ignore[arg-type]


def claim_item(claimed: ClaimedAttempt, lease_token: str, traceparent: str | None) -> JsonObject:
    """A claim item: the attempt, its lease token (given once, to its worker) and its inputs."""
    extra = {"lease_token": lease_token, "traceparent": traceparent}
    return _dump(schemas.ClaimItem, {**_attributes(claimed), **extra})


def tool_call_report(record: StepRecord) -> JsonObject:
    """A remote tool call as its worker's report is answered (attempt-shaped)."""
    response = record.response or {}
    error = None
    if record.status is StepStatus.FAILED:
        error = response.get("failure")  # what the worker reported, as it reported it
        if not isinstance(error, dict):  # ended otherwise: its lease expired, its agent ended…
            code = response.get("code") or "tool_failed"
            error = {"code": code, "message": str(response.get("error", "")), "retryable": False}
    return _dump(
        schemas.ToolCallReport,
        {
            **_attributes(record),
            "kind": "tool_call",
            "attempt_id": record.step_id,
            "executed_by": None,
            "status": record.status.value,
            "output": response.get("output") if record.status is StepStatus.SUCCEEDED else None,
            "error": error,
            "queue": record.queue or "default",
        },
    )


def worker(record: WorkerRecord, now: datetime) -> JsonObject:
    """The worker resource (``active`` or ``gone`` as of ``now``)."""
    return _dump(schemas.Worker, {**_attributes(record), "status": worker_status(record, now)})


def queue(stats: QueueStats, now: datetime) -> JsonObject:
    """A queue's work; the age of its oldest queued attempt in seconds."""
    oldest = stats.oldest_queued_at
    age = None if oldest is None else round(max((now - oldest).total_seconds(), 0.0), 3)
    return _dump(schemas.QueueItem, {**_attributes(stats), "oldest_queued_age_seconds": age})


def page(found: Page[T], convert: Callable[[T], JsonObject]) -> JsonObject:
    """A page of a listing: ``items`` and ``next_cursor``."""
    return {"items": [convert(item) for item in found.items], "next_cursor": found.next_cursor}
