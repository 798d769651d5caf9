"""Ports: what the core needs from the outside world, as small Protocols.

Adapters: the engine package ships ``InMemoryStore``, ``FakeClock``, ``SystemClock`` and
``MockExecutor``; the PostgreSQL package ships the database ``Store`` and ``CoordinatorLock``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from workload_domain.agent.journal import StepRecord
from workload_domain.approvals import ApprovalRecord, ApprovalStatus
from workload_domain.console_sessions import ConsoleSessionStore
from workload_domain.cursors import Page
from workload_domain.drafts import DraftRecord
from workload_domain.errors import Fenced
from workload_domain.idempotency import (
    IdempotencyClaim,
    IdempotencyRecord,
    Outcome,
    PendingRecord,
    Replayed,
)
from workload_domain.jsonvalues import JsonObject
from workload_domain.leases import LeasedAttempt, LeasedToolCall
from workload_domain.model import (
    AppliedVersion,
    AttemptRecord,
    EventRecord,
    ExecutorRequest,
    ExecutorResult,
    NewRun,
    NewVersion,
    RunCommit,
    RunRecord,
    RunSnapshot,
    RunWithCounts,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.retention import RetentionStore
from workload_domain.run_listing import RunOrder
from workload_domain.shards import ClusterPicture, Member, ShardFence
from workload_domain.statuses import RunStatus
from workload_domain.workers import Activity, Claim, ClaimedAttempt, QueueStats, WorkerRecord

__all__ = [
    "ApprovalStore",
    "Clock",
    "ClusterReads",
    "ConsoleSessionStore",
    "CoordinatorLock",
    "DraftStore",
    "ExecutionStore",
    "Executor",
    "Expiry",
    "IdempotencyStore",
    "JournalStore",
    "Notifications",
    "NotifyHandlers",
    "Resource",
    "RunReads",
    "SecretStore",
    "ShardLeases",
    "Store",
    "WorkerStore",
    "WorkflowStore",
]


class Expiry(Protocol):
    """A block bounded by :meth:`Clock.cancel_at`; after it, whether its deadline cut it short."""

    @property
    def expired(self) -> bool:
        """Whether the deadline passed while the block ran (it was cancelled then)."""
        ...


class Clock(Protocol):
    """Time: the current instant, waiting until an instant, and bounding a block by one."""

    def now(self) -> datetime:
        """Return the current time, timezone-aware UTC."""
        ...

    async def sleep_until(self, deadline: datetime) -> None:
        """Return once ``deadline`` has passed (at once if it already has); cancellable."""
        ...

    def cancel_at(self, deadline: datetime) -> AbstractContextManager[Expiry]:
        """A block cancelled (anyio) once ``deadline`` has passed; the cancellation ends there.

        Cheaper than racing the block against a :meth:`sleep_until` task: no task is started,
        and nothing is cancelled when the block finishes in time.
        """
        ...


class Executor(Protocol):
    """Executes one attempt of a task. Cancellation (anyio) must stop it promptly.

    An executor runs in the coordinator's process; the actions it executes are *local*. Every
    other action is *remote*: its attempts wait in a queue for a worker (SPEC §10).
    """

    @property
    def actions(self) -> frozenset[str]:
        """The actions this executor executes."""
        ...

    async def execute(self, request: ExecutorRequest) -> ExecutorResult:
        """Execute the attempt and report its outcome; failures are results, not exceptions."""
        ...


class Resource(Protocol):
    """Something with connections to open before use and to close after (a lifecycle)."""

    async def open(self) -> None:
        """Connect and check that the resource can be used; raise ``SystemFault`` if not."""
        ...

    async def close(self) -> None:
        """Release every connection (idempotent)."""
        ...


class CoordinatorLock(Protocol):
    """The lock that makes one process the only coordinator of a database."""

    epoch: int | None
    """The coordinator epoch the lock was acquired in (SPEC §14); None until then."""

    async def acquire(self) -> bool:
        """Try to take the lock at once; ``False`` if another coordinator holds it."""
        ...

    async def check(self) -> None:
        """Prove the lock is still held; raise :class:`~workload_domain.errors.LockLost`."""
        ...

    async def release(self) -> None:
        """Give the lock up (idempotent)."""
        ...


class ShardLeases(Protocol):
    """A replica's membership of its database's cluster and its shard leases (SPEC §16).

    Joined once, on a connection of its own; renewed every lock check interval. A shard is
    taken in a new epoch of its own (:class:`~workload_domain.shards.ShardFence`), after every
    write of the previous epoch in flight, and given back when this replica hands it over.
    """

    replica_id: str
    """This replica's id (``WORKLOAD_REPLICA_ID``)."""

    async def join(self) -> int:
        """Register this replica; return the database's number of shards.

        Raises:
            ModeConflict: a coordinator without ``--replica`` (§7, §14) uses the database, or a
                live replica already has this id.
            StoreUnavailable: the database cannot be reached (nothing is left open).
        """
        ...

    async def renew(self, held: Collection[ShardFence]) -> ClusterPicture:
        """Say this replica is alive, extend the leases it holds, and see the cluster.

        Raises:
            ShardsLost: a held shard is no longer this replica's in its epoch, or the renewal
                failed or timed out (fail-stop: another replica may take the shards).
        """
        ...

    async def take(self, shard: int) -> ShardFence | None:
        """Take a free shard in a new epoch; None if someone holds it (or took it first).

        Raises:
            ShardsLost: the membership's connection failed (fail-stop).
        """
        ...

    async def give(self, fence: ShardFence) -> None:
        """Release a shard this replica held (its runs are no longer executed here)."""
        ...

    async def leave(self) -> None:
        """Release every shard, deregister and close (idempotent; never raises)."""
        ...


