"""Web console sessions (ADR 0022): one row per sign-in, found by its cookie's digest."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime

from workload_domain.console_sessions import ConsoleSession
from workload_domain.errors import StoreIntegrityError
from workload_store_postgres._db import Row, one, rows
from workload_store_postgres._part import StorePart
from workload_store_postgres._queries import query

__all__ = ["Sessions"]

_CONSTRAINTS = {
    "console_sessions_pkey": lambda: StoreIntegrityError("a console session with this id exists"),
    "console_sessions_digest_key": lambda: StoreIntegrityError(
        "a console session with this digest exists"
    ),
}


def _session(row: Row) -> ConsoleSession:
    return ConsoleSession(
        row["session_id"],
        row["digest"],
        row["principal_id"],
        row["created_at"],
        row["expires_at"],
        row["revoked_at"],
    )


class Sessions(StorePart):
    """The ``ConsoleSessionStore`` part of the store."""

    async def create_console_session(self, session: ConsoleSession) -> None:
        """Keep a new session; forget those that ended (expired or revoked) before it."""
        async with self._db.tx(_CONSTRAINTS) as conn:
            await conn.execute(query("sweep_console_sessions"), {"before": session.created_at})
            await conn.execute(query("insert_console_session"), asdict(session))

    async def find_console_session(self, digest: str) -> ConsoleSession | None:
        """The session whose cookie secret has this digest, or None."""
        async with self._db.single() as conn:
            row = await one(conn, "find_console_session", {"digest": digest})
        return None if row is None else _session(row)

    async def list_console_sessions(self, now: datetime) -> Sequence[ConsoleSession]:
        """The sessions live at ``now``, newest first."""
        async with self._db.single() as conn:
            return [_session(r) for r in await rows(conn, "live_console_sessions", {"now": now})]

    async def revoke_console_session(self, session_id: str, now: datetime) -> bool:
        """Revoke a live session at ``now``; whether there was one."""
        async with self._db.tx() as conn:
            params = {"session_id": session_id, "now": now}
            cur = await conn.execute(query("revoke_console_session"), params)
            return cur.rowcount == 1
