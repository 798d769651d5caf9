"""The workflow resources: a workflow and its versions (SPEC §6)."""

from __future__ import annotations

from datetime import datetime

from workload_api.schemas._common import DefinitionDocument, _Out

__all__ = [
    "Version",
    "VersionSummary",
    "Workflow",
]


class Workflow(_Out):
    """A workflow: the id under which immutable versions are created."""

    workflow_id: str
    latest_version: int
    description: str
    created_at: datetime
    updated_at: datetime


class VersionSummary(_Out):
    """A version without its definition (in lists)."""

    workflow_id: str
    version: int
    definition_hash: str
    task_count: int
    created_at: datetime


class Version(VersionSummary):
    """A version with its normalized definition."""

    definition: DefinitionDocument
