"""The run models: runs, their tasks, attempts, events, agent steps and usage."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from workload_sdk.models._common import ErrorObject, JsonObject, _Resource
from workload_sdk.models._statuses import AttemptStatus, RunStatus, TaskStatus

__all__ = [
    "Attempt",
    "Event",
    "Run",
    "Step",
    "TaskRun",
    "Usage",
]


class Usage(_Resource):
    """What agent steps used (SPEC §11): calls made, and tokens as the model reported them.

    On a task: over all its attempts. On a run: the sum over its agent tasks (zeros without
    any).
    """

    model_calls: int
    tool_calls: int
    input_tokens: int
    output_tokens: int


class Run(_Resource):
    """A run of one workflow version.

    ``revision`` grows by one per committed state change; pass it back as
    ``client.runs.cancel(run.run_id, if_revision=run.revision)`` to act only on the state you
    saw (a stale revision raises :class:`~workload_sdk.PreconditionFailed`).
    """

    run_id: str
    workflow_id: str
    version: int
    status: RunStatus
    revision: int
    input: JsonObject
    cancel_requested: bool
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    task_counts: dict[TaskStatus, int] = Field(default_factory=dict)
    usage: Usage | None = None
    """What its agent tasks used; None from servers older than agents."""
    output: JsonObject | None = None
    """The run's result once it has succeeded: ``{task_key: output}`` of its sink tasks (those
    no other task depends on); None before, for a run that did not succeed, and from servers
    older than results."""

    @property
    def is_terminal(self) -> bool:
        """Whether the run has finished (succeeded, failed or canceled)."""
        return self.status.is_terminal


class TaskRun(_Resource):
    """One task of a run."""

    task_key: str
    status: TaskStatus
    depends_on: list[str]
    attempt_count: int
    max_attempts: int
    next_attempt_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    output: JsonObject | None
    error: ErrorObject | None
    usage: Usage | None = None
    """What an agent task used over all its attempts (zeros for other tasks); None from
    servers older than agents."""


class Attempt(_Resource):
    """One attempt at executing a task (numbered from 1).

    The fields after ``error`` describe remote attempts (SPEC §10): which worker claimed the
    attempt and until when its lease runs. They are None for attempts run in the coordinator,
    and absent (None) from servers older than workers.
    """

    attempt: int
    status: AttemptStatus
    started_at: datetime
    finished_at: datetime | None
    output: JsonObject | None
    error: ErrorObject | None
    attempt_id: str | None = None
    queue: str | None = None
    worker_id: str | None = None
    claimed_at: datetime | None = None
    lease_expires_at: datetime | None = None
    progress: JsonObject | None = None
    executed_by: str | None = None
    """The ``replica_id`` of the service process that ran an in-process attempt (SPEC §16);
    None for a remote one (see ``worker_id``), and from servers older than replicas."""


class Event(_Resource):
    """One entry of a run's history, such as ``run.created`` or ``attempt.failed``.

    ``type`` is a plain string so that event types added by newer servers parse too.
    """

    sequence: int
    type: str
    occurred_at: datetime
    task_key: str | None
    attempt: int | None
    data: JsonObject


class Step(_Resource):
    """One step of an agent attempt's journal (SPEC §11): a model call or a tool call.

    Steps are numbered by ``sequence`` within an attempt. ``kind`` (``"model_call"`` or
    ``"tool_call"``) and ``status`` (``"running"``, ``"succeeded"`` or ``"failed"``) are plain
    strings so that values added by newer servers still parse.

    A model call's ``request`` holds the model and the messages added since the previous call,
    its ``response`` the answer (``content``, ``tool_calls``, ``finish_reason``) and ``usage``
    its tokens (``input_tokens``, ``output_tokens``). A tool call's ``request`` holds the
    ``tool``, its ``action`` and the ``arguments``; its ``response`` is ``{"output": …}`` or
    ``{"error": …}``, and ``worker_id`` names the worker that ran it (None in-process).
    """

    step_id: str
    attempt: int
    sequence: int
    kind: str
    status: str
    request: JsonObject
    request_hash: str
    response: JsonObject | None
    usage: JsonObject | None
    tool_call_id: str | None
    started_at: datetime
    finished_at: datetime | None
    worker_id: str | None = None
