"""The runner of one run: a single-writer loop that turns observations into commits.

Each run being executed has one :class:`RunRunner`. Attempts, slot waiters and the retry timer
are tasks that only *report* to the runner through a channel; the runner alone commits, so a
run's commits are serialized in-process and a revision conflict can only come from another
writer (a cancel request, another process). On a conflict the runner re-reads the run and
replays what it observed onto the fresh state (:func:`~workload_engine.planner.plan` is pure).

Attempts are launched only after the commit that records them succeeded (persist first, execute
second). Cancellation of the runner's scope is *interruption*: nothing is written, and the next
coordinator marks the attempts left ``running`` as ``interrupted``.

Workers' reports on the run that reach this process are handed to the runner
(:meth:`RunRunner.report`) and committed in its own commit, with what they make ready (SPEC §16).
A replica handing the run's shard over *drains* the runner (:meth:`RunRunner.drain`): it starts
nothing more, commits what its attempts report, and returns once none executes. Every write of
the runner and of the tasks it starts carries its shard's fence, if any (``fencing``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from workload_domain.compiler import CompiledWorkflow
from workload_domain.errors import RevisionConflict
from workload_domain.fencing import fenced
from workload_domain.ports import Clock, ExecutionStore, Executor
from workload_domain.records import RunCommit, RunSnapshot
from workload_domain.shards import ShardFence
from workload_domain.statuses import RunStatus, TaskStatus
from workload_domain.telemetry import Telemetry
from workload_engine._groups import first_error
from workload_engine._held_reports import HeldReports, caught_up
from workload_engine._local_execution import execute
from workload_engine._runner_messages import Drain, Message, Refresh, SlotGranted, Wake, drained
from workload_engine.approval_planning import ApprovalWait
from workload_engine.definitions import DefinitionCache
from workload_engine.planner import (
    AttemptOutcome,
    Launch,
    Observation,
    Plan,
    plan,
)
from workload_engine.reports import Report

__all__ = ["RunRunner", "RunnerHost"]


class _LocalAttempt:
    __slots__ = ("done", "scope")

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()


class RunnerHost(Protocol):
    """What a runner takes from the engine that makes it (read once, as it is made)."""

    store: ExecutionStore
    executor: Executor
    clock: Clock
    limiter: anyio.CapacityLimiter
    definitions: DefinitionCache
    startup: anyio.CapacityLimiter
    local_actions: frozenset[str]
    resumable_actions: frozenset[str]
    telemetry: Telemetry
    executor_id: str | None

    def committed(self, commit: RunCommit) -> None:
        """Told of each commit the runner made, once it succeeded."""


class RunRunner:
    """Executes one run until it is terminal, or until its scope is cancelled (interruption)."""

    def __init__(
        self,
        run_id: str,
        engine: RunnerHost,
        *,
        snapshot: RunSnapshot | None = None,
        park: bool = False,
        slot: object | None = None,
        resumed: bool = False,
        on_started: Callable[[], None] | None = None,
        fence: ShardFence | None = None,
    ) -> None:
        self.run_id = run_id
        self.fence = fence
        """The shard epoch this runner's writes carry (SPEC §16); None: not a replica's."""
        self.scope = anyio.CancelScope()
        """Cancelled to interrupt this run alone (a shard handed over past its grace)."""
        self._executor_id = engine.executor_id
        self._snapshot = snapshot
        self._park = park
        self._grant = slot
        self._resumed = resumed
        self._on_started = on_started
        self.parked: RunSnapshot | None = None
        """Set when the runner stopped because the run only waits for a slot (``park``)."""
        self.stale = False
        """Told of a change after it chose to park: the parked snapshot is not to be used."""
        self._store = engine.store
        self._executor = engine.executor
        self._clock = engine.clock
        self._limiter = engine.limiter
        self._definitions = engine.definitions
        self._startup = engine.startup if snapshot is None else None  # None: it reads nothing
        self._turn: anyio.CapacityLimiter | None = None
        self._local = engine.local_actions
        self._resumable = engine.resumable_actions
        self._committed = engine.committed
        self._telemetry = engine.telemetry
        self._started = False
        self.started = anyio.Event()
        """Set once the runner's first commit is done (or it ended): its leftovers are marked."""
        send, receive = anyio.create_memory_object_stream[Message](math.inf)
        self._send: MemoryObjectSendStream[Message] = send
        self._receive: MemoryObjectReceiveStream[Message] = receive
        self._attempts: dict[tuple[str, int], _LocalAttempt] = {}
        self._slots: dict[str, object] = {}
        self._slot_waiters: dict[str, anyio.CancelScope] = {}
        self._timer: anyio.CancelScope | None = None
        self._timer_at: datetime | None = None
        self._draining = False
        self._reports = HeldReports()
        self._closed = False

    def notify(self) -> None:
        """Tell the runner that someone else changed the run (e.g. a cancel request)."""
        if self.parked is not None:
            # It chose to park and is leaving: its engine starts the run again instead.
            self.stale = True
            return
        # A runner that already finished has nothing left to refresh.
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._send.send_nowait(Refresh())

    def report(self, report: Report) -> bool:
        """Commit a remote attempt's report in this runner's next commit.

        False when the runner cannot take it (still starting — it may wait its turn behind a
        recovery's backlog —, finished, parking, or draining): the caller commits it itself.
        Taken, it is answered — or declined, if the runner stops first.
        """
        if not self._started or self._closed or self._draining or self.parked is not None:
            return False
        try:
            self._send.send_nowait(report)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    def drain(self) -> None:
        """Start nothing more; return once no attempt of the run executes here (SPEC §16).

        What its attempts report is still committed; then the runner returns without
        finishing the run, which the replica taking the shard over recovers.
        """
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._send.send_nowait(Drain())

    async def run(self) -> RunSnapshot:
        """Drive the run to a terminal status and return its final state.

        System faults (the store failing) propagate and stop the run's execution without
        writing anything about them.
        """
        try:
            with fenced(self.fence):  # inherited by every task started below
                async with anyio.create_task_group() as tg:
                    final = await self._loop(tg)
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # Callers handle one fault, not a group: the first one stops the run anyway.
            raise first_error(group) from group
        finally:
            self._closed = True
            for token in self._slots.values():
                self._limiter.release_on_behalf_of(token)
            self._slots.clear()
            self._release_grant()
            self._send.close()
            # Reports nobody committed go back to their senders, who commit them themselves.
            self._reports.decline_all()
            for message in drained(self._receive):
                if isinstance(message, Report):
                    message.decline()
            self._receive.close()
        return final

    async def _loop(self, tg: TaskGroup) -> RunSnapshot:
        # Start-up (the first load, commit and launches) is bounded across the runners that
        # read their run, so that a recovery of thousands of runs neither starves the pool nor
        # delays readiness; one cancelled while it waits for a turn still gives its place back.
        try:
            if self._startup is not None:
                await self._startup.acquire()
                self._turn = self._startup
            return await self._drive(tg)
        finally:
            self._end_startup()

    def _end_startup(self) -> None:
        if not self._started:
            self._started = True
            if self._turn is not None:
                self._turn.release()
            self.started.set()
            if self._on_started is not None:
                self._on_started()

    def _release_grant(self) -> None:
        if self._grant is not None:
            self._limiter.release_on_behalf_of(self._grant)
            self._grant = None

    async def _drive(self, tg: TaskGroup) -> RunSnapshot:
        # A run handed over by its creator comes with its state as created: no read back.
        snapshot = self._snapshot or await self._store.load_run(self.run_id)
        self._snapshot = None
        # The run's span is current while this runner drives it: its attempts' tasks, started
        # within, are its children.
        with self._telemetry.run(snapshot.run):
            return await self._plan_loop(tg, snapshot)

    async def _plan_loop(self, tg: TaskGroup, snapshot: RunSnapshot) -> RunSnapshot:
        workflow = await self._definitions.get(snapshot.run.workflow_id, snapshot.run.version)
        # A run resumed after it waited for a slot without a runner was not taken over.
        recovering = snapshot.run.status is not RunStatus.PENDING and not self._resumed
        outcomes: list[Observation] = []
        refresh = False
        while True:
            if refresh:
                snapshot = await self._store.load_run(self.run_id)
                refresh = False
            if snapshot.run.cancel_requested and self._attempts:
                await self._stop_attempts()
            # Reports are decided on the run as just read, or as their own read brought it.
            reported = self._reports.decide(snapshot, self._clock)
            observed = [*outcomes, *(o for _, o in reported)]
            decided = self._plan(workflow, snapshot, observed, recovering)
            if not self._draining and self._take_free_slots(decided.wanted_slots):
                # Tasks that can start at once start in this commit, not in one of their own.
                decided = self._plan(workflow, snapshot, observed, recovering)
            self._release_grant()  # the slot granted to a resumed run, if it no longer wants it
            if decided.commit is not None:
                try:
                    await self._store.commit(decided.commit)
                except RevisionConflict:
                    refresh = True
                    continue
                recovering = False
                self._committed(decided.commit)
            if self._reports.answer(reported, decided):
                self._send.send_nowait(Refresh())  # duplicates held back: decide them next
            snapshot = decided.after
            outcomes = []
            for key in decided.unused_slots:
                self._limiter.release_on_behalf_of(self._slots.pop(key))
            for launch in decided.launches:
                token = self._slots.pop(launch.request.task_key)
                local = _LocalAttempt()
                self._attempts[(launch.request.task_key, launch.request.attempt)] = local
                tg.start_soon(self._attempt, launch, token, local)
            if self._draining and not self._attempts and not self._reports:
                # Handed over: nothing of the run executes here any more (SPEC §16).
                return snapshot
            if self._may_park(decided):
                # Nothing to do but wait for a slot: the engine keeps the run's id in its queue
                # and resumes it with a slot, instead of this runner waiting (SPEC §15 memory).
                self.parked = snapshot
                return snapshot
            for key in () if self._draining else decided.wanted_slots:
                if key not in self._slot_waiters and key not in self._slots:
                    scope = anyio.CancelScope()
                    self._slot_waiters[key] = scope
                    tg.start_soon(self._wait_for_slot, key, scope)
            self._set_timer(tg, None if self._draining else decided.wake_at)
            if decided.finished:
                return snapshot

            self._end_startup()
            batch = [await self._receive.receive()]
            while True:
                try:
                    batch.append(self._receive.receive_nowait())
                except anyio.WouldBlock:
                    break
            reports: list[Report] = []
            for message in batch:
                if isinstance(message, AttemptOutcome | ApprovalWait):
                    outcomes.append(message)
                    self._attempts.pop(message.key, None)
                elif isinstance(message, Refresh):
                    refresh = True
                elif isinstance(message, Report):
                    self._reports.hold(message)
                    reports.append(message)
                elif isinstance(message, Drain):
                    self._start_draining()
            if reports and not refresh:
                # Reports are decided on the run as stored: as their reporter saw it, or read.
                brought = caught_up(snapshot, reports, self._clock.now())
                refresh = brought is None
                snapshot = brought or snapshot

    def _start_draining(self) -> None:
        """Start nothing more: free the slots not yet used, stop waiting for others."""
        if self._draining:
            return
        self._draining = True
        for scope in self._slot_waiters.values():
            scope.cancel()
        self._slot_waiters.clear()
        for token in self._slots.values():
            self._limiter.release_on_behalf_of(token)
        self._slots.clear()
        self._release_grant()

    def _may_park(self, decided: Plan) -> bool:
        """Whether the run only waits for slots: nothing executes, runs remotely, or is timed."""
        after = decided.after
        return (
            self._park
            and bool(decided.wanted_slots)
            and not decided.finished
            and not decided.launches
            and decided.wake_at is None
            and self._timer is None
            and not self._attempts
            and not self._slots
            and not self._slot_waiters
            and not after.live_attempts
            and not after.approvals
            and not after.run.cancel_requested
            and self._receive.statistics().current_buffer_used == 0
        )

    def _plan(
        self,
        workflow: CompiledWorkflow,
        snapshot: RunSnapshot,
        outcomes: list[Observation],
        recovering: bool,
    ) -> Plan:
        return plan(
            snapshot,
            workflow,
            now=self._clock.now(),
            outcomes=outcomes,
            slots=() if self._draining else self._slots.keys(),
            executing=self._attempts.keys(),
            recovering=recovering,
            local_actions=self._local,
            resumable_actions=self._resumable,
            executor_id=self._executor_id,
        )

    def _take_free_slots(self, keys: tuple[str, ...]) -> bool:
        """Take the concurrency slots that are free now (and nobody waits for) for ``keys``.

        Returns whether any was taken. Waiting runners keep their turn: a limiter with a
        queue gives nothing without waiting (and this runner's own waiters go on).
        """
        taken = False
        for key in keys:
            if key in self._slots or key in self._slot_waiters:
                continue
            if self._grant is not None:  # the slot the engine resumed this run with
                token, self._grant = self._grant, None
                self._slots[key] = token
                taken = True
                continue
            token = object()
            try:
                self._limiter.acquire_on_behalf_of_nowait(token)
            except anyio.WouldBlock:
                break
            self._slots[key] = token
            taken = True
        return taken

    async def _stop_attempts(self) -> None:
        attempts = list(self._attempts.values())
        self._attempts.clear()
        for local in attempts:
            local.scope.cancel()
        for local in attempts:
            await local.done.wait()

    async def _attempt(self, launch: Launch, token: object, local: _LocalAttempt) -> None:
        request = launch.request
        try:
            with (
                local.scope,
                self._telemetry.attempt(
                    request.run_id, request.task_key, request.attempt, request.action
                ) as span,
            ):
                observed = await execute(self._executor, self._clock, launch)
                if isinstance(observed, AttemptOutcome):
                    error = observed.error
                    span.finished(observed.status.value, None if error is None else error.code)
                else:  # paused on approvals: the attempt goes on once they are decided
                    span.finished(TaskStatus.WAITING_APPROVAL.value, None)
                self._send.send_nowait(observed)
        finally:
            self._limiter.release_on_behalf_of(token)
            local.done.set()

    async def _wait_for_slot(self, key: str, scope: anyio.CancelScope) -> None:
        with scope:
            token = object()
            await self._limiter.acquire_on_behalf_of(token)
            self._slots[key] = token
            self._send.send_nowait(SlotGranted(key))
        self._slot_waiters.pop(key, None)

    def _set_timer(self, tg: TaskGroup, wake_at: datetime | None) -> None:
        if wake_at == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = wake_at
        if wake_at is None:
            return
        scope = anyio.CancelScope()
        self._timer = scope
        tg.start_soon(self._wake, scope, wake_at)

    async def _wake(self, scope: anyio.CancelScope, wake_at: datetime) -> None:
        with scope:
            await self._clock.sleep_until(wake_at)
            self._timer_at = None
            if self._timer is scope:
                self._timer = None  # fired: a later plan may park the run (nothing is timed)
            self._send.send_nowait(Wake())
