"""Jittered exponential backoff: how long a worker waits before trying the server again.

:func:`claim_failed` says what a failed claim is (logged at its level) and how long the claim
loop waits before the next one: the backoff's delay, or a 429's ``Retry-After`` when longer.
"""

from __future__ import annotations

import logging
import random

from workload_sdk import Forbidden, TooManyRequests, Unauthenticated, WorkloadError

__all__ = ["MAX_RETRY_AFTER", "Backoff", "claim_failed"]

logger = logging.getLogger("workload.worker")

MAX_RETRY_AFTER = 60.0
"""The longest a server's ``Retry-After`` makes the claim loop wait (a stop cuts it short)."""


class Backoff:
    """Delays that double from ``initial`` up to ``maximum``, each jittered, until a success.

    The jitter ("equal jitter": between half and all of the delay) spreads out the workers that
    lost the server together, so they do not all come back in the same instant.

    Args:
        initial: The first delay, in seconds.
        maximum: The longest delay, in seconds.
    """

    def __init__(self, initial: float, maximum: float) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError("backoff needs 0 < initial <= maximum")
        self.initial = initial
        self.maximum = maximum
        self.failures = 0

    def next_delay(self) -> float:
        """The delay before the next try, counting one more failure."""
        delay = min(self.initial * 2.0 ** min(self.failures, 64), self.maximum)
        self.failures += 1
        # Not a security use of random: it only spreads retries out.
        return delay * random.uniform(0.5, 1.0)  # noqa: S311

    def reset(self) -> None:
        """A try succeeded: start again from ``initial``."""
        self.failures = 0


def claim_failed(exc: WorkloadError, backoff: Backoff) -> float:
    """Log a failed claim; the seconds to wait before the next one (counts a failure)."""
    tries = backoff.failures + 1
    delay = backoff.next_delay()
    if isinstance(exc, TooManyRequests):
        # This worker id or token holds as many waiting claims as the server allows (a
        # restarted worker's old claim may still wait there): wait as long as it asks.
        logger.warning("claim refused for now (429, try %d): %s", tries, exc)
        if exc.retry_after is not None:
            delay = max(delay, min(float(exc.retry_after), MAX_RETRY_AFTER))
    elif isinstance(exc, Unauthenticated):
        logger.error("claim refused (401): the server does not know this worker token")
    elif isinstance(exc, Forbidden):
        logger.error("claim refused (403): the token is not a worker token")
    elif exc.status is not None and exc.status < 500:
        logger.error("claim refused: %s", exc)
    else:
        logger.warning("claim failed (try %d): %s", tries, exc)
    return delay
