"""The API's resources as pydantic models (SPEC §6), owned by the SDK itself.

Field names are the API's contract. Every model allows extra fields, so a newer server that adds
a field does not break an older client (the extra value is kept: ``model.model_extra``).
Timestamps are parsed into timezone-aware :class:`~datetime.datetime` objects.

The models are defined one resource a private module and are public here only: import them from
``workload_sdk.models`` (or ``workload_sdk``).
"""

from workload_sdk.models._approvals import Approval, Draft, DraftProblem
from workload_sdk.models._common import ErrorObject, Page, ProblemItem
from workload_sdk.models._runs import Attempt, Event, Run, Step, TaskRun, Usage
from workload_sdk.models._service import Cluster, ClusterMember, ReplicaShare, ServiceStatus
from workload_sdk.models._statuses import AttemptStatus, RunStatus, TaskStatus
from workload_sdk.models._workers import (
    ClaimedAttempt,
    Lease,
    QueueStats,
    WorkerInfo,
    WorkerStatus,
)
from workload_sdk.models._workflows import AppliedVersion, Version, VersionSummary, Workflow

__all__ = [
    "AppliedVersion",
    "Approval",
    "Attempt",
    "AttemptStatus",
    "ClaimedAttempt",
    "Cluster",
    "ClusterMember",
    "Draft",
    "DraftProblem",
    "ErrorObject",
    "Event",
    "Lease",
    "Page",
    "ProblemItem",
    "QueueStats",
    "ReplicaShare",
    "Run",
    "RunStatus",
    "ServiceStatus",
    "Step",
    "TaskRun",
    "TaskStatus",
    "Usage",
    "Version",
    "VersionSummary",
    "WorkerInfo",
    "WorkerStatus",
    "Workflow",
]
