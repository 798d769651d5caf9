"""Idempotent writes (SPEC §6): a key, scoped to a principal, bound to one request.

A write that carries an :class:`IdempotentWrite` saves its outcome in the same transaction as the
write. If the key was already used for the same request (same operation and request hash), the
store writes nothing and raises :class:`Replay` with the original outcome; for a different
request it raises :class:`~workload_domain.errors.IdempotencyKeyReused`. Concurrent duplicates
race on the record's primary key: exactly one transaction commits, the others replay it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, TypeVar

from workload_domain.jsonvalues import JsonObject, canonical_json, sha256_tag

__all__ = [
    "IDEMPOTENCY_RETENTION",
    "IdempotencyClaim",
    "IdempotentWrite",
    "Outcome",
    "Replay",
    "request_hash",
]

IDEMPOTENCY_RETENTION = timedelta(hours=24)
"""Records are kept at least this long, then purged."""

T = TypeVar("T")


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
class IdempotentWrite(Generic[T]):
    """A claim plus how to render the written resource into the stored outcome."""

    claim: IdempotencyClaim
    render: Callable[[T], Outcome]


class Replay(Exception):
    """The key was already used for this very request: here is the original outcome.

    Not an error: the caller answers with ``outcome`` (and ``Idempotent-Replayed: true``).
    """

    def __init__(self, outcome: Outcome) -> None:
        super().__init__("idempotent replay")
        self.outcome = outcome


def request_hash(operation: str, path_params: dict[str, Any], body: Any) -> str:
    """Hash of the canonical request: operation, path parameters and body."""
    return sha256_tag(canonical_json({"operation": operation, "path": path_params, "body": body}))
