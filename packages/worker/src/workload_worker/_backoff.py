"""Jittered exponential backoff: how long a worker waits before trying the server again."""

from __future__ import annotations

import random

__all__ = ["Backoff"]


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
