"""Caps on requests that wait: long-poll claims and event streams (ADR 0025).

A waiting request costs this process a task and a connection (and, before ADR 0025, database
work at every wake-up), so one caller may hold only so many at once. :class:`Holds` counts the
requests held now per key — ``("per_worker", worker_id)``, ``("per_principal", id)``,
``("per_run", run_id)`` — and refuses one more past a key's cap with
:class:`~workload_domain.errors.TooManyRequests` (429 with ``Retry-After``), before any work is
done. Counts are this process's own: each replica caps what it serves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from workload_domain.errors import TooManyRequests

__all__ = ["Cap", "Holds"]

Cap = tuple[str, str, int]
"""``(kind, key, limit)``: at most ``limit`` requests held at once for ``key`` of ``kind``."""


class Holds:
    """How many requests of one sort (``what``) each key holds now, under caps."""

    def __init__(self, what: str, *, retry_after: int) -> None:
        self._what = what
        self._retry_after = retry_after
        self._held: Counter[tuple[str, str]] = Counter()

    def held(self, kind: str, key: str) -> int:
        """How many requests ``key`` of ``kind`` holds now."""
        return self._held[kind, key]

    @contextmanager
    def hold(self, caps: Sequence[Cap]) -> Iterator[None]:
        """Hold one request under every cap for the block; refused if any cap is reached.

        Raises:
            TooManyRequests: a cap is reached (nothing is held then).
        """
        for kind, key, limit in caps:
            if self._held[kind, key] >= limit:
                raise TooManyRequests(
                    f"at most {limit} {self._what} at once {kind.replace('_', ' ')}; "
                    f"try again in {self._retry_after} s",
                    kind,
                    self._retry_after,
                )
        keys = [(kind, key) for kind, key, _ in caps]
        for held in keys:
            self._held[held] += 1
        try:
            yield
        finally:
            for held in keys:
                self._held[held] -= 1
                if self._held[held] <= 0:
                    del self._held[held]
