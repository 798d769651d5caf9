"""Web console sessions kept on the server (SPEC §13, ADR 0022): the record and its port.

A sign-in makes one :class:`ConsoleSession`; its cookie carries a random secret the store never
sees: only its SHA-256 digest is kept, so whoever reads the database cannot make a cookie that
matches a live session. Sign-out (or an operator) revokes the row; a revoked or expired row is
no session.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

__all__ = ["ConsoleSession", "ConsoleSessionStore"]


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """One sign-in to the web console."""

    session_id: str
    """A random public id, for listing and revoking (not a credential)."""
    digest: str
    """SHA-256 (hex) of the secret in the session's cookie."""
    principal_id: str
    """Who signed in: the principal's id (a hash of its token, never the token)."""
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None = None

    def live(self, now: datetime) -> bool:
        """Whether the session still signs its browser in at ``now``."""
        return self.revoked_at is None and now < self.expires_at


class ConsoleSessionStore(Protocol):
    """Console sessions: made at sign-in, found by digest, listed and revoked."""

    async def create_console_session(self, session: ConsoleSession) -> None:
        """Keep a new session (and forget sessions that ended before it was made)."""
        ...

    async def find_console_session(self, digest: str) -> ConsoleSession | None:
        """The session whose cookie secret has this digest, live or not, or None."""
        ...

    async def list_console_sessions(self, now: datetime) -> Sequence[ConsoleSession]:
        """The sessions live at ``now``, newest first."""
        ...

    async def revoke_console_session(self, session_id: str, now: datetime) -> bool:
        """Revoke a live session at ``now``; whether there was one to revoke."""
        ...
