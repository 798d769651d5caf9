"""``workload console sessions`` and ``workload console revoke`` (ADR 0022).

The web console's sessions, read and revoked in the database. A server command: imported only
when one runs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import UTC, datetime

from workload_api.coordinator import ExitCode
from workload_cli._server import database_command, database_faults, required_url, say
from workload_domain.console_sessions import ConsoleSession
from workload_store_postgres.store import PostgresStore

__all__ = ["NOT_FOUND", "list_sessions", "revoke_sessions"]

NOT_FOUND = 7
"""Exit code when no live session has an id given to ``revoke`` (as the client's ``rejected``)."""


async def _live(url: str) -> Sequence[ConsoleSession]:
    async with PostgresStore(url, max_size=1, verify_schema=True) as store:
        return await store.list_console_sessions(datetime.now(UTC))


async def _revoke(url: str, ids: Sequence[str], every: bool) -> list[str]:
    async with PostgresStore(url, max_size=1, verify_schema=True) as store:
        now = datetime.now(UTC)
        if every:
            ids = [s.session_id for s in await store.list_console_sessions(now)]
        return [i for i in ids if await store.revoke_console_session(i, now)]


def _row(session: ConsoleSession) -> dict[str, str]:
    return {
        "session_id": session.session_id,
        "principal_id": session.principal_id,
        "created_at": session.created_at.isoformat(),
        "expires_at": session.expires_at.isoformat(),
    }


@database_command
def list_sessions(database_url: str | None, as_json: bool = False) -> int:
    """Print the live console sessions, newest first; return the exit code."""
    url = required_url(database_url)
    with database_faults("cannot read the sessions"):
        live = asyncio.run(_live(url))
    rows = [_row(s) for s in live]
    if as_json:
        print(json.dumps({"items": rows}))
        return ExitCode.OK
    for row in rows:
        print("  ".join(row.values()))
    if not rows:
        say("no live console sessions")
    return ExitCode.OK


@database_command
def revoke_sessions(
    database_url: str | None, ids: Sequence[str], every: bool, as_json: bool = False
) -> int:
    """Revoke the sessions ``ids`` (or every live one); exit 7 if one of ``ids`` was not live."""
    url = required_url(database_url)
    if every == bool(ids):
        say("error: give session ids or --all (not both)")
        return ExitCode.USAGE
    with database_faults("cannot revoke"):
        revoked = asyncio.run(_revoke(url, ids, every))
    missing = [i for i in ids if i not in revoked]
    if as_json:
        print(json.dumps({"revoked": revoked, "not_live": missing}))
    else:
        for session_id in revoked:
            print(f"revoked {session_id}")
        for session_id in missing:
            say(f"error: no live console session {session_id}")
    return NOT_FOUND if missing else ExitCode.OK
