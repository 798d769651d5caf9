"""One file because it is a catalogue: every domain error and its stable category and code.

One base class; the hierarchy reads as one table.

Every error a caller can act on is a :class:`WorkloadError`. Its ``category`` says what kind of
failure it is (the HTTP layer maps categories to statuses in one table); its ``code`` is the
stable machine-readable string that clients see (SPEC §6).

Hierarchy::

    WorkloadError
    ├── TooLarge                     category TOO_LARGE, code payload_too_large
    ├── InvalidInput                 category INVALID_INPUT
    │   ├── InvalidDefinition        code invalid_definition (carries every problem found)
    │   ├── InvalidArgument          code invalid_argument
    │   ├── InvalidCursor            code invalid_cursor
    │   └── WorkflowIdMismatch       code workflow_id_mismatch
    ├── NotFound                     category NOT_FOUND
    │   ├── WorkflowNotFound · VersionNotFound · RunNotFound · TaskNotFound
    │   └── ApprovalNotFound · DraftNotFound
    ├── Conflict                     category CONFLICT
    │   ├── WorkflowExists · IdempotencyKeyReused · RunFinished
    │   ├── ApprovalDecided · ApprovalChanged · DraftChanged · DraftNotReady
    │   └── LeaseLost                code lease_lost, with a reason (SPEC §10)
    ├── RevisionConflict             category REVISION_CONFLICT (a commit from a stale revision)
    ├── VersionTaken                 category REVISION_CONFLICT (a concurrent new version won)
    ├── PreconditionFailed           category PRECONDITION_FAILED (a stale If-Match)
    ├── TooManyRequests              category TOO_MANY_REQUESTS, code too_many_requests (a cap
    │                                on waiting claims or event streams; with retry_after)
    ├── RunBusy                      category UNAVAILABLE, code unavailable (try again shortly)
    ├── ModeConflict                 category CONFLICT (replicas and a coordinator on one database)
    ├── IllegalTransition            category INTERNAL (a bug: a status change the rules forbid)
    ├── StoreIntegrityError          category INTERNAL (a bug: a write a constraint refuses)
    └── SystemFault                  category UNAVAILABLE (the store or the lock failed)
        ├── StoreUnavailable
        ├── LockLost
        │   └── ShardsLost           (a replica could not renew its shard leases, SPEC §16)
        ├── Fenced                   (a newer coordinator or shard epoch refused a write)
        └── ExecutionStopped         (this process stopped executing: shutdown or fail-stop)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = [
    "ApprovalChanged",
    "ApprovalDecided",
    "ApprovalNotFound",
    "Conflict",
    "DraftChanged",
    "DraftNotFound",
    "DraftNotReady",
    "ErrorCategory",
    "ExecutionStopped",
    "Fenced",
    "IdempotencyKeyReused",
    "IllegalTransition",
    "InvalidArgument",
    "InvalidCursor",
    "InvalidDefinition",
    "InvalidInput",
    "LeaseLost",
    "LockLost",
    "ModeConflict",
    "NotFound",
    "PreconditionFailed",
    "Problem",
    "RevisionConflict",
    "RunBusy",
    "RunFinished",
    "RunNotFound",
    "ShardsLost",
    "StoreIntegrityError",
    "StoreUnavailable",
    "SystemFault",
    "TaskNotFound",
    "TooLarge",
    "TooManyRequests",
    "VersionNotFound",
    "VersionTaken",
    "WorkflowExists",
    "WorkflowIdMismatch",
    "WorkflowNotFound",
    "WorkloadError",
    "quoted",
]

QUOTE_LIMIT = 80
"""How many characters of a client's value a message quotes (problem details stay small)."""