class ClusterReads(Protocol):
    """What ``GET /api/v1/cluster`` shows (SPEC §16)."""

    async def cluster(self) -> tuple[int, tuple[Member, ...]]:
        """The number of shards and the live members, each with the shards it holds.

        Live replicas by id; with none, a coordinator leading by itself (§7, §14) is the one
        member, holding every shard. An empty tuple: nobody executes (or it cannot be seen).
        """
        ...


class WorkflowStore(Protocol):
    """Workflows and their immutable versions."""

    async def create_workflow(
        self,
        workflow: WorkflowRecord,
        version: VersionRecord,
        idempotency: IdempotencyRecord | None = None,
    ) -> VersionRecord | Replayed:
        """Create a workflow and its version 1; ``WorkflowExists`` if the id is taken."""
        ...

    async def create_version(
        self,
        version: NewVersion,
        idempotency: PendingRecord[VersionRecord] | None = None,
    ) -> VersionRecord | Replayed:
        """Add ``version`` as the workflow's next one (``latest + 1``) and set its description.

        Concurrent new versions of one workflow queue (the workflow's row lock): each gets its
        own consecutive number and none fails for the others. The idempotency record is
        rendered from the numbered version and saved in the same transaction.

        Raises:
            WorkflowNotFound: there is no such workflow.
        """
        ...

    async def apply_version(
        self,
        version: NewVersion,
        idempotency: PendingRecord[AppliedVersion] | None = None,
    ) -> AppliedVersion | Replayed:
        """Make ``version`` the workflow's latest, unless the latest has its definition already.

        A new workflow is created with it as version 1; otherwise it is added as ``latest +
        1`` — or nothing is written when the latest version's definition hash is the same
        (``created`` False). Concurrent applies of one workflow queue (its row lock; a
        concurrent creation of a new one is retried): identical ones create one version.
        """
        ...

    async def get_workflow(self, workflow_id: str) -> WorkflowRecord:
        """Return a workflow; ``WorkflowNotFound`` if absent."""
        ...

    async def get_version(self, workflow_id: str, version: int) -> VersionRecord:
        """Return a version; ``WorkflowNotFound`` or ``VersionNotFound`` if absent."""
        ...

    async def page_workflows(self, cursor: str | None, limit: int) -> Page[WorkflowRecord]:
        """Workflows in ``(created_at, workflow_id)`` order."""
        ...

    async def page_versions(
        self, workflow_id: str, cursor: str | None, limit: int
    ) -> Page[VersionRecord]:
        """A workflow's versions by number; ``WorkflowNotFound`` if absent."""
        ...


class ExecutionStore(Protocol):
    """What executing runs needs: create, load and commit runs; find unfinished ones."""

    async def get_version(self, workflow_id: str, version: int) -> VersionRecord:
        """Return a version; ``WorkflowNotFound`` or ``VersionNotFound`` if absent."""
        ...

    async def create_run(
        self, new_run: NewRun, idempotency: IdempotencyRecord | None = None
    ) -> RunRecord | Replayed:
        """Write the run, its tasks, its first events (and the idempotency record) atomically."""
        ...

    async def load_run(self, run_id: str) -> RunSnapshot:
        """Read a run, its tasks and running attempts consistently; ``RunNotFound``."""
        ...

    async def commit(
        self, commit: RunCommit, idempotency: IdempotencyRecord | None = None
    ) -> Replayed | None:
        """Apply ``commit`` atomically; ``RevisionConflict`` (nothing written) if stale."""
        ...

    async def list_unfinished_runs(
        self, after: str | None, limit: int, shards: Collection[int] | None = None
    ) -> Sequence[str]:
        """Return ids of non-terminal runs in id order, after ``after``, at most ``limit``.

        ``shards``: only the runs of these shards (SPEC §16); None: every run.
        """
        ...

    async def runs_with_running_attempts(
        self, actions: Collection[str], shards: Collection[int] | None = None
    ) -> Sequence[str]:
        """Ids of runs with an attempt of one of ``actions`` still ``running``.

        Asked at start-up (or when a replica takes shards over: only those ``shards``) with the
        in-process actions: those attempts were left by a stopped coordinator or replica
        (remote ones keep their leases across a restart).
        """
        ...


