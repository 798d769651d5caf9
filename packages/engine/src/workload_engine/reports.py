"""Reports of remote attempts' outcomes waiting to be committed (SPEC §10, §16).

A worker's ``complete`` or ``fail`` — or a passed deadline — becomes a :class:`Report`: what to
make of the live attempt (:data:`Decide`), decided on the run as the commit that records it
finds it. Whoever commits it answers the report with a :class:`Settled` (the run after the
commit, the attempt as ended), None (it decided nothing) or an error. The run's runner commits
the reports it is handed, in its own commit (:meth:`~workload_engine.runner.RunRunner.report`);
:class:`~workload_engine.remote.RemoteAttempts` commits the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import anyio

from workload_domain.leases import LeasedAttempt
from workload_domain.records import AttemptRecord, RunSnapshot
from workload_engine.planner import AttemptOutcome

__all__ = ["Decide", "Report", "Settled"]

Decide = Callable[[AttemptRecord, datetime], AttemptOutcome | None]
"""From a live attempt as now stored: its outcome, or None for nothing to write (it may raise
to refuse, e.g. ``LeaseLost``)."""


class Settled:
    """A remote attempt's outcome committed: the run after it, and the attempt as ended."""

    __slots__ = ("after", "attempt")

    def __init__(self, after: RunSnapshot, attempt: AttemptRecord) -> None:
        self.after = after
        self.attempt = attempt


@dataclass(eq=False, slots=True)
class Report:
    """One report waiting for its commit: what it asks, and (once done) its answer.

    ``declined`` is set instead of an answer when the runner it was handed to stopped before
    committing it (the run ended, parked, or moved to another replica): the report is then
    committed the other way. ``seen`` is the attempt as its reporter read it, with its run's
    position (:func:`~workload_engine._held_reports.caught_up`), or None.
    """

    key: tuple[str, int]
    decide: Decide
    seen: LeasedAttempt | None = None
    done: bool = False
    settled: Settled | None = None
    error: Exception | None = None
    declined: bool = False
    answered: anyio.Event = field(default_factory=anyio.Event)

    def answer(self, settled: Settled | None = None, error: Exception | None = None) -> None:
        """Answer the report (once): settled, decided nothing (None), or refused (``error``)."""
        if self.done:
            return
        self.done, self.settled, self.error = True, settled, error
        self.answered.set()

    def decline(self) -> None:
        """Hand the report back unanswered (its runner stopped first)."""
        if not self.done:
            self.declined = True
            self.answered.set()
