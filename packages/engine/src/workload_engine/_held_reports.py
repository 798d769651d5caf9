"""Workers' reports a runner holds until one of its commits records them (SPEC §16).

A report on a run that reaches the process executing it is handed to the run's runner
(:meth:`~workload_engine.runner.RunRunner.report`): it is decided on the run as the runner
reads it, committed in the runner's next commit, and answered once that commit landed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from workload_domain.evolve import evolve
from workload_domain.ports import Clock
from workload_domain.records import RunSnapshot
from workload_domain.statuses import AttemptStatus
from workload_engine.planner import AttemptOutcome, Plan
from workload_engine.reports import Report, Settled

__all__ = ["HeldReports", "caught_up"]


def caught_up(
    snapshot: RunSnapshot, reports: Sequence[Report], now: datetime
) -> RunSnapshot | None:
    """``snapshot`` brought up to date by what one report saw, or None: read the run again.

    A report's ``seen`` is its attempt and its run's position (revision, last event sequence),
    read in one statement just before the report was handed over. That is the run as stored,
    without reading it again, in two cases only:

    - the run is at the snapshot's revision and sequence: nothing was committed since, and the
      attempt as seen differs only in what changes without a revision (a heartbeat's lease and
      progress);
    - the run is one revision and one event further, and the attempt, queued in the snapshot,
      was seen claimed: that claim is the one change (only a claim starts a queued remote
      attempt, and it is a revision of its own with an event per attempt of the run it starts;
      it changes nothing of the run but its revision, sequence and update time).

    Anything else — several reports, another attempt, another run, the run further on or
    behind, a lease read that has run out by ``now`` (a heartbeat may have renewed it since the
    read: the stored one decides) — is read again, as is every report that saw nothing. A
    change committed after the report's read is met as by any snapshot: the runner's commit is
    checked against the revision and the sequence, and a conflict reads the run.
    """
    if len(reports) != 1:
        return None
    report = reports[0]
    seen = report.seen
    if seen is None or seen.run is None:
        return None
    attempt, position = seen.attempt, seen.run
    if seen.run_id != snapshot.run.run_id or (attempt.task_key, attempt.attempt) != report.key:
        return None
    if attempt.lease_expires_at is not None and attempt.lease_expires_at <= now:
        return None
    keys = [(a.task_key, a.attempt) for a in snapshot.live_attempts]
    if report.key not in keys:
        return None
    index = keys.index(report.key)
    known = snapshot.live_attempts[index]
    ahead = (
        position.revision - snapshot.run.revision,
        position.last_sequence - snapshot.last_sequence,
    )
    claimed = known.status is AttemptStatus.QUEUED and attempt.status is AttemptStatus.RUNNING
    if ahead == (0, 0):
        if attempt.status is not known.status:
            return None
        run = snapshot.run
    elif ahead == (1, 1) and claimed:
        run = evolve(snapshot.run, revision=position.revision, updated_at=position.updated_at)
    else:
        return None
    live = (*snapshot.live_attempts[:index], attempt, *snapshot.live_attempts[index + 1 :])
    return evolve(snapshot, run=run, live_attempts=live, last_sequence=position.last_sequence)


class HeldReports:
    """The reports handed to one runner and not answered yet."""

    __slots__ = ("_reports",)

    def __init__(self) -> None:
        self._reports: list[Report] = []

    def __bool__(self) -> bool:
        return bool(self._reports)

    def hold(self, report: Report) -> None:
        """Hold ``report`` until the runner's next commit."""
        self._reports.append(report)

    def decide(self, snapshot: RunSnapshot, clock: Clock) -> list[tuple[Report, AttemptOutcome]]:
        """The reports that decide an outcome on ``snapshot``; the others are answered now.

        A report that decides nothing (its attempt is no longer live) or refuses (its lease is
        lost) is answered at once: those are final, whatever the run becomes.
        """
        if not self._reports:
            return []
        live = {(a.task_key, a.attempt): a for a in snapshot.live_attempts}
        now = clock.now()
        deciding: list[tuple[Report, AttemptOutcome]] = []
        for report in list(self._reports):
            current = live.get(report.key)
            try:
                outcome = None if current is None else report.decide(current, now)
            except Exception as exc:  # it refuses (LeaseLost): that report only
                self._reports.remove(report)
                report.answer(error=exc)
                continue
            if outcome is None or any(o.key == report.key for _, o in deciding):
                if outcome is None:
                    self._reports.remove(report)
                    report.answer()
                continue  # a concurrent duplicate waits for the next commit
            deciding.append((report, outcome))
        return deciding

    def answer(self, reported: list[tuple[Report, AttemptOutcome]], decided: Plan) -> bool:
        """The commit recording ``reported`` landed (or was not needed): answer them.

        Returns whether duplicates of them are still held back (to decide on the next read).
        """
        if not reported:
            return False
        commit = decided.commit
        ended = {} if commit is None else {(a.task_key, a.attempt): a for a in commit.attempts}
        for report, _ in reported:
            self._reports.remove(report)
            attempt = ended.get(report.key)
            report.answer(None if attempt is None else Settled(decided.after, attempt))
        return bool(self._reports)

    def decline_all(self) -> None:
        """The runner stops: every report goes back to its sender, who commits it itself."""
        for report in self._reports:
            report.decline()
