"""The engine: supervises the runners of every run this process executes.

:class:`Engine` is started inside a task group (the coordinator's, or a test's). Runs are handed
to it with :meth:`Engine.submit` only after their creating transaction committed; at start-up
:meth:`Engine.recover` hands it every non-terminal run. The first system fault of any runner
propagates out of :meth:`Engine.run`, interrupting every other runner: fail-stop.

A run the engine owns is in one of three places (ADR 0017): *queued* to start (its id, and the
first 64 their snapshot: at most ``startup_concurrency`` runners that read their run start at
once, however long the backlog, and up to 64 with a snapshot), *running*
(a :class:`RunRunner` drives it), or *parked* (its runner found nothing to do but wait for an
attempt slot and stopped; the id waits in a FIFO and the engine resumes the run with a slot
granted when one frees). A queued or parked run holds no task, snapshot or channel.

In a replica (SPEC §16) the engine has a :class:`~workload_engine.ownership.ShardOwnership`: it
executes only the runs of the shards it holds, recovers a shard when the replica takes it
(:meth:`Engine.recover` with ``shards``) and hands one over (:meth:`Engine.hand_off`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, NamedTuple

import anyio
from anyio.abc import TaskGroup, TaskStatus

from workload_domain.errors import ExecutionStopped
from workload_domain.ports import Clock, ExecutionStore, Executor
from workload_domain.records import RunCommit, RunSnapshot
from workload_domain.statuses import AttemptStatus
from workload_domain.telemetry import NO_TELEMETRY, Telemetry
from workload_engine._groups import first_error
from workload_engine.definitions import DefinitionCache
from workload_engine.ownership import ShardOwnership
from workload_engine.reports import Report
from workload_engine.runner import RunRunner
from workload_engine.signals import RunChanges, StepSignal, WorkSignal

__all__ = ["DEFAULT_MAX_CONCURRENT_ATTEMPTS", "DEFAULT_STARTUP_CONCURRENCY", "Backlog", "Engine"]

DEFAULT_MAX_CONCURRENT_ATTEMPTS = 64
DEFAULT_STARTUP_CONCURRENCY = 8
"""How many runners that read their run may be starting (first load, commit, launches) at once."""
_PARKED_SNAPSHOTS = 64
"""Queued or parked runs beyond this many keep only their id (their runner reads them)."""
_STARTING_WITH_SNAPSHOTS = 64
"""How many runners may be starting at once when the run comes with its snapshot (created
here): such a runner reads nothing, so more of them start together, and their first commits
group (ADR 0017)."""


class Backlog(NamedTuple):
    """Where the runs an engine owns are (for introspection and tests)."""

    running: int
    """Runs a runner drives (each holds a task)."""
    queued: int
    """Runs waiting to start: an id each."""
    parked: int
    """Runs waiting for an attempt slot without a runner: an id each."""


class Engine:
    """Executes runs through the ports with the semantics of SPEC §4."""

    def __init__(
        self,
        store: ExecutionStore,
        executor: Executor,
        clock: Clock,
        *,
        max_concurrent_attempts: int = DEFAULT_MAX_CONCURRENT_ATTEMPTS,
        definitions: DefinitionCache | None = None,
        startup_concurrency: int = DEFAULT_STARTUP_CONCURRENCY,
        work_signal: WorkSignal | None = None,
        step_signal: StepSignal | None = None,
        resumable_actions: frozenset[str] = frozenset(),
        telemetry: Telemetry = NO_TELEMETRY,
        executor_id: str | None = None,
    ) -> None:
        if max_concurrent_attempts < 1:
            raise ValueError("max_concurrent_attempts must be at least 1")
        self.store = store
        self.executor = executor
        self.clock = clock
        self.definitions = definitions or DefinitionCache(store)
        self.local_actions: frozenset[str] = executor.actions
        """The actions executed in this process; every other one is remote (SPEC §10)."""
        self.resumable_actions = resumable_actions & self.local_actions
        """Local actions whose attempts are resumed after a restart, not interrupted (§11)."""
        self.work_signal = work_signal or WorkSignal()
        """Notified whenever a commit queues remote attempts (waiting claims wake up)."""
        self.step_signal = step_signal or StepSignal()
        """Notified whenever an agent's remote tool call ends (its loop wakes up)."""
        self.telemetry = telemetry
        """Told of every commit, run and local attempt (metrics and spans, SPEC §12)."""
        self.standby = False
        """Another process leads (SPEC §14): runs submitted here are left to it."""
        self.executor_id = executor_id
        """This process's ``replica_id``: the ``executed_by`` of the attempts it runs (§6)."""
        self.ownership: ShardOwnership | None = None
        """A replica's shards (SPEC §16): only their runs are executed here. None: every run."""
        self.changes = RunChanges()
        """Notified whenever a commit to a run succeeded (its event streams read on)."""
        self.limiter = anyio.CapacityLimiter(max_concurrent_attempts)
        self.startup = anyio.CapacityLimiter(startup_concurrency)
        self._startup_concurrency = startup_concurrency
        self._runners: dict[str, RunRunner] = {}
        self._queued: dict[str, RunSnapshot | None] = {}
        """Runs to start, in order, once fewer runners are starting than their kind may."""
        self._starting = 0
        self._recovering = False
        """Recovery is listing the runs: they are queued, and start once it has returned."""
        self._parked: dict[str, RunSnapshot | None] = {}
        """Runs waiting for an attempt slot, in order (the first gets the next free one)."""
        self._parked_changed = anyio.Event()
        self._group: TaskGroup | None = None
        self._finished: dict[str, anyio.Event] = {}

    @property
    def active_runs(self) -> int:
        """How many runs this engine owns now (running, queued to start, or parked)."""
        return len(self._runners) + len(self._queued) + len(self._parked)

    @property
    def backlog(self) -> Backlog:
        """How many owned runs are running, queued to start, and parked."""
        return Backlog(len(self._runners), len(self._queued), len(self._parked))

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Supervise runners until cancelled; re-raises the first system fault of any runner."""
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                group.start_soon(self._dispatch, name="slots for parked runs")
                task_status.started()
                await anyio.sleep_forever()
        except BaseExceptionGroup as errors:
            raise first_error(errors) from errors
        finally:
            self._group = None
            # Queued and parked runs are interrupted too: nothing was running for them.
            for run_id in [*self._queued, *self._parked]:
                event = self._finished.pop(run_id, None)
                if event is not None:
                    event.set()
            self._queued.clear()
            self._parked.clear()
            self._starting = 0

    @property
    def running(self) -> bool:
        """Whether runs can be submitted (``run`` is active and not stopping)."""
        return self._group is not None and not self._group.cancel_scope.cancel_called

    def owns(self, run_id: str) -> bool:
        """Whether this engine is executing ``run_id`` now (running, queued or parked)."""
        return run_id in self._runners or run_id in self._queued or run_id in self._parked

    def submit(self, run_id: str, snapshot: RunSnapshot | None = None) -> None:
        """Start executing a committed run (no-op if this engine already executes it).

        ``snapshot``: the run as its creating commit left it, when the caller has it (the
        runner then starts without reading it back; a stale one only costs a conflict). Such a
        run starts while fewer than ``_STARTING_WITH_SNAPSHOTS`` runners are starting, a run
        without one while fewer than ``startup_concurrency`` are.
        A standby's engine does not run: it leaves the run to the leader (no-op).

        Raises:
            ExecutionStopped: the engine is not running (not started, stopping, or failed).
        """
        if self._group is None or self._group.cancel_scope.cancel_called:
            if self.standby:
                return  # the leader executes it: it hears of the run (SPEC §14)
            raise ExecutionStopped("this process is not executing runs now")
        if self.owns(run_id) or not self._accepts(run_id):
            return  # executed here already, or by the replica holding its shard (SPEC §16)
        if not self._recovering and not self._queued and self._may_start(snapshot):
            self._admit(run_id, snapshot)
        else:
            # A backlog: the id waits its turn (past a few, the runner that starts it reads it).
            self._queued[run_id] = snapshot if len(self._queued) < _PARKED_SNAPSHOTS else None

    def _accepts(self, run_id: str) -> bool:
        """Whether this engine executes ``run_id`` (every run, outside a replica)."""
        return self.ownership is None or self.ownership.accepts(run_id)

    def hand_report(self, run_id: str, report: Report) -> bool:
        """Hand a remote attempt's report to the run's runner, if it runs here and takes it.

        The runner commits it in its own commit (SPEC §16); False: commit it otherwise.
        """
        runner = self._runners.get(run_id)
        return runner is not None and runner.report(report)

    def _admit(self, run_id: str, snapshot: RunSnapshot | None) -> None:
        self._starting += 1
        self._start(run_id, snapshot, on_started=self._admitted_started)

    def _admitted_started(self) -> None:
        self._starting -= 1
        self._admit_queued()

    def _may_start(self, snapshot: RunSnapshot | None) -> bool:
        """Whether one more runner may start now: a runner that reads its run waits longer."""
        limit = self._startup_concurrency
        if snapshot is not None:
            limit = max(limit, _STARTING_WITH_SNAPSHOTS)
        return self._starting < limit

    def _admit_queued(self) -> None:
        while self._queued and self.running:
            run_id = next(iter(self._queued))
            if not self._may_start(self._queued[run_id]):
                return
            snapshot = self._queued.pop(run_id)
            self._admit(run_id, snapshot)

    def _start(
        self,
        run_id: str,
        snapshot: RunSnapshot | None = None,
        *,
        slot: object | None = None,
        resumed: bool = False,
        on_started: Callable[[], None] | None = None,
    ) -> RunRunner:
        assert self._group is not None
        runner = self._new_runner(
            run_id, snapshot, park=True, slot=slot, resumed=resumed, on_started=on_started
        )
        self._runners[run_id] = runner
        self._group.start_soon(self._supervise, runner, name=f"run {run_id}")
        return runner

    async def _dispatch(self) -> None:
        """Give each free attempt slot to the first parked run, in order (FIFO fairness)."""
        while True:
            while not self._parked:
                self._parked_changed = anyio.Event()
                await self._parked_changed.wait()
            token = object()
            await self.limiter.acquire_on_behalf_of(token)
            if not self._parked:  # resumed meanwhile (a cancel request): give it back
                self.limiter.release_on_behalf_of(token)
                continue
            run_id = next(iter(self._parked))
            snapshot = self._parked.pop(run_id)
            if not self._accepts(run_id):  # its shard was handed over meanwhile
                self.limiter.release_on_behalf_of(token)
                self._forget(run_id)
                continue
            self._start(run_id, snapshot, slot=token, resumed=True)

    def committed(self, commit: RunCommit) -> None:
        """A commit of any writer succeeded: wake the run's followers, and claims if it queued.

        Every commit passes here exactly once — the runners', remote attempts' settles and the
        cancel use case's — so the telemetry counts runs and attempts from their events.
        """
        self.changes.notify(commit.run.run_id)
        queued = [(a.queue, a.action) for a in commit.attempts if a.status is AttemptStatus.QUEUED]
        if queued:
            self.work_signal.notify(queued)  # only the claims that could take it look again
        self.telemetry.committed(commit)

    def notify(self, run_id: str) -> None:
        """Tell the runner of ``run_id`` (if any), and its followers, that the run changed."""
        self.changes.notify(run_id)
        runner = self._runners.get(run_id)
        if runner is not None:
            runner.notify()
        elif run_id in self._parked and self.running:
            # Changed by someone else (a cancel request): its runner reads it again now.
            self._parked.pop(run_id)
            self._start(run_id, resumed=True)

    def look_again(self) -> None:
        """Announcements may have been missed (nobody listened): every waiter looks again.

        Each runner reads its run anew — a report settled, a cancel requested or an approval
        decided through another process while the listener reconnected — and every waiting
        claim looks for work. A run created meanwhile is the sweep's (``adopt_unowned``).
        """
        for runner in list(self._runners.values()):
            runner.notify()
        self.work_signal.notify(None)

    async def recover(self, page_size: int = 500, shards: Sequence[int] | None = None) -> int:
        """Hand every non-terminal run to the engine, reading them page by page.

        First the runs whose local attempts a stopped coordinator left ``running`` (remote
        attempts keep their leases across a restart): their runners' first commits mark those
        attempts ``interrupted`` (with events, at a new revision) — or record that they are
        resumed, for resumable actions — and
        this waits for those commits, so no attempt reads as running once recovery returned.
        They are few (at most what was executing), however long the backlog. Then every other
        non-terminal run, without waiting: each is queued as its id, and their runners start
        (``startup_concurrency`` at a time) once every run is handed over. Returns how many
        runs were handed over.

        ``shards``: only the runs of these shards (a replica that took them, SPEC §16).
        """
        leftovers = list(await self.store.runs_with_running_attempts(self.local_actions, shards))
        for run_id in leftovers:
            if not self._accepts(run_id):
                continue
            if self.running and run_id in self._queued:
                # Queued already (a replica announced it before recovery): not left waiting.
                self._start(run_id, self._queued.pop(run_id))
            elif self.running and not self.owns(run_id):
                self._start(run_id)  # not queued: recovery waits for their first commits
            elif not self.running:
                self.submit(run_id)  # raises ExecutionStopped (or leaves it to the leader)
        for run_id in leftovers:
            runner = self._runners.get(run_id)
            if runner is not None:
                await runner.started.wait()
        handed = 0
        # Only ids until every run is handed over: the runners start once this returned, 8 at a
        # time, instead of sharing the loop with the listing (ADR 0017).
        self._recovering = True
        try:
            async for page in self._unfinished(page_size, shards):
                for run_id in page:
                    self.submit(run_id)
                handed += len(page)
        finally:
            self._recovering = False
            self._admit_queued()
        return handed

    async def adopt_unowned(self, page_size: int = 500) -> int:
        """Submit every non-terminal run this engine does not execute; return how many.

        The safety net behind every path that hands a committed run over: a run whose
        creating request lost its answer, or one created by another process, is executed
        within one sweep interval.
        """
        adopted = 0
        shards = None if self.ownership is None else self.ownership.serving
        if shards == ():
            return 0
        async for page in self._unfinished(page_size, shards):
            for run_id in page:
                if not self.owns(run_id) and self.running and self._accepts(run_id):
                    self.submit(run_id)
                    adopted += 1
        return adopted

    async def hand_off(self, shard: int, grace: float) -> int:
        """Stop executing the runs of ``shard`` (handed over to another replica, SPEC §16).

        Nothing more starts in the shard; its runners commit what their attempts report and
        return once none executes; past ``grace`` seconds the rest are interrupted (nothing is
        written, as by a restart). Returns how many runs were interrupted.
        """
        ownership = self.ownership
        assert ownership is not None, "only a replica hands shards over"
        ownership.leave(shard)
        for waiting in (self._queued, self._parked):
            for run_id in [r for r in waiting if ownership.shard_of(r) == shard]:
                del waiting[run_id]
                self._forget(run_id)
        runners = [r for r in self._runners.values() if ownership.shard_of(r.run_id) == shard]
        for runner in runners:
            runner.drain()
        with anyio.move_on_after(grace):
            for runner in runners:
                await self.wait_finished(runner.run_id)
        left = [r for r in runners if r.run_id in self._runners]
        for runner in left:
            runner.scope.cancel()
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            for runner in left:
                await self.wait_finished(runner.run_id)
        return len(left)

    def _forget(self, run_id: str) -> None:
        """``run_id`` is no longer executed here: whoever waits for its end stops waiting."""
        event = self._finished.pop(run_id, None)
        if event is not None:
            event.set()

    async def _unfinished(
        self, page_size: int, shards: Sequence[int] | None = None
    ) -> AsyncIterator[Sequence[str]]:
        after: str | None = None
        while True:
            page = await self.store.list_unfinished_runs(after, page_size, shards)
            if page:
                yield page
            if len(page) < page_size:
                return
            after = page[-1]

    async def wait_finished(self, run_id: str) -> None:
        """Wait until the runner of ``run_id`` (submitted to this engine) has finished."""
        if not self.owns(run_id):
            return
        await self._finished.setdefault(run_id, anyio.Event()).wait()

    async def execute(self, run_id: str) -> RunSnapshot:
        """Execute one run in the caller's task until it is terminal (local mode, tests)."""
        return await self._new_runner(run_id).run()

    def _new_runner(
        self,
        run_id: str,
        snapshot: RunSnapshot | None = None,
        *,
        park: bool = False,
        slot: object | None = None,
        resumed: bool = False,
        on_started: Callable[[], None] | None = None,
    ) -> RunRunner:
        return RunRunner(
            run_id,
            self,
            snapshot=snapshot,
            park=park,
            slot=slot,
            resumed=resumed,
            on_started=on_started,
            fence=None if self.ownership is None else self.ownership.fence_for(run_id),
        )

    def _park(self, run_id: str, snapshot: RunSnapshot) -> None:
        self._parked[run_id] = snapshot if len(self._parked) < _PARKED_SNAPSHOTS else None
        self._parked_changed.set()

    async def _supervise(self, runner: RunRunner, **_: Any) -> None:
        parked: RunSnapshot | None = None
        try:
            with runner.scope:  # cancelled alone: its shard was handed over past the grace
                await runner.run()
            accepted = self.running and self._accepts(runner.run_id)
            parked = runner.parked if accepted else None
        finally:
            self._runners.pop(runner.run_id, None)
            if parked is not None and runner.stale:
                # Changed (a cancel request) while it was parking: read it again now.
                self._start(runner.run_id, resumed=True)
            elif parked is not None:
                self._park(runner.run_id, parked)
            else:
                event = self._finished.pop(runner.run_id, None)
                if event is not None:
                    event.set()
