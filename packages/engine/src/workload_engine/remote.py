"""Outcomes of remote attempts (SPEC §10): workers' reports, and the deadlines the leader keeps.

A remote attempt ends by a commit like any other — revision-checked, planned by
:func:`~workload_engine.planner.plan` — made by whoever learns the outcome: the process that
receives a worker's ``complete`` or ``fail``, or the leader's lease reaper when a lease, a
start-to-close or a schedule-to-start time has passed. :meth:`RemoteAttempts.settle` re-reads the
run and decides again after a revision conflict, so a late fact can never overwrite a newer
one; then the run's runner (if this process has one) is told, so that it starts what became
ready and sees the run end.

Settles of one run take turns within the process (:class:`RunLocks`, shared by reports, the
reaper and agents' remote tool calls), and whoever has the turn commits every report waiting
for it then, in one commit: a hundred workers finishing the parallel tasks of one run at once
would otherwise each commit from the same revision, all but one conflict, and every retry
re-read the whole run — quadratic work, reports answered after their leases ran out. In turn,
a settle conflicts only with the run's runner or another replica (§14), which a retry absorbs;
should every try conflict, :class:`~workload_domain.errors.RunBusy` (503 ``unavailable`` with
``Retry-After``, which a worker retries) — never a revision conflict, which a worker's report
must not get.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import anyio

from workload_domain.agent.journal import StepRecord, StepStatus
from workload_domain.agent.loop import tool_error
from workload_domain.errors import RevisionConflict, RunBusy
from workload_domain.evolve import evolve
from workload_domain.leases import LeasedAttempt, LeaseLostReason
from workload_domain.ports import ExecutionStore, JournalStore, WorkerStore
from workload_domain.records import AttemptRecord
from workload_domain.statuses import AttemptStatus
from workload_engine.engine import Engine
from workload_engine.planner import (
    LEASE_EXPIRED_ERROR,
    SCHEDULE_TO_START_ERROR,
    TIMED_OUT_ERROR,
    AttemptOutcome,
    Plan,
    plan,
)
from workload_engine.reports import Decide, Report, Settled

__all__ = [
    "Decide",
    "RemoteAttempts",
    "RemoteStore",
    "RunLocks",
    "Settled",
    "deadline_outcome",
    "tool_call_deadline",
]

_MAX_TRIES = 50


class RemoteStore(ExecutionStore, WorkerStore, JournalStore, Protocol):
    """What settling remote attempts (and agents' remote tool calls) needs from the store."""


@dataclass(slots=True)
class _Turns:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    users: int = 0
    pending: list[Report] = field(default_factory=list)


class RunLocks:
    """One lock per run, for as long as someone holds or waits for it (then it is dropped).

    The waiters of a run are served first come, first served; runs do not wait for each other.
    Settles also leave their reports in the run's entry, for whoever has the turn to commit.
    """

    def __init__(self) -> None:
        self._turns: dict[str, _Turns] = {}

    def __len__(self) -> int:
        """How many runs have a holder or a waiter now."""
        return len(self._turns)

    @asynccontextmanager
    async def hold(self, run_id: str) -> AsyncIterator[None]:
        """Hold ``run_id``'s lock for the ``async with`` body (waiting for its turn first)."""
        with self._joined(run_id) as turns:
            async with turns.lock:
                yield

    @contextmanager
    def _joined(self, run_id: str) -> Iterator[_Turns]:
        """The run's entry, kept while the ``with`` body runs (a holder or a waiter)."""
        turns = self._turns.get(run_id)
        if turns is None:
            turns = self._turns[run_id] = _Turns()
        turns.users += 1
        try:
            yield turns
        finally:
            turns.users -= 1
            if turns.users == 0:
                del self._turns[run_id]


def deadline_outcome(attempt: AttemptRecord, now: datetime) -> AttemptOutcome | None:
    """The outcome a passed deadline gives a live remote attempt (None: none has passed).

    A queued attempt past its schedule-to-start deadline fails (not retryable); a running one
    past its start-to-close deadline times out; one whose lease ran out is interrupted with
    ``lease_expired`` (retryable, SPEC §10).
    """
    key = (attempt.task_key, attempt.attempt)
    if attempt.status is AttemptStatus.QUEUED:
        if attempt.schedule_deadline is not None and attempt.schedule_deadline <= now:
            return AttemptOutcome(*key, AttemptStatus.FAILED, now, error=SCHEDULE_TO_START_ERROR)
        return None
    if attempt.status is not AttemptStatus.RUNNING:
        return None
    if attempt.timeout_at is not None and attempt.timeout_at <= now:
        return AttemptOutcome(*key, AttemptStatus.TIMED_OUT, now, error=TIMED_OUT_ERROR)
    if attempt.lease_expires_at is not None and attempt.lease_expires_at <= now:
        return AttemptOutcome(*key, AttemptStatus.INTERRUPTED, now, error=LEASE_EXPIRED_ERROR)
    return None


class RemoteAttempts:
    """Commits the outcomes of remote attempts, and expires those whose deadlines passed."""

    def __init__(self, store: RemoteStore, engine: Engine) -> None:
        self._store = store
        self._engine = engine
        self._definitions = engine.definitions
        self._clock = engine.clock
        self._local = engine.local_actions
        self.locks = RunLocks()

    async def settle(
        self,
        run_id: str,
        task_key: str,
        attempt: int,
        decide: Decide,
        seen: LeasedAttempt | None = None,
    ) -> Settled | None:
        """Commit what ``decide`` makes of the live attempt; None if it decided nothing.

        When this process executes the run, its runner commits the report in its own commit
        (with whatever that makes ready: one write, SPEC §16), from the run as it knows it
        brought up to date by ``seen`` (the attempt and its run's position, as the caller just
        read them) when nothing else changed. Otherwise settles of one run
        take turns (see the module's docstring): whoever has the turn commits every report that
        waits for it then, in one commit, each decided on the run as that commit finds it.

        Raises:
            RunNotFound: no such run.
            RunBusy: every try met a newer revision (nothing written; try again shortly).
            Whatever ``decide`` raises to refuse (nothing is written then).
        """
        handed = Report((task_key, attempt), decide, seen)
        if self._engine.hand_report(run_id, handed):
            await handed.answered.wait()
            if not handed.declined:
                if handed.error is not None:
                    raise handed.error
                return handed.settled
        report = Report((task_key, attempt), decide)
        with self.locks._joined(run_id) as turns:
            turns.pending.append(report)
            try:
                async with turns.lock:
                    # Whoever holds the turn settles every report waiting then (its own too).
                    while not report.done:
                        await self._settle_pending(run_id, turns)
            finally:
                if report in turns.pending:  # given up before its turn (cancelled)
                    turns.pending.remove(report)
        if report.error is not None:
            raise report.error
        return report.settled

    async def _settle_pending(self, run_id: str, turns: _Turns) -> None:
        """Settle the reports waiting on ``run_id`` in one commit (one per attempt at a time)."""
        batch: list[Report] = []
        keys: set[tuple[str, int]] = set()
        for report in turns.pending:
            if report.key not in keys:  # a concurrent duplicate waits for the next commit
                keys.add(report.key)
                batch.append(report)
        for report in batch:
            turns.pending.remove(report)
        try:
            await self._settle_batch(run_id, batch)
        except Exception as exc:  # the store failed, or no such run: every report hears it
            for report in batch:
                report.answer(error=exc)
        finally:
            # Cancelled mid-way (its client left): the rest are settled by whoever is next.
            turns.pending[:0] = [r for r in batch if not r.done]

    async def _settle_batch(self, run_id: str, batch: list[Report]) -> None:
        for _ in range(_MAX_TRIES):
            snapshot = await self._store.load_run(run_id)
            live = {(a.task_key, a.attempt): a for a in snapshot.live_attempts}
            now = self._clock.now()
            answers: list[tuple[Report, Exception | None]] = []  # decided nothing, or refused
            outcomes: list[AttemptOutcome] = []
            deciding: list[Report] = []
            for report in batch:
                current = live.get(report.key)
                try:
                    outcome = None if current is None else report.decide(current, now)
                except Exception as exc:  # decide refuses (LeaseLost): to that report only
                    answers.append((report, exc))
                    continue
                if outcome is None:
                    answers.append((report, None))
                else:
                    outcomes.append(outcome)
                    deciding.append(report)
            committed = None
            if outcomes:
                workflow = await self._definitions.get(
                    snapshot.run.workflow_id, snapshot.run.version
                )
                decided = plan(
                    snapshot, workflow, now=now, outcomes=outcomes, local_actions=self._local
                )
                committed = decided.commit
                if committed is not None:  # an ended attempt is always a change
                    # The run's runner, in another process, hears of it when it has something
                    # to do (SPEC §14, §16); else its next commit meets the newer revision.
                    announced = evolve(committed, announce=owner_must_act(decided))
                    # Shielded: a holder whose client leaves mid-commit still tells the runner
                    # and the telemetry of a commit that landed (its echo is not heard here).
                    with anyio.CancelScope(shield=True):
                        try:
                            await self._store.commit(announced)
                        except RevisionConflict:
                            landed = False
                        else:
                            landed = True
                            # The run's runner (if this process has one) starts what became
                            # ready, or ends.
                            self._engine.notify(run_id)
                            self._engine.committed(committed)
                    if not landed:
                        continue  # decide every report again, on the newer revision
            # Answered only as of a revision that held: a stale read decides nothing.
            for report, error in answers:
                report.answer(error=error)
            if committed is None:
                for report in deciding:  # pragma: no cover - see above
                    report.answer()
                return
            ended = {(a.task_key, a.attempt): a for a in committed.attempts}
            for report in deciding:
                report.answer(Settled(decided.after, ended[report.key]))
            return
        raise RunBusy(run_id)

    async def expire_due(self, limit: int = 200) -> int:
        """Apply every passed lease, start-to-close and schedule-to-start deadline; how many.

        Of task attempts, and of agents' remote tool calls (whose end the agent's loop hears:
        the model is told the call failed, and why).
        """
        expired = 0
        for run_id, task_key, attempt in await self._store.due_attempts(self._clock.now(), limit):
            try:
                settled = await self.settle(run_id, task_key, attempt, deadline_outcome)
            except RunBusy:
                continue  # still due: the next pass tries again
            if settled is not None:
                expired += 1
        now = self._clock.now()
        for step in await self._store.due_tool_calls(now, limit):
            ended = tool_call_deadline(step, now)
            if ended is not None and await self.finish_tool_call(ended, deadline_passed=True):
                expired += 1
        return expired

    async def finish_tool_call(
        self, ended: StepRecord, *, token_digest: str | None = None, deadline_passed: bool = False
    ) -> StepRecord | None:
        """End a remote tool call's step (fenced as the store says) and wake its agent loop.

        The end is counted (and its span ended) here, by the one writer whose end was stored:
        a repeated report or a lost race writes nothing and counts nothing (SPEC §12).
        Not revision-checked (the store fences it by the lease and serializes it on the run's
        row), it takes its turn with the run's settles all the same, so that many reports on
        one run wait here rather than each holding a database connection while they queue.
        """
        async with self.locks.hold(ended.run_id):
            done = await self._store.finish_step(
                ended, token_digest=token_digest, deadline_passed=deadline_passed
            )
        if done is not None:
            self._engine.telemetry.tool_call_ended(done)
            self._engine.step_signal.notify((done.run_id, done.task_key, done.attempt))
        return done


def owner_must_act(decided: Plan) -> bool:
    """Whether a settle's commit needs the run's runner, wherever it is, to act now.

    Its run ended; or an in-process task became ready (it needs a slot only the runner's engine
    gives); or something waits on a time (a retry's backoff) the runner must keep. A commit that
    only ended remote attempts and queued the next ones needs nothing of it: the runner, idle,
    learns of the newer revision when it next commits (a conflict, then a fresh read) — a
    replica saves a notification and a read of the run per worker report it did not own.
    """
    return decided.finished or bool(decided.wanted_slots) or decided.wake_at is not None


def tool_call_deadline(step: StepRecord, now: datetime) -> StepRecord | None:
    """The end a passed deadline gives a running remote tool call (None: none has passed)."""
    if step.worker_id is None:
        if step.schedule_deadline is not None and step.schedule_deadline <= now:
            reason, code = LeaseLostReason.TIMED_OUT, SCHEDULE_TO_START_ERROR.code
            message = "no worker claimed the tool call within schedule_to_start_timeout_seconds"
        else:
            return None
    elif step.timeout_at is not None and step.timeout_at <= now:
        reason, code = LeaseLostReason.TIMED_OUT, TIMED_OUT_ERROR.code
        message = "the tool call passed its agent attempt's deadline"
    elif step.lease_expires_at is not None and step.lease_expires_at <= now:
        reason, code = LeaseLostReason.EXPIRED, LEASE_EXPIRED_ERROR.code
        message = "the worker running the tool call stopped heartbeating"
    else:
        return None
    return evolve(
        step,
        status=StepStatus.FAILED,
        response=tool_error(f"{code}: {message}", code),
        finished_at=now,
        lease_end=reason.value,
    )
