"""Value objects exchanged through the ports: records of runs, tasks, attempts and events.

They are immutable; a change to a run is described by a :class:`RunCommit` that the store applies
atomically, conditioned on the run's expected revision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from workload_domain.approvals import ApprovalRecord
from workload_domain.errors import StoreIntegrityError
from workload_domain.events import EventType
from workload_domain.jsonvalues import JsonObject
from workload_domain.statuses import AttemptStatus, RunStatus, TaskStatus
from workload_domain.usage import Usage

__all__ = [
    "AppliedVersion",
    "AttemptRecord",
    "EventRecord",
    "ExecutorFailure",
    "ExecutorRequest",
    "ExecutorResult",
    "ExecutorSuccess",
    "ExecutorSuspended",
    "NewRun",
    "NewVersion",
    "RunCommit",
    "RunRecord",
    "RunSnapshot",
    "RunWithCounts",
    "TaskError",
    "TaskRecord",
    "VersionRecord",
    "WorkflowRecord",
    "check_sequences",
]


@dataclass(frozen=True, slots=True)
class TaskError:
    """Why an attempt or a task failed."""

    code: str
    message: str
    retryable: bool

    def to_json(self) -> JsonObject:
        """Return the error object of the API (``code``, ``message``, ``retryable``)."""
        return {"code": self.code, "message": self.message, "retryable": self.retryable}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskError:
        """Build from the error object of the API."""
        return cls(str(data["code"]), str(data["message"]), bool(data["retryable"]))


@dataclass(frozen=True, slots=True)
class WorkflowRecord:
    """A workflow: the id under which versions are created."""

    workflow_id: str
    latest_version: int
    description: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class VersionRecord:
    """An immutable version of a workflow with its normalized definition."""

    workflow_id: str
    version: int
    definition_hash: str
    task_count: int
    created_at: datetime
    definition: JsonObject


@dataclass(frozen=True, slots=True)
class AppliedVersion:
    """What applying a definition did (``PUT /workflows/{id}``, SPEC §6).

    ``version`` is the latest version now; ``created`` says whether this apply made it (False:
    the latest version had the same definition already, and nothing was written).
    """

    version: VersionRecord
    created: bool


@dataclass(frozen=True, slots=True)
class NewVersion:
    """A version to add to an existing workflow: the store gives it the next number.

    Its number is not the caller's to pick: concurrent new versions of one workflow queue in
    the store and each takes ``latest + 1`` in turn (:meth:`numbered`), so none of them fails.
    """

    workflow_id: str
    definition_hash: str
    task_count: int
    created_at: datetime
    definition: JsonObject
    description: str
    """The workflow's description from now on (the definition's)."""

    def numbered(self, version: int) -> VersionRecord:
        """This version under the number the store gave it."""
        return VersionRecord(
            self.workflow_id,
            version,
            self.definition_hash,
            self.task_count,
            self.created_at,
            self.definition,
        )


@dataclass(frozen=True, slots=True)
class RunRecord:
    """The run row: its status, revision and lifecycle times."""

    run_id: str
    workflow_id: str
    version: int
    status: RunStatus
    revision: int
    input: JsonObject
    cancel_requested: bool
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    usage: Usage = field(default_factory=Usage)
    """What the run's agent tasks used (SPEC §11); written by the journal, never by a commit."""
    traceparent: str | None = None
    """The W3C trace context of the request that created the run (SPEC §12), or None: the
    run's span continues it, and workers receive it with the run's attempts."""
    output: JsonObject | None = None
    """The run's result (SPEC §6): once it has succeeded, ``{task_key: output}`` of its sink
    tasks (those no other task depends on); None before, and for a run that did not succeed."""


