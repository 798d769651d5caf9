"""The domain's records against the API's resources, field by field (a drift guard).

A resource's schema reads its record by attribute (``workload_api.resources``): a field the
schema names and the record lacks fails every test that reads it, but a field added to a record
and forgotten by the schema would be dropped without a word. ADR 0042 keeps the two apart (the
domain carries no framework, the schema is the wire contract); this test makes each field the
API does not show a decision written here, and each field the API adds one too.
"""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import BaseModel

from workload_api import schemas
from workload_domain.agent.journal import StepRecord
from workload_domain.approvals import ApprovalRecord
from workload_domain.drafts import DraftRecord
from workload_domain.records import (
    AttemptRecord,
    EventRecord,
    RunRecord,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.shards import Member
from workload_domain.workers import ClaimedAttempt, QueueStats, WorkerRecord

# (record, schema) → (the record's fields the resource leaves out, the fields it adds).
_LEASE = {"claimed_at", "lease_expires_at", "lease_end", "heartbeat_timeout_seconds"}
_SCHEDULE = {"action", "timeout_at", "schedule_deadline", "report_hash"}
FIELDS: dict[tuple[type, type[BaseModel]], tuple[set[str], set[str]]] = {
    (WorkflowRecord, schemas.Workflow): (set(), set()),
    (VersionRecord, schemas.Version): (set(), set()),
    # a listing's version has no definition (SPEC §6)
    (VersionRecord, schemas.VersionSummary): ({"definition"}, set()),
    # the task's place in the definition orders the listing, it is not shown
    (TaskRecord, schemas.TaskRun): ({"position"}, set()),
    # an attempt's timing and its report's digest are the engine's; its task is in its URL
    (AttemptRecord, schemas.Attempt): (
        _SCHEDULE
        | {"heartbeat_timeout_seconds", "paused_at", "paused_seconds", "task_key"}
        | {"timeout_seconds"},
        set(),
    ),
    (EventRecord, schemas.Event): (set(), set()),
    # the approval's attempt number is the engine's key; its run and task are shown
    (ApprovalRecord, schemas.Approval): ({"attempt"}, set()),
    # what the draft was asked to be named, and the mock model's script, stay internal
    (DraftRecord, schemas.Draft): ({"requested_workflow_id", "script"}, set()),
    # a step's lease and schedule are its remote tool call's, read by the worker's claim
    (StepRecord, schemas.Step): (
        _LEASE | _SCHEDULE | {"deadline", "progress", "queue", "run_id", "task_key"},
        {"step_id"},
    ),
    # a remote tool call answered as an attempt (``tool_call_report``)
    (StepRecord, schemas.ToolCallReport): (
        (_LEASE - {"claimed_at", "lease_expires_at"})
        | _SCHEDULE
        | {"deadline", "request", "request_hash", "response", "run_id", "usage"},
        {"attempt_id", "error", "executed_by", "output"},
    ),
    (Member, schemas.ClusterMember): (set(), set()),
    # the trace context is propagated to the run's attempts, never shown
    (RunRecord, schemas.Run): ({"traceparent"}, {"task_counts"}),
    (WorkerRecord, schemas.Worker): (set(), {"status"}),
    (QueueStats, schemas.QueueItem): ({"oldest_queued_at"}, {"oldest_queued_age_seconds"}),
    # the token's index finds the lease; the token itself is given once, to the claimant
    (ClaimedAttempt, schemas.ClaimItem): ({"queued_at", "token_index"}, {"lease_token"}),
}


@pytest.mark.parametrize(
    ("record", "schema"), list(FIELDS), ids=lambda kind: getattr(kind, "__name__", str(kind))
)
def test_every_field_a_record_gains_is_shown_or_kept_back_by_decision(
    record: type, schema: type[BaseModel]
) -> None:
    left_out, added = FIELDS[record, schema]
    record_fields = {field.name for field in dataclasses.fields(record)}
    schema_fields = set(schema.model_fields)
    assert record_fields - schema_fields == left_out
    assert schema_fields - record_fields == added
