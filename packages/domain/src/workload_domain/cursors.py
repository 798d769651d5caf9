"""Pagination cursors: opaque, integrity-protected, bound to one listing (SPEC §6).

A cursor is URL-safe base64 (no padding) of a 16-byte HMAC-SHA256 tag followed by versioned
canonical JSON ``{"v", "k", "s", "p"}``: version, resource kind, scope (parent ids and filters)
and keyset position. The HMAC key is kept by the store (in the database for PostgreSQL), so
cursors survive restarts. A cursor that is oversized, malformed, tampered with, or replayed
against another kind or scope is refused with :class:`~workload_domain.errors.InvalidCursor`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

from workload_domain.errors import InvalidCursor
from workload_domain.jsonvalues import canonical_json

__all__ = [
    "CURSOR_VERSION",
    "DEFAULT_PAGE_LIMIT",
    "MAX_CURSOR_LENGTH",
    "MAX_PAGE_LIMIT",
    "CursorCodec",
    "Page",
    "Position",
    "Scope",
    "from_micros",
    "page_of",
    "to_micros",
]

DEFAULT_PAGE_LIMIT = 50
MAX_PAGE_LIMIT = 200
CURSOR_VERSION = 1
MAX_CURSOR_LENGTH = 1024
_TAG_BYTES = 16

Scope = Mapping[str, str | int | None]
"""What a listing is bound to: parent ids and filters."""
Position = tuple[str | int, ...]
"""The keyset position of the last item of a page."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing; ``next_cursor`` is None on the last page."""

    items: tuple[T, ...]
    next_cursor: str | None


class CursorCodec:
    """Encodes and verifies cursors with one secret key."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 32:
            raise ValueError("the cursor key must be at least 32 bytes")
        self._key = key

    def encode(self, kind: str, scope: Scope, position: Sequence[str | int]) -> str:
        """Return the cursor for the page after ``position`` in the listing (kind, scope)."""
        body = canonical_json(
            {"v": CURSOR_VERSION, "k": kind, "s": dict(scope), "p": list(position)}
        )
        raw = self._tag(body) + body
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")

    def decode(self, cursor: str, kind: str, scope: Scope) -> Position:
        """Return the position a cursor carries, if it belongs to this listing.

        Raises:
            InvalidCursor: oversized, malformed, tampered with, or from another listing.
        """
        if len(cursor) > MAX_CURSOR_LENGTH:
            raise InvalidCursor("the cursor is too long")
        if not cursor or not cursor.isascii():
            raise InvalidCursor("the cursor is malformed")
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except (binascii.Error, ValueError):
            raise InvalidCursor("the cursor is malformed") from None
        tag, body = raw[:_TAG_BYTES], raw[_TAG_BYTES:]
        if len(tag) < _TAG_BYTES or not hmac.compare_digest(tag, self._tag(body)):
            raise InvalidCursor("the cursor is not one this service issued")
        try:
            payload = json.loads(body)
        except ValueError:  # a valid tag over bad JSON means a bug, still never a 500
            raise InvalidCursor("the cursor is malformed") from None
        if not isinstance(payload, dict) or payload.get("v") != CURSOR_VERSION:
            raise InvalidCursor("the cursor's version is not supported")
        if payload.get("k") != kind or payload.get("s") != dict(scope):
            raise InvalidCursor("the cursor belongs to another listing or other filters")
        position = payload.get("p")
        if not isinstance(position, list) or not all(
            isinstance(p, str | int) and not isinstance(p, bool) for p in position
        ):
            raise InvalidCursor("the cursor is malformed")
        return tuple(position)

    def _tag(self, body: bytes) -> bytes:
        return hmac.new(self._key, body, hashlib.sha256).digest()[:_TAG_BYTES]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(instant: datetime) -> int:
    """An instant as integer microseconds since the Unix epoch (exact, orderable)."""
    delta = instant - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> datetime:
    """The instant ``micros`` microseconds after the Unix epoch, in UTC."""
    return _EPOCH + timedelta(microseconds=micros)


def page_of(
    rows: Sequence[T],
    limit: int,
    *,
    codec: CursorCodec,
    kind: str,
    scope: Scope,
    position: Callable[[T], Sequence[str | int]],
) -> Page[T]:
    """Build a page from up to ``limit + 1`` rows read after the previous position.

    Reading one row more than the page tells whether another page exists without a count.
    """
    if not 1 <= limit <= MAX_PAGE_LIMIT:
        raise ValueError(f"limit must be within 1..{MAX_PAGE_LIMIT}")
    items = tuple(rows[:limit])
    more = len(rows) > limit
    return Page(items, codec.encode(kind, scope, position(items[-1])) if more else None)