RunWithCounts = tuple[RunRecord, Mapping[str, int]]
"""A run row and how many of its tasks are in each status (absent: none), read together: the
counts are those of the run's revision the row shows."""


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One task of a run; ``position`` is its index in the definition."""

    task_key: str
    position: int
    status: TaskStatus
    depends_on: tuple[str, ...]
    attempt_count: int
    max_attempts: int
    next_attempt_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    output: JsonObject | None = None
    error: TaskError | None = None
    usage: Usage = field(default_factory=Usage)
    """What an agent task's steps used over all its attempts; written by the journal only."""


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt at executing a task; attempts are numbered from 1 per task.

    ``started_at`` is when the attempt was created (queued, for a remote action); a remote
    attempt's claim sets ``worker_id``, ``claimed_at``, ``lease_expires_at`` and ``timeout_at``.
    Lease fields and ``progress`` change without a new revision (claims and heartbeats are
    written by the store itself), so a commit never writes them back.
    """

    task_key: str
    attempt: int
    status: AttemptStatus
    started_at: datetime
    finished_at: datetime | None = None
    output: JsonObject | None = None
    error: TaskError | None = None
    attempt_id: str = ""
    """``ids.attempt_id(run_id, task_key, attempt)``: stable, so a replanned commit agrees."""
    action: str = ""
    queue: str = "default"
    heartbeat_timeout_seconds: float | None = None
    """Remote attempts only: the lease length."""
    timeout_seconds: float | None = None
    """Remote attempts only: start-to-close, counted from the claim."""
    schedule_deadline: datetime | None = None
    """Remote attempts only: when a queued attempt fails its schedule-to-start timeout."""
    worker_id: str | None = None
    claimed_at: datetime | None = None
    lease_expires_at: datetime | None = None
    timeout_at: datetime | None = None
    progress: JsonObject | None = None
    report_hash: str | None = None
    """A hash of the worker's complete/fail request, so that an identical retry answers 200."""
    paused_at: datetime | None = None
    """Agent attempts: since when the task waits for an approval (None: it does not)."""
    paused_seconds: float = 0.0
    """Agent attempts: time spent waiting for approvals, which counts toward neither the
    task's ``timeout_seconds`` nor the budget's ``max_seconds`` (SPEC §11)."""
    executed_by: str | None = None
    """In-process attempts: the ``replica_id`` of the service process running it (the last
    one, for a resumed agent attempt); None for a remote one (SPEC §6, §16)."""


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One entry of a run's history; ``sequence`` is 1, 2, 3 … per run."""

    sequence: int
    type: EventType
    occurred_at: datetime
    task_key: str | None = None
    attempt: int | None = None
    data: JsonObject = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    """What an executor of a run needs to decide its next step, read in one consistent view.

    ``live_attempts`` are the attempts that have not ended: ``running`` ones, and ``queued``
    ones of remote actions.
    """

    run: RunRecord
    tasks: tuple[TaskRecord, ...]
    live_attempts: tuple[AttemptRecord, ...]
    last_sequence: int
    approvals: tuple[ApprovalRecord, ...] = ()
    """The run's pending approvals (SPEC §11)."""


@dataclass(frozen=True, slots=True)
class NewRun:
    """Everything written when a run is created, in one transaction."""

    run: RunRecord
    tasks: tuple[TaskRecord, ...]
    events: tuple[EventRecord, ...]

    @property
    def snapshot(self) -> RunSnapshot:
        """The run as its creating commit leaves it (what reading it back would give)."""
        return RunSnapshot(self.run, self.tasks, (), len(self.events))


@dataclass(frozen=True, slots=True)
class RunCommit:
    """One atomic change of a run, valid only if the run is still at ``expected_revision``.

    ``run`` holds the new run row (its revision is ``expected_revision + 1``); ``tasks`` the
    changed task rows; ``attempts`` new or changed attempt rows; ``events`` the appended events,
    numbered right after the snapshot's last sequence.
    """

    expected_revision: int
    run: RunRecord
    tasks: tuple[TaskRecord, ...] = ()
    attempts: tuple[AttemptRecord, ...] = ()
    events: tuple[EventRecord, ...] = ()
    approvals: tuple[ApprovalRecord, ...] = ()
    """New or decided approvals."""
    announce: bool = False
    """Made outside the run's runner (a cancel, a worker's report, a decision): the leader's
    runner must hear of it, also when this process is another replica (SPEC §14)."""


@dataclass(frozen=True, slots=True)
class ExecutorRequest:
    """What an executor receives for one attempt (SPEC §4)."""

    run_id: str
    task_key: str
    attempt: int
    action: str
    input: JsonObject
    run_input: JsonObject
    upstream: JsonObject = field(default_factory=dict)
    """``{dependency task key: its output}`` for the task's direct dependencies (§10)."""
    started_at: datetime | None = None
    """When the attempt started (an agent's ``max_seconds`` counts from it)."""
    deadline: datetime | None = None
    """When the attempt times out (``started_at + timeout_seconds``)."""
    queue: str = "default"
    """The task's queue: where an agent's remote tool calls wait for a worker."""
    heartbeat_timeout_seconds: float = 30
    """The task's lease length, for an agent's remote tool calls."""
    schedule_to_start_timeout_seconds: float | None = None
    """How long an agent's remote tool call may wait for a worker (None: forever)."""
    paused_seconds: float = 0.0
    """Time the attempt spent waiting for approvals (not counted by its budget)."""


@dataclass(frozen=True, slots=True)
class ExecutorSuccess:
    """The attempt succeeded with an ``output`` JSON object."""

    output: JsonObject


@dataclass(frozen=True, slots=True)
class ExecutorFailure:
    """The attempt failed with ``error``."""

    error: TaskError


@dataclass(frozen=True, slots=True)
class ExecutorSuspended:
    """An agent attempt pauses until people decide these approvals (SPEC §11).

    The attempt stays ``running`` and its task becomes ``waiting_approval``; it holds no
    concurrency slot and no timer while it waits, and is launched again (resumed) once every
    approval it waits for is decided.
    """

    approvals: tuple[ApprovalRecord, ...]


ExecutorResult = ExecutorSuccess | ExecutorFailure | ExecutorSuspended
"""What an executor returns for one attempt."""


def check_sequences(events: Sequence[EventRecord], last: int) -> None:
    """Check that ``events`` continue a history whose last sequence is ``last``, without gaps.

    Raises:
        StoreIntegrityError: they do not (a writer bug; a store refuses such a write).
    """
    if [e.sequence for e in events] != list(range(last + 1, last + 1 + len(events))):
        raise StoreIntegrityError("event sequences must continue the run's history contiguously")
