"""The service's one lifecycle, in production and in tests (SPEC §7, §14, §16).

:meth:`Service.running` is an async context manager. Entering it opens the store (which checks
the schema), takes the coordinator lock when there is one (checked, and its lease renewed, from
then on: ADR 0047), starts the engine, hands it every unfinished run (the recovery scan) and
starts the background duties: the ownership sweep and the purge (idempotency records, workers
not seen for 7 days). A replica (``--replica``, SPEC §16) joins its cluster instead of taking
the lock: its :class:`~workload_api.membership.Membership` takes and recovers its share of the
shards, and the cluster's duties run while it owns shard 0. Readiness turns on; the body runs
(uvicorn in ``workload serve``, a test, a local run). Leaving it hands a replica's shards over,
interrupts execution (nothing is written as canceled) and closes the lock and the store.

A fault of any background duty or of execution is *fail-stop*: readiness turns off
(``failed``), execution is interrupted at once, :attr:`Service.fault` records the first fault
and ``on_fault`` is called so that the body can stop too (the coordinator stops HTTP and exits
5). The lifecycle never re-takes the lock. A standby (SPEC §14) that cannot reach PostgreSQL
is no fault: it executes nothing, so it turns not ready (``unavailable``), tells the store
(``on_unreachable``: requests that need PostgreSQL are refused at once, ADR 0021), keeps
retrying the lock, and is ready again (or leads) once the database answers. A fail-stop for a
system fault or a mode conflict is expected, logged as a warning; any other is a bug (an error).

Errors raised on entry::

    MigrationError      the schema is behind, ahead or edited (exit 4)
    CoordinatorBusy     another coordinator holds the lock (exit 3)
    ModeConflict        replicas and a coordinator on one database (exit 3, SPEC §16)
    SystemFault         the database or the lock cannot be reached (exit 5)
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import anyio.abc
import anyio.to_thread

from workload_api._errors import single_errors
from workload_api._outage import StandbyOutage
from workload_api.readiness import STOPPING, UNAVAILABLE, Readiness
from workload_api.retention import RunRetention
from workload_domain.errors import Fenced, ModeConflict, StoreUnavailable, SystemFault
from workload_domain.idempotency import IDEMPOTENCY_RETENTION
from workload_domain.ports import Clock, CoordinatorLock, Notifications, NotifyHandlers, Store
from workload_domain.telemetry import NO_TELEMETRY, Telemetry
from workload_domain.workers import WORKER_RETENTION
from workload_engine.approvals import ApprovalDecisions
from workload_engine.drafting import DraftWriter
from workload_engine.engine import Engine
from workload_engine.model_router import ModelRouter
from workload_engine.remote import RemoteAttempts

if TYPE_CHECKING:
    from workload_api.membership import Membership

__all__ = ["UNAVAILABLE", "CoordinatorBusy", "Readiness", "Service"]

_log = logging.getLogger("workload.coordinator")

FaultHandler = Callable[[str, BaseException], None]


class CoordinatorBusy(Exception):
    """Another coordinator holds this database's lock (only one may execute)."""


