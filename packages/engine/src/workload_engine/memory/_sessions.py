"""Web console sessions in the in-memory store (ADR 0022): the same contract as PostgreSQL's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

import anyio

from workload_domain.console_sessions import ConsoleSession
from workload_domain.errors import StoreIntegrityError
from workload_engine.memory._part import MemoryState

__all__ = ["MemorySessions"]


class MemorySessions(MemoryState):
    """The ``ConsoleSessionStore`` part of the in-memory store."""

    async def create_console_session(self, session: ConsoleSession) -> None:
        """Keep a new session; forget those that ended (expired or revoked) before it."""
        await anyio.lowlevel.checkpoint()
        known = self._console_sessions
        if session.session_id in known or any(s.digest == session.digest for s in known.values()):
            raise StoreIntegrityError("a console session with this id or digest exists")
        for old in [s for s in known.values() if _ended_before(s, session.created_at)]:
            del known[old.session_id]
        known[session.session_id] = session

    async def find_console_session(self, digest: str) -> ConsoleSession | None:
        """The session whose cookie secret has this digest, or None."""
        await anyio.lowlevel.checkpoint()
        return next((s for s in self._console_sessions.values() if s.digest == digest), None)

    async def list_console_sessions(self, now: datetime) -> Sequence[ConsoleSession]:
        """The sessions live at ``now``, newest first."""
        await anyio.lowlevel.checkpoint()
        live = [s for s in self._console_sessions.values() if s.live(now)]
        return sorted(live, key=lambda s: (s.created_at, s.session_id), reverse=True)

    async def revoke_console_session(self, session_id: str, now: datetime) -> bool:
        """Revoke a live session at ``now``; whether there was one."""
        await anyio.lowlevel.checkpoint()
        found = self._console_sessions.get(session_id)
        if found is None or not found.live(now):
            return False
        self._console_sessions[session_id] = replace(found, revoked_at=now)
        return True


def _ended_before(session: ConsoleSession, moment: datetime) -> bool:
    ended = session.expires_at if session.revoked_at is None else session.revoked_at
    return ended < moment
