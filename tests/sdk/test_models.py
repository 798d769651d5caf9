"""The SDK's own models against the API's published OpenAPI document (a drift guard).

The SDK may not import the server's schemas, so this reads ``docs/openapi.json`` (generated from
them) as plain JSON: every documented field and status must exist in the SDK.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Any

import pydantic
import pytest

import workload_sdk
from tests.sdk.fakes import run_body
from workload_sdk import AppliedVersion, AttemptStatus, Run, RunStatus, TaskStatus, Version

DOCUMENT = Path(__file__).parents[2] / "docs" / "openapi.json"
# SDK model → the document's schema of the same resource.
RESOURCES = {
    "Workflow": "Workflow",
    "VersionSummary": "VersionSummary",
    "Version": "Version",
    "Run": "Run",
    "TaskRun": "TaskRun",
    "Attempt": "Attempt",
    "Event": "Event",
    "ErrorObject": "ErrorObject",
    "ProblemItem": "ProblemItem",
    # SPEC §11
    "Step": "Step",
    "Usage": "Usage",
    "Approval": "Approval",
    "Draft": "Draft",
    # SPEC §10
    "ClaimedAttempt": "ClaimItem",
    "Lease": "Lease",
    "WorkerInfo": "Worker",
    "QueueStats": "QueueItem",
    # SPEC §12
    "ServiceStatus": "ServiceStatus",
    # SPEC §16
    "Cluster": "Cluster",
    "ClusterMember": "ClusterMember",
    "ReplicaShare": "ReplicaShare",
}


@pytest.fixture(scope="module")
def schemas() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(DOCUMENT.read_text(encoding="utf-8"))
    found: dict[str, Any] = document["components"]["schemas"]
    return found


@pytest.mark.parametrize("name", sorted(RESOURCES))
def test_every_documented_field_is_modelled(schemas: dict[str, Any], name: str) -> None:
    model: type[pydantic.BaseModel] = getattr(workload_sdk, name)
    schema = schemas[RESOURCES[name]]
    assert set(schema["properties"]) <= set(model.model_fields)
    required = {n for n, f in model.model_fields.items() if f.is_required()}
    assert required <= set(schema.get("required", [])), "the SDK requires an optional field"


def test_an_applied_version_is_the_documented_version_and_whether_it_was_created(
    schemas: dict[str, Any],
) -> None:
    # workflows.apply reads "created" from the status: the document must answer a Version both
    # when it creates one (201) and when nothing changed (200).
    document: dict[str, Any] = json.loads(DOCUMENT.read_text(encoding="utf-8"))
    answers = document["paths"]["/api/v1/workflows/{workflow_id}"]["put"]["responses"]
    for status in ("200", "201"):
        schema = answers[status]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/Version"}, status
    assert set(AppliedVersion.model_fields) == set(Version.model_fields) | {"created"}
    assert set(schemas["Version"]["properties"]) <= set(AppliedVersion.model_fields)
    assert "created" not in schemas["Version"]["properties"]  # the SDK's own, from the status


def test_a_runs_output_is_documented_and_modelled(schemas: dict[str, Any]) -> None:
    assert "output" in schemas["Run"]["properties"]
    assert not Run.model_fields["output"].is_required()  # older servers send none


@pytest.mark.parametrize(
    ("name", "statuses"),
    [("RunStatus", RunStatus), ("TaskStatus", TaskStatus), ("AttemptStatus", AttemptStatus)],
)
def test_every_documented_status_is_an_enum_member(
    schemas: dict[str, Any], name: str, statuses: type[enum.StrEnum]
) -> None:
    assert set(schemas[name]["enum"]) == {s.value for s in statuses}


def test_terminal_statuses() -> None:
    assert {s for s in RunStatus if s.is_terminal} == {"succeeded", "failed", "canceled"}
    assert {s for s in TaskStatus if s.is_terminal} == {
        "succeeded",
        "failed",
        "canceled",
        "skipped",
    }
    assert [s for s in AttemptStatus if not s.is_terminal] == [
        AttemptStatus.QUEUED,
        AttemptStatus.RUNNING,
    ]


def test_models_are_immutable_and_compare_by_value() -> None:
    run = Run.model_validate(run_body())
    assert run == Run.model_validate(run_body())
    with pytest.raises(pydantic.ValidationError):
        run.status = RunStatus.FAILED  # type: ignore[misc]


def test_an_unknown_status_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError):
        Run.model_validate(run_body(status="paused"))


def test_timestamps_are_aware_and_in_utc() -> None:
    run = Run.model_validate(run_body(started_at="2025-01-02T05:04:05+02:00"))
    assert run.created_at.utcoffset() is not None
    assert run.started_at is not None
    assert run.started_at == run.created_at.replace(microsecond=0)
