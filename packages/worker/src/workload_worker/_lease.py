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

__all__ = ["LeaseClock"]


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

    def renewed(self, sent_at: float) -> None:
        """A heartbeat sent at ``sent_at`` renewed the lease (counted from the sending)."""
        self.renewed_at = sent_at
        self.expires = sent_at + self.duration
