"""Python SDK of the Workload control plane: typed sync and async clients over httpx.

Example:
    >>> from workload_sdk import Client  # doctest: +SKIP
    >>> with Client() as client:  # WORKLOAD_URL / WORKLOAD_TOKEN from the environment
    ...     run = client.runs.start("document-pipeline", {"doc": 7})  # the latest version
    ...     output = client.runs.result(run.run_id)  # waits; {sink task key: output}

Configuration names and defaults (``URL_ENV``, ``TOKEN_ENV``, ``DEFAULT_BASE_URL`` …) are in
:mod:`workload_sdk.config`, re-exported here; the ``workload`` command uses the same ones.
The SDK imports no server package: its models are its own (httpx + pydantic only).
``client.approvals`` and ``client.drafts`` are the human-in-the-loop decisions (SPEC §11);
``client.attempts`` speaks the worker protocol (SPEC §10); ``workload_worker`` builds on it.
"""

from workload_sdk._approval_resources import Approvals, Drafts
from workload_sdk._async_approval_resources import AsyncApprovals, AsyncDrafts
from workload_sdk._async_client import AsyncClient
from workload_sdk._async_resources import AsyncVersions, AsyncWorkflows
from workload_sdk._async_run_resources import AsyncRuns
from workload_sdk._async_worker_resources import (
    AsyncAttempts,
    AsyncClusterInfo,
    AsyncQueues,
    AsyncWorkers,
)
from workload_sdk._client import Client
from workload_sdk._requests import new_idempotency_key
from workload_sdk._resources import Versions, Workflows
from workload_sdk._run_resources import Runs
from workload_sdk._version import __version__
from workload_sdk._worker_resources import Attempts, ClusterInfo, Queues, Workers
from workload_sdk.config import (
    DEFAULT_BASE_URL,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    TOKEN_ENV,
    URL_ENV,
    WORKER_TOKEN_ENV,
)
from workload_sdk.errors import (
    APIConnectionError,
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    ApprovalChanged,
    ApprovalDecided,
    Conflict,
    DraftChanged,
    DraftNotReady,
    DraftWaitTimeout,
    Forbidden,
    InvalidRequest,
    LeaseLost,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
    RunCanceled,
    RunFailed,
    ServerError,
    TooManyRequests,
    Unauthenticated,
    Unavailable,
    UnsupportedMediaType,
    WaitTimeout,
    WorkloadError,
    from_response,
)
from workload_sdk.models import (
    AppliedVersion,
    Approval,
    Attempt,
    AttemptStatus,
    ClaimedAttempt,
    Cluster,
    ClusterMember,
    Draft,
    DraftProblem,
    ErrorObject,
    Event,
    Lease,
    Page,
    ProblemItem,
    QueueStats,
    ReplicaShare,
    Run,
    RunStatus,
    ServiceStatus,
    Step,
    TaskRun,
    TaskStatus,
    Usage,
    Version,
    VersionSummary,
    WorkerInfo,
    WorkerStatus,
    Workflow,
)
from workload_sdk.pagination import AsyncPager, Pager

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "TOKEN_ENV",
    "URL_ENV",
    "WORKER_TOKEN_ENV",
    "APIConnectionError",
    "APIResponseValidationError",
    "APIStatusError",
    "APITimeoutError",
    "AppliedVersion",
    "Approval",
    "ApprovalChanged",
    "ApprovalDecided",
    "Approvals",
    "AsyncApprovals",
    "AsyncAttempts",
    "AsyncClient",
    "AsyncClusterInfo",
    "AsyncDrafts",
    "AsyncPager",
    "AsyncQueues",
    "AsyncRuns",
    "AsyncVersions",
    "AsyncWorkers",
    "AsyncWorkflows",
    "Attempt",
    "AttemptStatus",
    "Attempts",
    "ClaimedAttempt",
    "Client",
    "Cluster",
    "ClusterInfo",
    "ClusterMember",
    "Conflict",
    "Draft",
    "DraftChanged",
    "DraftNotReady",
    "DraftProblem",
    "DraftWaitTimeout",
    "Drafts",
    "ErrorObject",
    "Event",
    "Forbidden",
    "InvalidRequest",
    "Lease",
    "LeaseLost",
    "MethodNotAllowed",
    "NotFound",
    "Page",
    "Pager",
    "PayloadTooLarge",
    "PreconditionFailed",
    "ProblemItem",
    "QueueStats",
    "Queues",
    "ReplicaShare",
    "Run",
    "RunCanceled",
    "RunFailed",
    "RunStatus",
    "Runs",
    "ServerError",
    "ServiceStatus",
    "Step",
    "TaskRun",
    "TaskStatus",
    "TooManyRequests",
    "Unauthenticated",
    "Unavailable",
    "UnsupportedMediaType",
    "Usage",
    "Version",
    "VersionSummary",
    "Versions",
    "WaitTimeout",
    "WorkerInfo",
    "WorkerStatus",
    "Workers",
    "Workflow",
    "Workflows",
    "WorkloadError",
    "__version__",
    "from_response",
    "new_idempotency_key",
]
