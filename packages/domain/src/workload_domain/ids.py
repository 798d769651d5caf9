"""Time-ordered identifiers (UUID version 7, RFC 9562) built from values the caller supplies."""

from __future__ import annotations

import uuid

__all__ = ["uuid7"]

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
