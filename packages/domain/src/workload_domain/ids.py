"""Time-ordered identifiers (UUID version 7, RFC 9562) built from values the caller supplies."""

from __future__ import annotations

import uuid

__all__ = ["attempt_id", "uuid7"]

_ATTEMPTS = uuid.UUID("6f8b2c52-7c1e-4d55-9a0f-3b7f1d2a9e41")
"""The namespace of attempt ids (a constant: ids must be the same in every process)."""

_MAX_MS = (1 << 48) - 1


def uuid7(unix_ms: int, random_bytes: bytes) -> str:
    """Return a UUIDv7 string from a Unix time in milliseconds and 10 random bytes.

    The domain reads no clock and no entropy source itself: callers pass both, so ids are
    deterministic in tests and time-ordered in production.
    """
    if not 0 <= unix_ms <= _MAX_MS:
        raise ValueError("unix_ms is out of the 48-bit range")
    if len(random_bytes) != 10:
        raise ValueError("uuid7 needs exactly 10 random bytes")
    rand = int.from_bytes(random_bytes, "big")
    rand_a = (rand >> 64) & 0xFFF
    rand_b = rand & ((1 << 62) - 1)
    value = (unix_ms << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    return str(uuid.UUID(int=value))


def attempt_id(run_id: str, task_key: str, attempt: int) -> str:
    """The id of attempt ``attempt`` of ``task_key`` in ``run_id`` (a name-based UUIDv5).

    Derived, not drawn: a plan that is computed again after a revision conflict names the same
    attempt with the same id, and the planner stays pure. Ids are not secrets (a lease token
    is); they only address an attempt in the worker endpoints.
    """
    return str(uuid.uuid5(_ATTEMPTS, f"{run_id}/{task_key}/{attempt}"))