class IdempotencyStore(Protocol):
    """Outcomes of idempotent writes, scoped to a principal."""

    async def find_outcome(self, claim: IdempotencyClaim) -> Outcome | None:
        """The stored outcome for this claim's key, if any.

        Raises ``IdempotencyKeyReused`` if the key was used for another request.
        """
        ...

    async def save_outcome(self, record: IdempotencyRecord) -> Replayed | None:
        """Record the outcome of a request that wrote nothing else.

        Returns the stored outcome instead when the key was already used for this request;
        raises ``IdempotencyKeyReused`` when it was used for another.
        """
        ...

    async def purge_outcomes(self, older_than: datetime) -> int:
        """Delete records created before ``older_than``; return how many."""
        ...


class RunReads(Protocol):
    """Reads of a run's state and history, in the orders of the API."""

    async def get_run(self, run_id: str) -> RunRecord:
        """Return the run row; ``RunNotFound`` if absent."""
        ...

    async def get_run_with_counts(self, run_id: str) -> RunWithCounts:
        """The run row and its task counts by status, in one read; ``RunNotFound``."""
        ...

    async def get_task(self, run_id: str, task_key: str) -> TaskRecord:
        """Return one task; ``RunNotFound`` / ``TaskNotFound``."""
        ...

    async def list_tasks(self, run_id: str) -> Sequence[TaskRecord]:
        """Return the run's tasks in definition order; ``RunNotFound`` if absent."""
        ...

    async def list_attempts(self, run_id: str, task_key: str) -> Sequence[AttemptRecord]:
        """Return a task's attempts by number; ``RunNotFound`` / ``TaskNotFound``."""
        ...

    async def list_events(
        self, run_id: str, after_sequence: int = 0, limit: int | None = None
    ) -> Sequence[EventRecord]:
        """Return events with ``sequence > after_sequence`` in order; ``RunNotFound``."""
        ...

    async def count_active_runs(self, workflow_id: str | None) -> Mapping[str, int]:
        """How many unfinished runs are in each status (absent: none), optionally of a workflow.

        Bounded by the unfinished runs, whatever the history (the console's live counts).
        """
        ...

    async def list_run_attempts(self, run_id: str, limit: int) -> Sequence[AttemptRecord]:
        """Every attempt of every task of a run, by ``(task_key, attempt)``, at most ``limit``.

        ``RunNotFound`` if absent. (The web console's timeline: one read, not one per task.)
        """
        ...

    async def page_runs(
        self,
        workflow_id: str | None,
        status: RunStatus | None,
        cursor: str | None,
        limit: int,
        *,
        order: RunOrder = RunOrder.ASC,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> Page[RunWithCounts]:
        """Runs by ``(created_at, run_id)`` in ``order``, optionally filtered, with task counts.

        The creation bounds are exclusive. Each run's counts are read with its row, in one
        read: they agree with its status. The cursor is bound to the order and every filter.
        """
        ...

    async def page_tasks(self, run_id: str, cursor: str | None, limit: int) -> Page[TaskRecord]:
        """A run's tasks in definition order; ``RunNotFound``."""
        ...

    async def page_attempts(
        self, run_id: str, task_key: str, cursor: str | None, limit: int
    ) -> Page[AttemptRecord]:
        """A task's attempts by number; ``RunNotFound`` / ``TaskNotFound``."""
        ...

    async def page_events(self, run_id: str, cursor: str | None, limit: int) -> Page[EventRecord]:
        """A run's events by sequence; ``RunNotFound``."""
        ...


class WorkerStore(Protocol):
    """Remote attempts (SPEC §10): claims under leases, heartbeats, expiry; workers, queues.

    Claims and heartbeats are written by the store itself, atomically, because they must hold
    under concurrent claimers (``FOR UPDATE SKIP LOCKED``); outcomes of remote attempts are
    ordinary revision-checked commits.
    """

    async def claim(self, claim: Claim, now: datetime) -> Sequence[ClaimedAttempt]:
        """Hand out up to ``len(claim.token_digests)`` queued attempts, oldest first.

        Queued remote tool calls of agents (``kind`` ``tool_call``) are handed out first, then
        task attempts, each kind oldest first.

        Each becomes ``running`` under its lease (``attempt.started``, one commit per run:
        revision + 1); the worker is recorded as seen. Never hands an attempt to two claimers.
        """
        ...

    async def find_attempt(self, attempt_id: str) -> LeasedAttempt | None:
        """An attempt by id, with its run and its lease token's digest (None: unknown)."""
        ...

    async def heartbeat(
        self, attempt_id: str, token_digest: str, now: datetime, progress: JsonObject | None
    ) -> datetime | None:
        """Renew a held lease (and record ``progress``); return the new expiry.

        ``attempt_id`` names a task attempt or a remote tool call (its step id).

        None when the lease is not held at ``now`` (another token, not running, expired, or
        timed out): nothing is written.
        """
        ...

    async def due_attempts(self, now: datetime, limit: int) -> Sequence[tuple[str, str, int]]:
        """Remote attempts whose lease, start-to-close or schedule-to-start time has passed.

        ``(run_id, task_key, attempt)``, at most ``limit``, oldest deadline first.
        """
        ...

    async def page_workers(self, cursor: str | None, limit: int) -> Page[WorkerRecord]:
        """Workers in ``worker_id`` order."""
        ...

    async def forget_workers(self, seen_before: datetime) -> int:
        """Delete the workers last seen before ``seen_before`` that hold no work; how many."""
        ...

    async def queue_stats(self) -> Sequence[QueueStats]:
        """Every queue that has (or had) remote attempts, by name."""
        ...

    async def activity(self, active_since: datetime) -> Activity:
        """Runs not yet terminal, and workers seen at or after ``active_since`` (one read)."""
        ...

    def connection_counts(self) -> Mapping[str, int]:
        """The store's connections by state (``idle``, ``used``); empty without a pool."""
        ...


class JournalStore(Protocol):
    """The step journal of agent attempts (SPEC §11), and the leases of remote tool calls.

    Steps are the attempt's, not the run's: they are written without a new revision, but only
    while their attempt is running (a commit that ends an agent attempt also ends its running
    steps, ``failed``). Every write returns the step *as stored*, so that the agent loop builds
    its conversation from exactly what a replay will read.
    """

    async def list_steps(self, run_id: str, task_key: str, attempt: int) -> Sequence[StepRecord]:
        """The journal of one attempt, by sequence (empty when it has none)."""
        ...

    async def begin_step(self, step: StepRecord) -> StepRecord | None:
        """Insert a ``running`` step (a remote tool call is queued in ``step.queue``).

        None (nothing written) when its attempt is not running or its sequence is taken.
        """
        ...

    async def finish_step(
        self,
        step: StepRecord,
        *,
        token_digest: str | None = None,
        deadline_passed: bool = False,
    ) -> StepRecord | None:
        """End a running step, and add what it used to its task's and run's usage, atomically.

        The step's status, response, usage and ``finished_at`` are ``step``'s.
        With ``token_digest`` (a worker's report) only while that token holds the lease at
        ``step.finished_at``; with ``deadline_passed`` (the lease reaper) only if the tool
        call's lease, start-to-close or schedule-to-start time has passed by then. None
        (nothing written) when the step is not running or the condition fails.
        """
        ...

    async def page_steps(
        self, run_id: str, task_key: str, cursor: str | None, limit: int
    ) -> Page[StepRecord]:
        """A task's steps by ``(attempt, sequence)``; ``RunNotFound`` / ``TaskNotFound``."""
        ...

    async def find_tool_call(self, step_id: str) -> LeasedToolCall | None:
        """A remote tool call by its step id, with its lease token's digest (None: unknown)."""
        ...

    async def due_tool_calls(self, now: datetime, limit: int) -> Sequence[StepRecord]:
        """Running remote tool calls whose lease or deadline has passed, oldest first.

        Their lease, start-to-close or schedule-to-start time; at most ``limit``.
        """
        ...


class ApprovalStore(Protocol):
    """Approvals of agents' tool calls (SPEC §11), written by the run's commits."""

    async def find_approval(self, approval_id: str) -> ApprovalRecord | None:
        """An approval by id (None: unknown, or an id that cannot be one)."""
        ...

    async def page_approvals(
        self, status: ApprovalStatus | None, cursor: str | None, limit: int
    ) -> Page[ApprovalRecord]:
        """Approvals in ``(requested_at, approval_id)`` order, optionally of one status."""
        ...

    async def due_approvals(self, now: datetime, limit: int) -> Sequence[ApprovalRecord]:
        """Pending approvals whose ``expires_at`` has passed, oldest first, at most ``limit``."""
        ...


class DraftStore(Protocol):
    """Drafts of workflows written by a model (SPEC §11)."""

    async def create_draft(
        self, draft: DraftRecord, idempotency: IdempotencyRecord | None = None
    ) -> DraftRecord | Replayed:
        """Write a new (generating) draft, with the idempotency record."""
        ...

    async def find_draft(self, draft_id: str) -> DraftRecord | None:
        """A draft by id (None: unknown)."""
        ...

    async def page_drafts(self, cursor: str | None, limit: int) -> Page[DraftRecord]:
        """Drafts in ``(created_at, draft_id)`` order."""
        ...

    async def generating_drafts(self) -> Sequence[str]:
        """Ids of drafts still generating (left by a stopped coordinator, at start-up)."""
        ...

    async def finish_draft(self, draft: DraftRecord) -> bool:
        """Write a generation's end (``ready`` or ``invalid``) if the draft is generating."""
        ...

    async def approve_draft(
        self,
        draft_id: str,
        definition_hash: str,
        version: VersionRecord,
        *,
        workflow: WorkflowRecord | None,
        now: datetime,
        idempotency: PendingRecord[DraftRecord] | None = None,
    ) -> DraftRecord | Replayed:
        """Make a ready draft a version, atomically.

        With ``workflow`` (a new one): it and its version 1; else ``version`` as the next
        version of an existing workflow, numbered by the store (``version.version`` is ignored:
        concurrent new versions queue, each taking the next number).

        An approved draft with this hash is returned as it is (no second version).

        Raises:
            DraftNotFound · DraftChanged (another hash) · DraftNotReady (not ready) ·
            WorkflowExists · WorkflowNotFound.
        """
        ...

    async def reject_draft(
        self,
        draft_id: str,
        now: datetime,
        idempotency: PendingRecord[DraftRecord] | None = None,
    ) -> DraftRecord | Replayed:
        """Reject a ready or invalid draft (a rejected one is returned as it is).

        Raises:
            DraftNotFound · DraftNotReady (generating, or approved).
        """
        ...


class SecretStore(Protocol):
    """Secrets the service keeps across restarts (cursor keys, the console's session key)."""

    async def secret(self, name: str) -> bytes:
        """The random secret (32 bytes or more) kept under ``name``, made on first use."""
        ...


@dataclass(frozen=True, slots=True)
class NotifyHandlers:
    """What a replica does when another one announces something (SPEC §14)."""

    run: Callable[[str], None]
    """A run was created or changed through another replica's API."""
    work: Callable[[Sequence[tuple[str, str]] | None], None]
    """Remote work of these ``(queue, action)`` pairs was queued: the waiting claims that match
    look again (None: unknown work, every waiting claim looks)."""
    step: Callable[[str, str, int], None]
    """A tool call of ``(run_id, task_key, attempt)`` ended: its agent's loop reads on."""


class Notifications(Protocol):
    """Announcements of other replicas (``LISTEN/NOTIFY``)."""

    async def run(self, handlers: NotifyHandlers) -> None:
        """Hand every announcement to ``handlers`` until cancelled."""
        ...

    async def hear_shards(self, shards: Collection[int]) -> None:
        """Hear the runs of exactly these shards from now on (a replica, SPEC §16).

        Returns once the listener listens to them — or at once while it is not connected (it
        listens to them when it reconnects; the owner's sweep covers what it missed).
        """
        ...


class Store(
    WorkflowStore,
    ExecutionStore,
    IdempotencyStore,
    RunReads,
    WorkerStore,
    JournalStore,
    ApprovalStore,
    DraftStore,
    SecretStore,
    ConsoleSessionStore,
    ClusterReads,
    RetentionStore,
    Resource,
    Protocol,
):
    """The whole persistence port: every adapter implements all of it."""

    def fence(self, epoch: int | None, on_fenced: Callable[[Fenced], None] | None = None) -> None:
        """Fence execution writes with ``epoch`` (refused once it is no longer current).

        ``on_fenced`` is told of each refusal, with the error: a newer coordinator epoch, or
        (``Fenced.shard``) a shard another replica took.
        """
        ...

    def announce(self, enabled: bool) -> None:
        """Announce writes to other replicas (SPEC §14)."""
        ...

    def shard_notices(self, shards_total: int) -> None:
        """Announce runs on their shard's channel, to its owner only (a replica, SPEC §16)."""
        ...
