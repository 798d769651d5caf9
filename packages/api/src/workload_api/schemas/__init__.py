"""The API's resources and request bodies as pydantic models (SPEC §6).

The same models serialize responses and generate the OpenAPI document, so the document cannot
drift from what handlers send. One module a resource (and ``_common`` for what they share);
every model is re-exported here, and the handlers use them as ``schemas.Run``.
"""

from workload_api.schemas._common import (
    DEFINITION_MARKER,
    DefinitionDocument,
    ErrorObject,
    JsonObject,
    Page,
)
from workload_api.schemas.approvals import Approval, DecisionRequest
from workload_api.schemas.drafts import ApproveDraftRequest, CreateDraftRequest, Draft
from workload_api.schemas.runs import Attempt, Event, Run, StartRunRequest, Step, TaskRun, Usage
from workload_api.schemas.service import (
    Cluster,
    ClusterMember,
    Health,
    ProblemDetails,
    ProblemItem,
    Ready,
    ReplicaShare,
    ServiceStatus,
)
from workload_api.schemas.workers import (
    ActionName,
    ClaimItem,
    ClaimRequest,
    ClaimResponse,
    CompleteRequest,
    ErrorIn,
    FailRequest,
    HeartbeatRequest,
    Lease,
    QueueItem,
    QueueName,
    Queues,
    ToolCallReport,
    Worker,
    WorkerName,
)
from workload_api.schemas.workflows import Version, VersionSummary, Workflow

__all__ = [
    "DEFINITION_MARKER",
    "ActionName",
    "Approval",
    "ApproveDraftRequest",
    "Attempt",
    "ClaimItem",
    "ClaimRequest",
    "ClaimResponse",
    "Cluster",
    "ClusterMember",
    "CompleteRequest",
    "CreateDraftRequest",
    "DecisionRequest",
    "DefinitionDocument",
    "Draft",
    "ErrorIn",
    "ErrorObject",
    "Event",
    "FailRequest",
    "Health",
    "HeartbeatRequest",
    "JsonObject",
    "Lease",
    "Page",
    "ProblemDetails",
    "ProblemItem",
    "QueueItem",
    "QueueName",
    "Queues",
    "Ready",
    "ReplicaShare",
    "Run",
    "ServiceStatus",
    "StartRunRequest",
    "Step",
    "TaskRun",
    "ToolCallReport",
    "Usage",
    "Version",
    "VersionSummary",
    "Worker",
    "WorkerName",
    "Workflow",
]
