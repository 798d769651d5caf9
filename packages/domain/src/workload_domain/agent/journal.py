"""The step journal of agent attempts (SPEC §11); each step adds to a :class:`Usage`.

Every model call and every tool call of an agent attempt is a step ``(run_id, task_key,
attempt, sequence)``, committed before the loop moves on. A step starts ``running`` and ends
``succeeded`` or ``failed`` exactly once. A tool call served by a worker is leased like a
remote attempt: its step carries the queue, the action, and while claimed the worker, the lease
and the start-to-close deadline (written by the store, like an attempt's lease).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from datetime import datetime

from workload_domain.jsonvalues import JsonObject
from workload_domain.usage import Usage

__all__ = ["StepKind", "StepRecord", "StepStatus", "step_id"]

_STEPS = uuid.UUID("0b1d7c3e-5d2a-4f7e-8c61-9a4e2f3b7d10")


class StepKind(enum.StrEnum):
    """What a step is."""

    MODEL_CALL = "model_call"
    TOOL_CALL = "tool_call"


class StepStatus(enum.StrEnum):
    """Where a step is."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


def step_id(run_id: str, task_key: str, attempt: int, sequence: int) -> str:
    """The id of a step (a name-based UUIDv5): a tool call's ``attempt_id`` in claims."""
    return str(uuid.uuid5(_STEPS, f"{run_id}/{task_key}/{attempt}/{sequence}"))


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step of an agent attempt's journal.

    ``request`` and ``response`` are JSON objects: for a model call the messages added since
    the previous model call (the whole conversation is their concatenation) and the model's
    answer; for a tool call the tool, its action and arguments, and ``{"output": …}`` or
    ``{"error": …}``. ``request_hash`` hashes the *whole* request, so that a replay that would
    send something else is detected.
    """

    run_id: str
    task_key: str
    attempt: int
    sequence: int
    kind: StepKind
    status: StepStatus
    request: JsonObject
    request_hash: str
    started_at: datetime
    response: JsonObject | None = None
    usage: JsonObject | None = None
    """``{"input_tokens", "output_tokens"}`` of a model call; None for a tool call."""
    tool_call_id: str | None = None
    finished_at: datetime | None = None
    # A tool call executed by a worker (None for model calls and in-process tools):
    action: str | None = None
    queue: str | None = None
    heartbeat_timeout_seconds: float | None = None
    deadline: datetime | None = None
    """The agent attempt's deadline: a claimed tool call's ``timeout_at``."""
    schedule_deadline: datetime | None = None
    worker_id: str | None = None
    claimed_at: datetime | None = None
    lease_expires_at: datetime | None = None
    timeout_at: datetime | None = None
    progress: JsonObject | None = None
    report_hash: str | None = None
    lease_end: str | None = None
    """Why a remote tool call ended without its worker's report (a lease-lost reason)."""

    @property
    def step_id(self) -> str:
        """This step's id."""
        return step_id(self.run_id, self.task_key, self.attempt, self.sequence)

    @property
    def remote(self) -> bool:
        """Whether a worker executes this step (a tool call whose action is remote)."""
        return self.queue is not None

    @property
    def queued(self) -> bool:
        """A remote tool call no worker has claimed yet."""
        return self.remote and self.status is StepStatus.RUNNING and self.worker_id is None

    def usage_added(self) -> Usage:
        """What this step adds to its task's and run's usage once it has ended."""
        if self.status is StepStatus.RUNNING:
            return Usage()
        if self.kind is StepKind.TOOL_CALL:
            return Usage(tool_calls=1)
        tokens = self.usage or {}
        return Usage(
            model_calls=1,
            input_tokens=int(tokens.get("input_tokens", 0)),
            output_tokens=int(tokens.get("output_tokens", 0)),
        )
