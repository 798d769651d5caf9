"""Retry arithmetic: which failures are retried and when the next attempt is due (SPEC §4)."""

from __future__ import annotations

from datetime import datetime, timedelta

from workload_domain.definition import RetryPolicy

__all__ = ["backoff_seconds", "next_attempt_at", "should_retry"]


def backoff_seconds(policy: RetryPolicy, attempts_so_far: int) -> float:
    """Return ``min(initial × multiplier^(n−1), max)`` for ``n = attempts_so_far`` (n ≥ 1).

    Computed by repeated multiplication capped at the maximum, so no power can overflow.
    """
    if attempts_so_far < 1:
        raise ValueError("attempts_so_far must be at least 1")
    delay = float(policy.initial_backoff_seconds)
    for _ in range(attempts_so_far - 1):
        if delay >= policy.max_backoff_seconds:
            break
        delay *= policy.backoff_multiplier
    return min(delay, float(policy.max_backoff_seconds))


def should_retry(policy: RetryPolicy, attempts_so_far: int, *, retryable: bool) -> bool:
    """Whether a task whose latest attempt failed gets another attempt."""
    return retryable and attempts_so_far < policy.max_attempts


def next_attempt_at(policy: RetryPolicy, attempts_so_far: int, finished_at: datetime) -> datetime:
    """When the next attempt is due after an attempt that finished at ``finished_at``."""
    return finished_at + timedelta(seconds=backoff_seconds(policy, attempts_so_far))
