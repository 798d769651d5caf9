"""The idempotency store port: keys that replay a request's first outcome."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from workload_domain.idempotency import (
    IdempotencyClaim,
    IdempotencyRecord,
    Outcome,
    Replayed,
)

__all__ = ["IdempotencyStore"]


class IdempotencyStore(Protocol):
    """Outcomes of idempotent writes, scoped to a principal."""

    async def find_outcome(self, claim: IdempotencyClaim) -> Outcome | None:
        """The stored outcome for this claim's key, if any.

        Raises ``IdempotencyKeyReused`` if the key was used for another request.
        """
        ...

    async def save_outcome(self, record: IdempotencyRecord) -> Replayed | None:
        """Record the outcome of a request that wrote nothing else.

        Returns the stored outcome instead when the key was already used for this request;
        raises ``IdempotencyKeyReused`` when it was used for another.
        """
        ...

    async def purge_outcomes(self, older_than: datetime) -> int:
        """Delete records created before ``older_than``; return how many."""
        ...
