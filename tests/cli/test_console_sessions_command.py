"""``workload console sessions`` / ``revoke``: an operator lists and revokes console sessions
in the database (ADR 0022)."""

from __future__ import annotations

import json

import anyio
from pydantic import SecretStr

from tests.cli.conftest import Cli
from tests.plugins.live_api import OPERATOR_TOKEN
from workload_api.auth import Authenticator
from workload_api.console import Sessions
from workload_api.service_key import ServiceKey
from workload_engine.clock import SystemClock
from workload_store_postgres.store import PostgresStore


def _sessions(store: PostgresStore) -> Sessions:
    """Sessions as the service keeps them on this database (its stored key)."""
    tokens = Authenticator(
        viewers=(), operators=(SecretStr(OPERATOR_TOKEN),), key=ServiceKey(store)
    )
    return Sessions(store, tokens, SystemClock())


async def _sign_in(url: str, times: int) -> list[str]:
    """Sign in ``times`` times; the cookies."""
    async with PostgresStore(url, max_size=1) as store:
        sessions = _sessions(store)
        principal = await sessions.authenticator.identify(OPERATOR_TOKEN)
        assert principal is not None
        return [await sessions.issue(principal) for _ in range(times)]


async def _signed_in(url: str, cookies: list[str]) -> list[bool]:
    async with PostgresStore(url, max_size=1) as store:
        sessions = _sessions(store)
        return [await sessions.read(c) is not None for c in cookies]


def test_an_operator_lists_and_revokes_console_sessions(
    offline_cli: Cli, database_url: str
) -> None:
    cookies = anyio.run(_sign_in, database_url, 3)
    listed = offline_cli("console", "sessions", "--database-url", database_url, "-o", "json")
    assert listed.exit_code == 0, listed.output
    items = json.loads(listed.stdout)["items"]
    assert len(items) == 3
    assert OPERATOR_TOKEN not in listed.stdout
    newest = items[0]["session_id"]
    revoked = offline_cli("console", "revoke", newest, "--database-url", database_url)
    assert revoked.exit_code == 0, revoked.output
    assert f"revoked {newest}" in revoked.stdout
    assert anyio.run(_signed_in, database_url, cookies) == [True, True, False]
    again = offline_cli("console", "revoke", newest, "--database-url", database_url)
    assert again.exit_code == 7
    every = offline_cli("console", "revoke", "--all", "--database-url", database_url)
    assert every.exit_code == 0, every.output
    assert anyio.run(_signed_in, database_url, cookies) == [False, False, False]
    empty = offline_cli("console", "sessions", "--database-url", database_url, "-o", "json")
    assert json.loads(empty.stdout) == {"items": []}


def test_revoke_needs_ids_or_all(offline_cli: Cli, database_url: str) -> None:
    neither = offline_cli("console", "revoke", "--database-url", database_url)
    both = offline_cli("console", "revoke", "x", "--all", "--database-url", database_url)
    assert (neither.exit_code, both.exit_code) == (2, 2)
