"""Idempotent writes (SPEC §6): a key, scoped to a principal, bound to one request.

A write that carries an :class:`IdempotencyRecord` saves it in the same transaction as the write.
The record holds data only: the claim and the :class:`Outcome` the caller rendered *before* the
write. A write whose outcome shows what the write itself decides (a new version's number) carries
a :class:`PendingRecord` instead, which the store renders in its transaction. If the key was
already used for the same request (same operation and request hash), the store writes nothing
and returns :class:`Replayed` with the original outcome — a normal result, not an error; for a
different request it raises :class:`~workload_domain.errors.IdempotencyKeyReused`. Concurrent
duplicates race on the record's primary key: exactly one transaction commits, the others return
the winner's outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, TypeVar

from workload_domain.errors import IdempotencyKeyReused
from workload_domain.jsonvalues import JsonObject, canonical_json, sha256_tag

__all__ = [
    "IDEMPOTENCY_RETENTION",
    "IdempotencyClaim",
    "IdempotencyRecord",
    "Outcome",
    "PendingRecord",
    "Replayed",
    "request_hash",
    "same_request",
]

T = TypeVar("T")

IDEMPOTENCY_RETENTION = timedelta(hours=24)
"""Records are kept at least this long, then purged."""


@dataclass(frozen=True, slots=True)
class IdempotencyClaim:
    """Who used which key for which request."""

    principal: str
    key: str
    operation: str
    request_hash: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """The response a write produced: replayed as-is for the same key and request."""

    status_code: int
    body: JsonObject


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """What a write saves with itself: the claim and the outcome to replay later."""

    claim: IdempotencyClaim
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class PendingRecord(Generic[T]):
    """An idempotency record whose outcome shows what the write itself decides.

    A new version's number is given by the store inside its transaction, so its outcome cannot
    be rendered before the write: the store renders it (``render``, pure) from what it wrote,
    and saves the :class:`IdempotencyRecord` in the same transaction, as for any other record.
    """

    claim: IdempotencyClaim
    render: Callable[[T], Outcome]

    def record(self, written: T) -> IdempotencyRecord:
        """The record to save with ``written``."""
        return IdempotencyRecord(self.claim, self.render(written))


@dataclass(frozen=True, slots=True)
class Replayed:
    """The key was already used for this very request: nothing was written, here is its outcome."""

    outcome: Outcome


def request_hash(operation: str, path_params: dict[str, Any], body: Any) -> str:
    """Hash of the canonical request: operation, path parameters and body."""
    return sha256_tag(canonical_json({"operation": operation, "path": path_params, "body": body}))


def same_request(stored: IdempotencyClaim, claim: IdempotencyClaim) -> None:
    """Check that a key is reused for the request it was first used for.

    Raises:
        IdempotencyKeyReused: the key was first used for another operation or request.
    """
    if (stored.operation, stored.request_hash) != (claim.operation, claim.request_hash):
        raise IdempotencyKeyReused