class Service:
    """Store, lock, engine and background duties, opened and closed together."""

    def __init__(
        self,
        *,
        store: Store,
        lock: CoordinatorLock | None,
        engine: Engine,
        clock: Clock,
        readiness: Readiness,
        remote: RemoteAttempts | None = None,
        decisions: ApprovalDecisions | None = None,
        drafts: DraftWriter | None = None,
        models: ModelRouter | None = None,
        notifications: Notifications | None = None,
        standby: bool = False,
        lock_check_interval: float = 1.0,
        lease_check_interval: float = 1.0,
        sweep_interval: float = 5.0,
        purge_interval: float = 3600.0,
        recovery_page_size: int = 500,
        telemetry: Telemetry = NO_TELEMETRY,
        membership: Membership | None = None,
        handoff_seconds: float = 30.0,
        on_unreachable: Callable[[str], None] | None = None,
        retention: RunRetention | None = None,
    ) -> None:
        self.store = store
        self.membership = membership
        """A replica's membership of its cluster (``--replica``, SPEC §16), or None."""
        self.lock = lock
        self.engine = engine
        self.clock = clock
        self.readiness = readiness
        self.remote = remote
        self.decisions = decisions  # expires undecided approvals (with the lease reaper)
        self.drafts = drafts  # generates drafts (and, at start-up, those left generating)
        self.retention = retention  # a duty: deletes finished runs past their retention
        self.models = models  # the model adapters: their connections close with the store's
        self.notifications = notifications
        """What the other replicas announce (SPEC §14); every PostgreSQL-backed process listens."""
        self.standby = standby
        """Serve while another process leads, and take over when it goes (``--standby``)."""
        self._telemetry = telemetry
        self.fault: BaseException | None = None
        self.recovered = 0
        self._lock_check_interval = lock_check_interval
        self._lease_check_interval = lease_check_interval
        self._sweep_interval = sweep_interval
        self._purge_interval = purge_interval
        self._page_size = recovery_page_size
        self._handoff_bound = handoff_seconds + 10.0
        self._engine_scope: anyio.CancelScope | None = None
        self._tasks: anyio.abc.TaskGroup | None = None
        self._on_fault: FaultHandler | None = None
        self._duties: anyio.CancelScope | None = None
        self._on_unreachable = on_unreachable
        """Told when a standby finds PostgreSQL unreachable: the store refuses at once."""

    @asynccontextmanager
    async def running(self, on_fault: FaultHandler | None = None) -> AsyncIterator[None]:
        """Open, lead (or stand by) and recover; yield while serving; then interrupt and close.

        A standby (SPEC §14) serves while another process leads: it listens to the other
        replicas, retries the lock every check interval, and leads once it gets it.
        """
        self._on_fault = on_fault
        self._engine_scope = anyio.CancelScope()
        await self.store.open()
        try:
            leading = False
            if self.membership is not None:
                await self.membership.join()
            else:
                leading = await self._acquire()
            try:
                async with single_errors(), anyio.create_task_group() as tg:
                    self._tasks = tg
                    if self.notifications is not None:
                        tg.start_soon(self._guarded, "the listener failed", self._listen)
                    if self.membership is not None:
                        await self._replicate(tg, self.membership)
                    elif leading:
                        await self._lead(tg)
                    else:
                        self.engine.standby = True
                        _log.info("standing by: another coordinator leads")
                        tg.start_soon(self._guarded, "the standby failed", self._stand_by)
                    if self.fault is None:
                        self.readiness.set(True, "ready")
                    try:
                        yield
                    finally:
                        self.stopping()
                        await self._hand_over()
                        self._engine_scope.cancel()
                        tg.cancel_scope.cancel()
            finally:
                with anyio.CancelScope(shield=True):
                    if self.lock is not None:
                        await self.lock.release()
                    if self.membership is not None:
                        await self.membership.leases.leave()
        finally:
            self.readiness.leading = False
            with anyio.CancelScope(shield=True):
                if self.models is not None:
                    await self.models.aclose()
                await self.store.close()
            # Spans still buffered are exported before the process goes (bounded).
            await anyio.to_thread.run_sync(self._telemetry.flush)

    async def _lead(self, tg: anyio.abc.TaskGroup) -> None:
        """Lead: fence this process's writes with its epoch, then execute.

        The lease is renewed from now on; the engine starts, every unfinished run is recovered,
        and the leader's duties start.
        """
        epoch = None if self.lock is None else self.lock.epoch
        self.store.fence(epoch, self._fenced)
        if self.lock is not None:
            tg.start_soon(self._guarded, "lost the coordinator lock", self._watch_lock)
        self.readiness.epoch = epoch
        # Seen from outside as the one member of its cluster, owning every shard (SPEC §16).
        total, _ = await self.store.cluster()
        self.readiness.name, self.readiness.since = self.engine.executor_id, self.clock.now()
        self.readiness.shards_total, self.readiness.replicas_live = total, 1
        self.engine.standby = False
        await tg.start(self._run_engine)
        self.readiness.leading = not self._ending()  # a stop during the awaits: not leading
        try:
            self.recovered = await self.engine.recover(self._page_size)
        except Exception as exc:
            self.fail("the recovery scan failed", exc)
        await self._start_duties(tg)
        tg.start_soon(self._guarded, "the ownership sweep failed", self._sweep)

    async def _start_duties(self, tg: anyio.abc.TaskGroup) -> None:
        """The cluster's duties (one process at a time): drafts, the reaper, purges, retention."""
        if self.drafts is not None:
            await tg.start(self.drafts.run)
            try:
                await self.drafts.recover()
            except Exception as exc:
                self.fail("the recovery of drafts failed", exc)
        if self.remote is not None or self.decisions is not None:
            tg.start_soon(self._guarded, "the lease reaper failed", self._reap)
        tg.start_soon(self._guarded, "the idempotency purge failed", self._purge)
        if self.retention is not None:
            tg.start_soon(self._guarded, "the run retention failed", self.retention.run)

    async def _replicate(self, tg: anyio.abc.TaskGroup, membership: Membership) -> None:
        """Execute as a replica (SPEC §16): the runs of the shards this replica holds.

        Each write of a shard's runs is fenced by the shard's epoch (the runner's); a refused
        one is a fail-stop, as a failed renewal of the leases is. The first round of the
        membership takes this replica's first share of the free shards and recovers them.
        """
        self.store.fence(None, self._fenced)
        self.engine.standby = False
        membership.on_duties = self._duties_changed
        await tg.start(self._run_engine)
        tg.start_soon(self._guarded, "lost its shards", membership.run)
        tg.start_soon(self._guarded, "the ownership sweep failed", self._sweep)
        with anyio.move_on_after(max(30.0, 2 * self._lock_check_interval)):
            await membership.first_round.wait()

    def _duties_changed(self, owned: bool) -> None:
        """This replica took shard 0 (it runs the cluster's duties), or gave it up."""
        if self._duties is not None:
            self._duties.cancel()
            self._duties = None
        if owned and self._tasks is not None and self.fault is None:
            scope = self._duties = anyio.CancelScope()
            self._tasks.start_soon(self._run_duties, scope)
        _log.info("cluster duties %s", "started" if owned else "stopped")

    async def _run_duties(self, scope: anyio.CancelScope) -> None:
        with scope:
            async with anyio.create_task_group() as duties:
                await self._start_duties(duties)

    async def _hand_over(self) -> None:
        """A replica stopping hands its shards over first (bounded by the hand-off grace)."""
        if self.membership is None or self.fault is not None:
            return
        self.membership.stop()
        with anyio.CancelScope(shield=True), anyio.move_on_after(self._handoff_bound):
            await self.membership.left.wait()

    async def _stand_by(self) -> None:
        """Try the lock every check interval; lead once it is ours (SPEC §14).

        A standby that cannot reach PostgreSQL is not a fault: nothing of it executes, so it
        answers not ready (``unavailable``) and keeps trying; once the database answers again it
        is ready again, and leads if the lock is free. Only a leader fail-stops on losing it.
        """
        assert self.lock is not None  # only a coordinator with a lock stands by
        outage = StandbyOutage()
        while True:
            await anyio.sleep(self._lock_check_interval)
            if self._ending():
                return  # a standby on its way out does not take over (another one may)
            try:
                if outage.since is not None:
                    # The pool reconnects on its own schedule (with backoff): ready again, and
                    # leading, only once the store answers too (a recovery on a pool without
                    # connections would fail-stop the new leader).
                    await self.store.page_workflows(None, 1)
                taken = await self.lock.acquire()
            except StoreUnavailable as exc:
                outage.failed(exc)
                if self.readiness.ready:  # never over "stopping" or "failed"
                    self.readiness.set(False, UNAVAILABLE)
                if self._on_unreachable is not None:
                    # Requests that need PostgreSQL are refused at once from now on, instead of
                    # waiting out the pool's timeout, until the store reaches it again.
                    self._on_unreachable(str(exc))
                continue
            if outage.ended() and self.readiness.reason == UNAVAILABLE:
                self.readiness.set(True, "ready")
            if taken and self._ending():
                await self.lock.release()  # it stopped while the lock was taken: give it back
                return
            if taken:
                _log.info("took over: leading", extra={"fields": {"epoch": self.lock.epoch}})
                assert self._tasks is not None
                await self._lead(self._tasks)
                return

    def _ending(self) -> bool:
        """The service stops (a signal) or has failed: nothing new is to start."""
        return self.fault is not None or self.readiness.reason == STOPPING

    def _fenced(self, error: Fenced) -> None:
        """A write was refused: a newer coordinator leads, or a replica took a shard (exit 5)."""
        self.fail(
            "a newer coordinator leads" if error.shard is None else "another replica owns a shard",
            error,
        )

    async def _listen(self) -> None:
        """Hear the other replicas: runs to execute, work to claim, tool calls ended."""
        assert self.notifications is not None
        engine = self.engine

        def run(run_id: str) -> None:
            if engine.running:
                engine.submit(run_id)  # created elsewhere (no-op when this engine has it)
                engine.notify(run_id)  # changed elsewhere: its runner reads it again
            engine.changes.notify(run_id)

        def step(run_id: str, task_key: str, attempt: int) -> None:
            engine.step_signal.notify((run_id, task_key, attempt))

        handlers = NotifyHandlers(run, engine.work_signal.notify, step, engine.look_again)
        await self.notifications.run(handlers)

    def stopping(self) -> None:
        """The service is about to stop: not ready; waiting claims answer, streams end, now.

        A replica starts handing its shards over at once (SPEC §16), while HTTP drains.
        """
        if self.fault is None:
            self.readiness.set(False, STOPPING)
            if self.membership is not None:
                self.membership.stop()
        self.readiness.leading = False
        self.engine.work_signal.close()
        self.engine.changes.close()

    def fail(self, reason: str, error: BaseException) -> None:
        """Fail-stop: not ready, execution interrupted, the body told (first fault kept)."""
        if self.fault is None:
            self.fault = error
            # The database or the lock gone, a newer leader: what fail-stop is for, not a bug.
            level = (
                logging.WARNING if isinstance(error, SystemFault | ModeConflict) else logging.ERROR
            )
            _log.log(level, "fail-stop: %s: %s", reason, error)
        # SPEC §7's order: not ready, stop local execution (interruption), then the body (HTTP).
        self.readiness.set(False, "failed")
        self.readiness.leading = False
        self.engine.work_signal.close()
        self.engine.changes.close()
        if self._engine_scope is not None:
            self._engine_scope.cancel()
        if self._tasks is not None and self.fault is error:
            # Requests waiting for a connection fail now (503) instead of waiting out the
            # pool's timeout on a database that is known gone.
            self._tasks.start_soon(self._close_store)
        if self._on_fault is not None:
            self._on_fault(reason, error)

    async def _close_store(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.store.close()

    async def _acquire(self) -> bool:
        """Take the lock: True to lead, False to stand by (else ``CoordinatorBusy``)."""
        if self.lock is None or await self.lock.acquire():
            return True
        if self.standby:
            return False
        raise CoordinatorBusy("another coordinator holds the lock of this database")

    async def _run_engine(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        assert self._engine_scope is not None  # made when the lifecycle is entered
        with self._engine_scope:
            try:
                await self.engine.run(task_status=task_status)
            except Exception as exc:
                self.fail("execution failed", exc)

    async def _guarded(self, reason: str, duty: Callable[[], Awaitable[None]]) -> None:
        try:
            await duty()
        except Exception as exc:  # any fault of a background duty stops the process
            self.fail(reason, exc)

    async def _watch_lock(self) -> None:
        """Check and renew every interval from the last check's *start* (a lease counts from it)."""
        assert self.lock is not None
        started = anyio.current_time()
        while True:
            await anyio.sleep(max(0.0, started + self._lock_check_interval - anyio.current_time()))
            started = anyio.current_time()
            await self.lock.check()

    async def _sweep(self) -> None:
        """Hand the engine every unfinished run it does not own (the safety net of §14).

        A committed run reaches execution through its creating request, a replay of it, or
        the recovery scan; this catches whatever none of them handed over (a lost answer, a
        run created by another process). Bounded: ids only, page by page, from an index.
        """
        while True:
            await anyio.sleep(self._sweep_interval)
            if not self.engine.running:
                continue
            found = await self.engine.adopt_unowned(self._page_size)
            if found:
                _log.info("adopted unowned runs", extra={"fields": {"runs": found}})
            if self.drafts is not None and (self.membership is None or self._duties is not None):
                # A draft created through a standby is generated here (SPEC §14), or through
                # another replica, by the owner of shard 0 (§16).
                await self.drafts.recover()

    async def _reap(self) -> None:
        """Apply passed deadlines (the leader's duty).

        Leases and deadlines of remote attempts and tool calls (§10), approvals nobody decided
        in time (§11).
        """
        while True:
            await anyio.sleep(self._lease_check_interval)
            if not self.engine.running:
                continue
            if self.remote is not None:
                expired = await self.remote.expire_due()
                if expired:
                    _log.info("expired remote attempts", extra={"fields": {"attempts": expired}})
            if self.decisions is not None:
                lapsed = await self.decisions.expire_due()
                if lapsed:
                    _log.info("expired approvals", extra={"fields": {"approvals": lapsed}})

    async def _purge(self) -> None:
        """Forget idempotency records and workers past their retention (ADR 0023), hourly."""
        while True:
            purged = await self.store.purge_outcomes(self.clock.now() - IDEMPOTENCY_RETENTION)
            if purged:
                _log.info("purged idempotency records", extra={"fields": {"purged": purged}})
            forgotten = await self.store.forget_workers(self.clock.now() - WORKER_RETENTION)
            if forgotten:
                _log.info("forgot workers", extra={"fields": {"workers": forgotten}})
            await anyio.sleep(self._purge_interval)
