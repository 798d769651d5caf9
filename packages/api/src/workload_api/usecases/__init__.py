"""The use cases of the service: the one application layer behind the HTTP handlers.

Handlers translate HTTP to a call here and the :class:`Result` back to HTTP; everything between
(idempotency, compiling definitions, creating runs, handing them to execution, reads) lives in
these modules, one concern each. Writes are idempotent: the outcome is rendered before the
write and saved with it; a replay is a normal :class:`Result` with ``replayed=True``.
"""

from __future__ import annotations

from workload_api.usecases._result import Result
from workload_api.usecases.approvals import ApprovalUseCases
from workload_api.usecases.drafts import DraftUseCases
from workload_api.usecases.runs import RunUseCases
from workload_api.usecases.status import StatusUseCases
from workload_api.usecases.streams import EventStreams
from workload_api.usecases.workers import WorkerUseCases
from workload_api.usecases.workflows import WorkflowUseCases

__all__ = [
    "ApprovalUseCases",
    "DraftUseCases",
    "EventStreams",
    "Result",
    "RunUseCases",
    "StatusUseCases",
    "UseCases",
    "WorkerUseCases",
    "WorkflowUseCases",
]


class UseCases:
    """Every use case, grouped by resource (what the handlers are given)."""

    def __init__(
        self,
        *,
        workflows: WorkflowUseCases,
        runs: RunUseCases,
        workers: WorkerUseCases,
        approvals: ApprovalUseCases,
        drafts: DraftUseCases,
        status: StatusUseCases,
        streams: EventStreams,
    ) -> None:
        self.workflows = workflows
        self.runs = runs
        self.workers = workers
        self.approvals = approvals
        self.drafts = drafts
        self.status = status
        self.streams = streams
