"""The payload of a ``workload_work`` notification: which queues and actions got work.

A claim waiting on another replica wakes only when the work queued matches its queues and
actions (ADR 0025). The payload is a JSON array of ``[queue, action]`` pairs; one that would
not fit in a notification (PostgreSQL allows fewer than 8,000 bytes) is sent empty, and an
empty or unreadable payload means "some work": every waiting claim looks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

__all__ = ["MAX_PAYLOAD", "decode_work", "encode_work"]

MAX_PAYLOAD = 4000
"""The longest payload sent, in bytes (well under PostgreSQL's 8,000)."""


def encode_work(work: Iterable[tuple[str, str]]) -> str:
    """The payload naming ``work`` (``(queue, action)`` pairs), or ``""`` if too long."""
    pairs = [list(pair) for pair in dict.fromkeys(work)]
    text = json.dumps(pairs, separators=(",", ":"), ensure_ascii=False)
    return text if len(text.encode()) <= MAX_PAYLOAD else ""


def decode_work(payload: str) -> Sequence[tuple[str, str]] | None:
    """The pairs a payload names; None (wake every claim) if it names none readably."""
    if not payload:
        return None
    if len(payload) > 2 * MAX_PAYLOAD:
        return None  # not one of ours
    try:
        value = json.loads(payload)
    except (ValueError, RecursionError):  # (deep nesting raises RecursionError)
        return None
    if not isinstance(value, list) or not value:
        return None
    pairs: list[tuple[str, str]] = []
    for item in value:
        if not (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], str)
        ):
            return None
        pairs.append((item[0], item[1]))
    return pairs
