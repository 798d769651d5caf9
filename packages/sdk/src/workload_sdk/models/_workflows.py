"""The workflow models: a workflow, its versions, and the outcome of an apply."""

from __future__ import annotations

from datetime import datetime

from workload_sdk.models._common import JsonObject, _Resource

__all__ = [
    "AppliedVersion",
    "Version",
    "VersionSummary",
    "Workflow",
]


class Workflow(_Resource):
    """A workflow: the id under which immutable versions are created."""

    workflow_id: str
    latest_version: int
    description: str
    created_at: datetime
    updated_at: datetime


class VersionSummary(_Resource):
    """A version without its definition, as listed."""

    workflow_id: str
    version: int
    definition_hash: str
    task_count: int
    created_at: datetime


class Version(VersionSummary):
    """A version with its normalized definition (every default explicit)."""

    definition: JsonObject


class AppliedVersion(Version):
    """What ``client.workflows.apply`` answers: the workflow's latest version after the apply.

    ``created`` is True when the apply created it (201: the workflow was new, or its latest
    version had another definition), False when the latest version had this definition already
    (200: nothing was written).
    """

    created: bool

    @classmethod
    def of(cls, version: Version, *, created: bool) -> AppliedVersion:
        """The version, and whether the apply created it."""
        return cls.model_validate({**version.model_dump(), "created": created})
