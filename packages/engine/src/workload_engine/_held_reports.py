"""Workers' reports a runner holds until one of its commits records them (SPEC §16).

A report on a run that reaches the process executing it is handed to the run's runner
(:meth:`~workload_engine.runner.RunRunner.report`): it is decided on the run as the runner
reads it, committed in the runner's next commit, and answered once that commit landed.
"""

from __future__ import annotations

from workload_domain.ports import Clock
from workload_domain.records import RunSnapshot
from workload_engine.planner import AttemptOutcome, Plan
from workload_engine.reports import Report, Settled

__all__ = ["HeldReports"]


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
