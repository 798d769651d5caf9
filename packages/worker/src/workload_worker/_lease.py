"""An attempt's lease and timeout on this machine's clock.

The server's timestamps are not compared with this machine's clock (they may disagree): the
lease's length (``heartbeat_timeout_seconds``) and the time from the claim to ``timeout_at``
are durations, counted here from when the claim or heartbeat answered, on the event loop's
monotonic clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from workload_sdk import ClaimedAttempt

__all__ = ["MIN_HEARTBEAT_WAIT", "LeaseClock"]

MIN_HEARTBEAT_WAIT = 1.0
"""The least a heartbeat is waited for, when the lease leaves that long (seconds)."""


@dataclass(slots=True)
class LeaseClock:
    """When to heartbeat, when the lease runs out and when the handler's time is up.

    Attributes:
        duration: The lease's length (the task's ``heartbeat_timeout_seconds``).
        expires: When the lease runs out, unless renewed (loop clock).
        deadline: When the handler is cancelled: the server's ``timeout_at`` (loop clock).
        renewed_at: When the last renewal (or the claim) was made (loop clock).
    """

    duration: float
    expires: float
    deadline: float
    renewed_at: float

    @classmethod
    def of(cls, item: ClaimedAttempt, now: float) -> LeaseClock:
        """The clock of a claimed attempt, received at ``now``."""
        duration = float(item.heartbeat_timeout_seconds)
        # The claim's lease started when the server handed the attempt out.
        claimed_at = item.lease_expires_at - timedelta(seconds=duration)
        to_timeout = (item.timeout_at - claimed_at).total_seconds()
        return cls(duration, now + duration, now + max(0.0, to_timeout), now)

    @property
    def interval(self) -> float:
        """Seconds between heartbeats: a third of the lease, so two may fail in a row."""
        return self.duration / 3

    def give_up_at(self, sent_at: float) -> float:
        """When a heartbeat sent at ``sent_at`` is given up (and sent again, on a new connection).

        A hung one (a half-open connection, a frozen replica) must not wait out the client's
        30 s past a shorter lease, and a slow one must not be cut short: after an interval (at
        least :data:`MIN_HEARTBEAT_WAIT`) but not past the lease's end — unless that is less
        than an interval away (or past): then an interval.
        """
        patient = sent_at + max(self.interval, MIN_HEARTBEAT_WAIT)
        return max(sent_at + self.interval, min(patient, self.expires))

    def renewed(self, sent_at: float) -> None:
        """A heartbeat sent at ``sent_at`` renewed the lease (counted from the sending)."""
        self.renewed_at = sent_at
        self.expires = sent_at + self.duration
