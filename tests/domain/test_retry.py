"""Retry arithmetic (SPEC §4): backoff = min(initial × multiplier^(n−1), max)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from fractions import Fraction

import pytest

from workload_domain.definition import RetryPolicy
from workload_domain.retry import backoff_seconds, next_attempt_at, should_retry


def policy(
    initial: float = 1, multiplier: float = 2, maximum: float = 60, attempts: int = 1
) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=attempts,
        initial_backoff_seconds=initial,
        backoff_multiplier=multiplier,
        max_backoff_seconds=maximum,
    )


@pytest.mark.parametrize(
    ("n", "expected"),
    [(1, 1), (2, 2), (3, 4), (4, 8), (5, 16), (6, 32), (7, 60), (8, 60), (100, 60)],
)
def test_default_policy_backoff(n: int, expected: float) -> None:
    assert backoff_seconds(RetryPolicy(), n) == expected
    assert backoff_seconds(policy(), n) == expected


@pytest.mark.parametrize(
    ("initial", "multiplier", "maximum"),
    [
        (1, 2, 60),
        (0.5, 3, 1000),
        (0.25, 1.5, 3600),
        (3, 1, 10),
        (5, 10, 604800),
        (0, 2, 60),
        (7, 4, 7),
        (0.125, 2, 0.125),
        (2, 1000, 604800),
    ],
)
def test_backoff_matches_the_formula_exactly(
    initial: float, multiplier: float, maximum: float
) -> None:
    p = policy(initial, multiplier, maximum)
    for n in range(1, 21):
        exact = min(Fraction(initial) * Fraction(multiplier) ** (n - 1), Fraction(maximum))
        assert backoff_seconds(p, n) == float(exact), n


def test_zero_initial_backoff_is_always_zero() -> None:
    p = policy(initial=0, multiplier=1000, maximum=604800)
    assert [backoff_seconds(p, n) for n in (1, 2, 50, 100)] == [0, 0, 0, 0]


def test_multiplier_one_is_constant() -> None:
    p = policy(initial=7.5, multiplier=1, maximum=60)
    assert {backoff_seconds(p, n) for n in range(1, 101)} == {7.5}


def test_max_backoff_zero() -> None:
    p = policy(initial=0, multiplier=2, maximum=0)
    assert backoff_seconds(p, 100) == 0


def test_huge_multiplier_and_many_attempts_do_not_overflow() -> None:
    p = policy(initial=604800, multiplier=1000, maximum=604800, attempts=100)
    assert backoff_seconds(p, 100) == 604800
    tiny = policy(initial=2.0**-800, multiplier=512, maximum=604800, attempts=100)
    assert backoff_seconds(tiny, 1) == 2.0**-800
    assert backoff_seconds(tiny, 89) == 2.0**-8  # 2^-800 × 512^88
    assert backoff_seconds(tiny, 100) == 604800
    assert backoff_seconds(policy(initial=1, multiplier=1000, maximum=604800), 100) == 604800
    big = policy(initial=0.5, multiplier=1000, maximum=604800)
    assert [backoff_seconds(big, n) for n in (1, 2, 3, 4, 100)] == [
        0.5,
        500,
        500000,
        604800,
        604800,
    ]


def test_backoff_result_is_a_float() -> None:
    assert type(backoff_seconds(RetryPolicy(), 3)) is float


@pytest.mark.parametrize("n", [0, -1])
def test_backoff_needs_at_least_one_attempt(n: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        backoff_seconds(RetryPolicy(), n)


@pytest.mark.parametrize(
    ("attempts_so_far", "retryable", "expected"),
    [
        (1, True, True),
        (2, True, True),
        (3, True, False),
        (4, True, False),
        (1, False, False),
        (2, False, False),
    ],
)
def test_should_retry(attempts_so_far: int, retryable: bool, expected: bool) -> None:
    p = policy(attempts=3)
    assert should_retry(p, attempts_so_far, retryable=retryable) is expected


def test_single_attempt_policy_never_retries() -> None:
    assert should_retry(RetryPolicy(), 1, retryable=True) is False


def test_hundred_attempts_policy() -> None:
    p = policy(attempts=100)
    assert should_retry(p, 99, retryable=True) is True
    assert should_retry(p, 100, retryable=True) is False


def test_next_attempt_at_is_finish_plus_backoff() -> None:
    finished = datetime(2025, 1, 31, 23, 59, 58, 250000, tzinfo=UTC)
    p = policy(initial=1, multiplier=2, maximum=60)
    assert next_attempt_at(p, 1, finished) == datetime(2025, 1, 31, 23, 59, 59, 250000, tzinfo=UTC)
    assert next_attempt_at(p, 3, finished) == datetime(2025, 2, 1, 0, 0, 2, 250000, tzinfo=UTC)
    assert next_attempt_at(p, 50, finished) == datetime(2025, 2, 1, 0, 0, 58, 250000, tzinfo=UTC)


def test_next_attempt_at_with_fractional_backoff() -> None:
    finished = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
    p = policy(initial=0.25, multiplier=1.5, maximum=60)
    assert next_attempt_at(p, 2, finished) == datetime(2025, 6, 1, 12, 0, 0, 375000, tzinfo=UTC)


def test_next_attempt_at_keeps_the_time_zone() -> None:
    tz = timezone(timedelta(hours=2))
    finished = datetime(2025, 1, 1, 10, 0, 0, tzinfo=tz)
    result = next_attempt_at(policy(initial=5), 1, finished)
    assert result == datetime(2025, 1, 1, 10, 0, 5, tzinfo=tz)
    assert result.utcoffset() == timedelta(hours=2)


def test_next_attempt_at_with_maximum_backoff() -> None:
    finished = datetime(2025, 1, 1, tzinfo=UTC)
    p = policy(initial=1, multiplier=1000, maximum=604800, attempts=100)
    assert next_attempt_at(p, 100, finished) == datetime(2025, 1, 8, tzinfo=UTC)


def test_next_attempt_at_with_zero_backoff_is_the_finish_time() -> None:
    finished = datetime(2025, 1, 1, tzinfo=UTC)
    assert next_attempt_at(policy(initial=0), 7, finished) == finished
