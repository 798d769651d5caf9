"""A standby's outage: its failed tries to reach PostgreSQL, logged without flooding (SPEC §14).

A standby that cannot reach PostgreSQL says so at its first failed try, then at most every
:data:`OUTAGE_LOG_SECONDS` (with how many tries failed), and once more when it reaches it again.
"""

from __future__ import annotations

import logging

import anyio

__all__ = ["OUTAGE_LOG_SECONDS", "StandbyOutage"]

_log = logging.getLogger("workload.coordinator")

OUTAGE_LOG_SECONDS = 60.0
"""While a standby cannot reach PostgreSQL, it says so at the first failed try, then at most
this often (with how many tries failed), and once more when it reaches it again."""


class StandbyOutage:
    """A standby's failed tries to reach PostgreSQL: logged at the first, then rate-limited."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.tries = 0
        self._logged_at = 0.0

    def failed(self, error: BaseException) -> None:
        """Count a failed try, and log it when due."""
        now = anyio.current_time()
        first = self.since is None
        if first:
            self.since = now
        self.tries += 1
        if first or now - self._logged_at >= OUTAGE_LOG_SECONDS:
            self._logged_at = now
            _log.warning(
                "standing by without PostgreSQL: not ready, retrying the lock: %s",
                error,
                extra={"fields": {"failed_tries": self.tries}},
            )

    def ended(self) -> bool:
        """A try reached PostgreSQL: True (and logged) if that ends an outage."""
        if self.since is None:
            return False
        _log.info(
            "standing by: PostgreSQL reached again",
            extra={
                "fields": {
                    "failed_tries": self.tries,
                    "seconds": round(anyio.current_time() - self.since, 3),
                }
            },
        )
        self.since, self.tries = None, 0
        return True
