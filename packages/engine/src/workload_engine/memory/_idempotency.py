"""Idempotency outcomes in the in-memory store, kept for the requests that wrote nothing else."""

from __future__ import annotations

from datetime import datetime

import anyio

from workload_domain.idempotency import (
    IdempotencyClaim,
    IdempotencyRecord,
    Outcome,
    Replayed,
    same_request,
)
from workload_engine.memory._part import MemoryState, copied

__all__ = ["MemoryIdempotency"]


class MemoryIdempotency(MemoryState):
    """The ``IdempotencyStore`` part of the in-memory store."""

    async def find_outcome(self, claim: IdempotencyClaim) -> Outcome | None:
        """The outcome stored for this claim's key, if any."""
        await anyio.lowlevel.checkpoint()
        stored = self._outcomes.get((claim.principal, claim.key))
        if stored is None:
            return None
        same_request(stored[0], claim)
        return copied(stored[1])

    async def save_outcome(self, record: IdempotencyRecord) -> Replayed | None:
        """Record an outcome for a request that wrote nothing else."""
        await anyio.lowlevel.checkpoint()
        if (replayed := self._replayed(record)) is not None:
            return replayed
        self._remember(record)
        return None

    async def purge_outcomes(self, older_than: datetime) -> int:
        """Delete records created before ``older_than``."""
        await anyio.lowlevel.checkpoint()
        old = [k for k, (_, _, created) in self._outcomes.items() if created < older_than]
        for key in old:
            del self._outcomes[key]
        return len(old)