def quoted(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr`` of a value a client sent, cut to ``limit`` characters with its length said.

    Error messages reach problem details and logs; a 64 KiB identifier must not be echoed whole.
    """
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text)} characters)"


class ErrorCategory(enum.StrEnum):
    """What kind of failure an error is; the HTTP layer maps each to one status."""

    INVALID_INPUT = "invalid_input"
    TOO_LARGE = "too_large"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    REVISION_CONFLICT = "revision_conflict"
    PRECONDITION_FAILED = "precondition_failed"
    TOO_MANY_REQUESTS = "too_many_requests"
    UNAVAILABLE = "unavailable"
    INTERNAL = "internal"


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem found in an input: where (a JSON Pointer, RFC 6901) and what."""

    path: str
    message: str


class WorkloadError(Exception):
    """Base of every error this project raises on purpose."""

    category: ErrorCategory = ErrorCategory.INTERNAL
    code: str = "internal"
    retry_after: int | None = None
    """Seconds after which the same request may succeed (HTTP ``Retry-After``); None: unsaid."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def extensions(self) -> dict[str, str]:
        """Extra members of the problem document (RFC 9457 §3.2) this error carries."""
        return {}


class TooLarge(WorkloadError):
    """A value the caller sent is larger than its bound (e.g. a worker's progress)."""

    category = ErrorCategory.TOO_LARGE
    code = "payload_too_large"


class InvalidInput(WorkloadError):
    """The caller sent something that can never be accepted as it is."""

    category = ErrorCategory.INVALID_INPUT
    code = "invalid_argument"

    def __init__(self, message: str, problems: tuple[Problem, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems


class InvalidDefinition(InvalidInput):
    """A workflow definition failed compilation; ``problems`` lists every problem found."""

    code = "invalid_definition"


class InvalidArgument(InvalidInput):
    """A request argument (body field, query or path parameter) is malformed."""

    code = "invalid_argument"


class InvalidCursor(InvalidInput):
    """A pagination cursor is malformed, tampered with, or belongs to another listing."""

    code = "invalid_cursor"


class WorkflowIdMismatch(InvalidInput):
    """A new version's body names another workflow than its path."""

    code = "workflow_id_mismatch"


class NotFound(WorkloadError):
    """The addressed resource does not exist."""

    category = ErrorCategory.NOT_FOUND
    code = "not_found"


class WorkflowNotFound(NotFound):
    """No workflow has this id."""

    code = "workflow_not_found"

    def __init__(self, workflow_id: str) -> None:
        super().__init__(f"workflow {quoted(workflow_id)} does not exist")
        self.workflow_id = workflow_id


class VersionNotFound(NotFound):
    """The workflow exists but has no such version."""

    code = "version_not_found"

    def __init__(self, workflow_id: str, version: int | str) -> None:
        super().__init__(f"workflow {quoted(workflow_id)} has no version {quoted(version)}")
        self.workflow_id = workflow_id
        self.version = version


class RunNotFound(NotFound):
    """No run has this id."""

    code = "run_not_found"

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {quoted(run_id)} does not exist")
        self.run_id = run_id


class TaskNotFound(NotFound):
    """The run exists but has no task with this key."""

    code = "task_not_found"

    def __init__(self, run_id: str, task_key: str) -> None:
        super().__init__(f"run {quoted(run_id)} has no task {quoted(task_key)}")
        self.run_id = run_id
        self.task_key = task_key


class ApprovalNotFound(NotFound):
    """No approval has this id."""

    code = "not_found"

    def __init__(self, approval_id: str) -> None:
        super().__init__(f"approval {quoted(approval_id)} does not exist")


class DraftNotFound(NotFound):
    """No draft has this id."""

    code = "not_found"

    def __init__(self, draft_id: str) -> None:
        super().__init__(f"draft {quoted(draft_id)} does not exist")


class Conflict(WorkloadError):
    """The request is valid but conflicts with the current state."""

    category = ErrorCategory.CONFLICT
    code = "conflict"


class WorkflowExists(Conflict):
    """A workflow with this id already exists."""

    code = "workflow_exists"

    def __init__(self, workflow_id: str) -> None:
        super().__init__(f"workflow {quoted(workflow_id)} already exists")
        self.workflow_id = workflow_id


class IdempotencyKeyReused(Conflict):
    """The idempotency key was used before for a different request."""

    code = "idempotency_key_reused"

    def __init__(self) -> None:
        super().__init__("this Idempotency-Key was already used for a different request")


class RunFinished(Conflict):
    """The run already reached a terminal status that forbids the operation."""

    code = "run_finished"

    def __init__(self, run_id: str, status: str) -> None:
        super().__init__(f"run {run_id!r} already finished with status {status!r}")
        self.run_id = run_id
        self.status = status


class ApprovalDecided(Conflict):
    """The approval is no longer pending: it was decided, expired or canceled."""

    code = "approval_decided"

    def __init__(self, approval_id: str, status: str) -> None:
        super().__init__(f"approval {quoted(approval_id)} is already {status}")


class ApprovalChanged(Conflict):
    """The decision names other arguments than the approval's (a stale or wrong digest)."""

    code = "approval_changed"

    def __init__(self, approval_id: str) -> None:
        super().__init__(
            f"arguments_digest does not match the arguments of approval {quoted(approval_id)}"
        )


class DraftChanged(Conflict):
    """The approval of a draft names another definition than the draft's."""

    code = "draft_changed"

    def __init__(self, draft_id: str) -> None:
        super().__init__(
            f"definition_hash does not match the definition of draft {quoted(draft_id)}"
        )


class DraftNotReady(Conflict):
    """The draft cannot be approved or rejected in its status."""

    code = "draft_not_ready"

    def __init__(self, draft_id: str, status: str) -> None:
        super().__init__(f"draft {quoted(draft_id)} is {status}")


class LeaseLost(Conflict):
    """A worker's report no longer holds a lease: ``reason`` says why; nothing was written.

    Reasons (SPEC §10): ``expired`` (the lease ran out), ``canceled`` (run or task canceled),
    ``finished`` (already completed or failed), ``timed_out`` (start-to-close passed),
    ``unknown`` (no such attempt, or a token that is not this attempt's).
    """

    code = "lease_lost"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason

    def extensions(self) -> dict[str, str]:
        """The ``reason`` member."""
        return {"reason": self.reason}


class RevisionConflict(WorkloadError):
    """A commit was made from a stale revision; nothing was written."""

    category = ErrorCategory.REVISION_CONFLICT
    code = "revision_conflict"

    def __init__(self, run_id: str, expected_revision: int) -> None:
        super().__init__(f"run {run_id!r} is no longer at revision {expected_revision}")
        self.run_id = run_id
        self.expected_revision = expected_revision


class VersionTaken(WorkloadError):
    """Another version of the workflow was created first; nothing was written (retry)."""

    category = ErrorCategory.REVISION_CONFLICT
    code = "revision_conflict"

    def __init__(self, workflow_id: str, version: int) -> None:
        super().__init__(f"workflow {workflow_id!r} already has a version {version}")
        self.workflow_id = workflow_id
        self.version = version


class PreconditionFailed(WorkloadError):
    """The client's precondition (``If-Match``) does not hold; nothing was written."""

    category = ErrorCategory.PRECONDITION_FAILED
    code = "precondition_failed"


class TooManyRequests(WorkloadError):
    """A caller holds as many waiting requests of a kind as it may (ADR 0025); try later.

    ``limit`` names the cap that was reached (``per_worker``, ``per_principal``, ``per_run``).
    """

    category = ErrorCategory.TOO_MANY_REQUESTS
    code = "too_many_requests"

    def __init__(self, message: str, limit: str, retry_after: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.retry_after = retry_after

    def extensions(self) -> dict[str, str]:
        """The ``limit`` member."""
        return {"limit": self.limit}


class IllegalTransition(WorkloadError):
    """A status change the rules forbid: always a bug in the writer, never user input."""

    category = ErrorCategory.INTERNAL
    code = "internal"

    def __init__(self, entity: str, current: str, target: str) -> None:
        super().__init__(f"illegal {entity} transition {current!r} -> {target!r}")
        self.entity = entity
        self.current = current
        self.target = target


class StoreIntegrityError(WorkloadError):
    """A write that the store's constraints refuse: always a bug in the writer."""

    category = ErrorCategory.INTERNAL
    code = "internal"


class RunBusy(WorkloadError):
    """A run changed under every try of a write to it; nothing was written, try again shortly.

    Not a ``SystemFault``: nothing failed and execution goes on. It is what a worker's report
    is answered (503 ``unavailable`` with ``Retry-After``, which a worker retries within its
    lease) instead of a revision conflict, which a report must never get (SPEC §10).
    """

    category = ErrorCategory.UNAVAILABLE
    code = "unavailable"
    retry_after = 1

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} changed under every try; nothing was written")
        self.run_id = run_id


class ModeConflict(WorkloadError):
    """Replicas (``--replica``) and a coordinator (§7, §14) would share one database (§16)."""

    category = ErrorCategory.CONFLICT
    code = "mode_conflict"

    def __init__(self, message: str, mode_in_use: str) -> None:
        super().__init__(message)
        self.mode_in_use = mode_in_use


class SystemFault(WorkloadError):
    """Infrastructure failed (database, lock): execution must stop, never record a failure."""

    category = ErrorCategory.UNAVAILABLE
    code = "unavailable"


class StoreUnavailable(SystemFault):
    """The store could not complete an operation; its outcome may be unknown."""


class LockLost(SystemFault):
    """The coordinator lock is no longer held by this process."""


class ShardsLost(LockLost):
    """A replica could not renew the leases of the shards it owns (SPEC §16): fail-stop."""

    def __init__(self, message: str, shards: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.shards = shards


class Fenced(SystemFault):
    """A write was refused: another coordinator leads, or another replica took the shard.

    ``shard`` is None for the coordinator epoch (§14), else the shard whose ``epoch`` it was
    (§16).
    """

    def __init__(self, epoch: int, shard: int | None = None) -> None:
        if shard is None:
            message = (
                f"a write of coordinator epoch {epoch} was refused: another coordinator leads now"
            )
        else:
            message = (
                f"a write to shard {shard} in its epoch {epoch} was refused: another replica "
                "owns the shard now"
            )
        super().__init__(message)
        self.epoch = epoch
        self.shard = shard


class ExecutionStopped(SystemFault):
    """This process no longer executes runs (it is stopping, or failed): try another, or later."""
