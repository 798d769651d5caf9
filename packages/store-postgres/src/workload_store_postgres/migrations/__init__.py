"""Schema migrations: plain ordered SQL files in this folder, applied by an explicit command.

``migrate_up`` takes a session advisory lock (so two operators cannot migrate at once), applies
each pending file in its own transaction and records its checksum in ``schema_migrations``.
``check_schema`` is what the service runs at start-up: it refuses a database that is behind,
that holds a migration this code does not know, or whose applied file changed.

Errors::

    MigrationError
    ├── SchemaBehind        pending migrations: run ``workload migrate up``
    ├── UnknownMigration    the database is newer than this code
    ├── ChecksumMismatch    an applied file was edited afterwards
    └── NotUtf8             the database's encoding is not UTF8 (text would come back as bytes)

    ShardsFixed             ``WORKLOAD_SHARDS`` differs from the number of shards the database
                            was first migrated with (a configuration error, SPEC §16)
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Any

import psycopg
from psycopg.rows import class_row

from workload_domain.errors import StoreUnavailable

__all__ = [
    "MIGRATION_LOCK_KEY",
    "AppliedMigration",
    "ChecksumMismatch",
    "Migration",
    "MigrationError",
    "MigrationStatus",
    "NotUtf8",
    "SchemaBehind",
    "ShardsFixed",
    "UnknownMigration",
    "check_schema",
    "known_migrations",
    "migrate_up",
    "migration_status",
    "stored_shards",
]

MIGRATION_LOCK_KEY = 0x574B4C44_4D494752  # "WKLDMIGR": distinct from the coordinator's key
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


class MigrationError(Exception):
    """The database schema does not match the migrations this code ships."""


class ShardsFixed(ValueError):
    """The database's number of shards was fixed when it was first migrated (SPEC §16)."""

    def __init__(self, stored: int, wanted: int) -> None:
        super().__init__(
            f"this database has {stored} shards, fixed when it was first migrated: "
            f"WORKLOAD_SHARDS={wanted} cannot change it (unset it, or set it to {stored})"
        )
        self.stored = stored
        self.wanted = wanted


class NotUtf8(MigrationError):
    """The database's encoding is not UTF8: Workload stores text (JSON, names) as UTF-8."""


class SchemaBehind(MigrationError):
    """Migrations are pending; the service refuses to start until they are applied."""


class UnknownMigration(MigrationError):
    """The database holds a migration this code does not know (it is newer than the code)."""


class ChecksumMismatch(MigrationError):
    """An applied migration file differs from the one that was applied."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One SQL file shipped with the package."""

    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        """SHA-256 of the file's text."""
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class AppliedMigration:
    """A row of ``schema_migrations``."""

    version: int
    name: str
    checksum: str
    applied_at: datetime


@dataclass(frozen=True, slots=True)
class MigrationStatus:
    """What is applied, what is pending, and what the code does not know."""

    applied: tuple[AppliedMigration, ...]
    pending: tuple[Migration, ...]
    unknown: tuple[AppliedMigration, ...]
    changed: tuple[AppliedMigration, ...]

    @property
    def up_to_date(self) -> bool:
        """Whether the service may run against this database."""
        return not (self.pending or self.unknown or self.changed)


def known_migrations() -> tuple[Migration, ...]:
    """The migrations shipped with this package, in version order."""
    found = []
    for entry in resources.files(__name__).iterdir():
        match = _FILE.fullmatch(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError("two migration files share a version number")
    return tuple(found)


async def _applied(conn: psycopg.AsyncConnection[Any]) -> list[AppliedMigration]:
    exists = await conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL")
    row = await exists.fetchone()
    if row is None or not row[0]:
        return []
    async with conn.cursor(row_factory=class_row(AppliedMigration)) as cursor:
        await cursor.execute(
            "SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version"
        )
        return await cursor.fetchall()


def _status(applied: list[AppliedMigration]) -> MigrationStatus:
    known = {m.version: m for m in known_migrations()}
    done = {a.version for a in applied}
    return MigrationStatus(
        applied=tuple(applied),
        pending=tuple(m for v, m in known.items() if v not in done),
        unknown=tuple(a for a in applied if a.version not in known),
        changed=tuple(
            a for a in applied if a.version in known and known[a.version].checksum != a.checksum
        ),
    )


CONNECT_TIMEOUT_SECONDS = 10
"""How long a migration command or the start-up check waits for the server to answer."""


@asynccontextmanager
async def _connect(url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """One connection with a bounded connect time; driver errors become StoreUnavailable."""
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS * 3):
            conn = await psycopg.AsyncConnection.connect(
                url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS
            )
    except (psycopg.Error, TimeoutError, OSError) as exc:
        raise StoreUnavailable(f"cannot connect to PostgreSQL: {exc}") from exc
    try:
        async with conn:
            await _require_utf8(conn)
            yield conn
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        raise StoreUnavailable(f"PostgreSQL failed during a migration command: {exc}") from exc


async def _require_utf8(conn: psycopg.AsyncConnection[Any]) -> None:
    """Refuse a database whose encoding is not UTF8.

    ``SQL_ASCII`` passes bytes through, and psycopg then answers text as ``bytes``: every
    applied migration's checksum would look changed.
    """
    cursor = await conn.execute(
        "SELECT pg_encoding_to_char(encoding) FROM pg_database WHERE datname = current_database()"
    )
    row = await cursor.fetchone()
    encoding = None if row is None else row[0]
    if isinstance(encoding, bytes):
        encoding = encoding.decode("ascii", "replace")
    if encoding != "UTF8":
        raise NotUtf8(
            f"the database's encoding is {encoding}, not UTF8: create it with "
            "CREATE DATABASE … ENCODING 'UTF8' (TEMPLATE template0 if the default template "
            "differs)"
        )


async def migration_status(url: str) -> MigrationStatus:
    """Read which migrations are applied, pending, unknown or changed."""
    async with _connect(url) as conn:
        return _status(await _applied(conn))


async def check_schema(url: str) -> MigrationStatus:
    """Refuse a database the service must not run against.

    Raises:
        UnknownMigration: the database holds a migration this code does not know.
        ChecksumMismatch: an applied migration was edited afterwards.
        SchemaBehind: migrations are pending (run ``workload migrate up``).
    """
    status = await migration_status(url)
    _raise_for(status, allow_pending=False)
    return status


def _raise_for(status: MigrationStatus, *, allow_pending: bool) -> None:
    if status.unknown:
        versions = ", ".join(str(a.version) for a in status.unknown)
        raise UnknownMigration(
            f"the database holds migrations this version does not know: {versions}"
        )
    if status.changed:
        versions = ", ".join(str(a.version) for a in status.changed)
        raise ChecksumMismatch(f"applied migrations were changed afterwards: {versions}")
    if status.pending and not allow_pending:
        versions = ", ".join(f"{m.version:04d}_{m.name}" for m in status.pending)
        raise SchemaBehind(
            f"the database schema is behind ({versions} pending): run `workload migrate up`"
        )


_SHARDS_MIGRATION = 8
"""The migration that creates the shards: the number of shards is fixed when it is applied."""


async def migrate_up(url: str, *, shards: int | None = None) -> tuple[Migration, ...]:
    """Apply every pending migration, each in its own transaction; return those applied.

    ``shards``: the number of shards (SPEC §16) to give the database when the shards'
    migration is applied now (default 64); once it was, it must be the stored number or None.

    Raises:
        ShardsFixed: ``shards`` differs from the number the database was first migrated with
            (nothing is applied).
    """
    async with _connect(url) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        try:
            await conn.execute(_CREATE_TABLE)
            status = _status(await _applied(conn))
            _raise_for(status, allow_pending=True)
            if shards is not None and all(m.version != _SHARDS_MIGRATION for m in status.pending):
                stored = await _stored_shards(conn)
                if stored is not None and stored != shards:
                    raise ShardsFixed(stored, shards)
            for migration in status.pending:
                async with conn.transaction():
                    await conn.execute(migration.sql.encode("utf-8"))
                    if migration.version == _SHARDS_MIGRATION and shards is not None:
                        await _set_shards(conn, shards)
                    await conn.execute(
                        "INSERT INTO schema_migrations (version, name, checksum)"
                        " VALUES (%s, %s, %s)",
                        (migration.version, migration.name, migration.checksum),
                    )
            return status.pending
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))


async def stored_shards(url: str) -> int | None:
    """The database's number of shards, or None before the shards' migration."""
    async with _connect(url) as conn:
        return await _stored_shards(conn)


async def _stored_shards(conn: psycopg.AsyncConnection[Any]) -> int | None:
    cursor = await conn.execute("SELECT to_regclass('cluster') IS NOT NULL")
    row = await cursor.fetchone()
    if row is None or not row[0]:
        return None
    cursor = await conn.execute("SELECT shards_total FROM cluster")
    row = await cursor.fetchone()
    return None if row is None else int(row[0])


async def _set_shards(conn: psycopg.AsyncConnection[Any], total: int) -> None:
    """Give a database its number of shards, as the shards' migration is applied."""
    if not 1 <= total <= 4096:
        raise ValueError("the number of shards must be from 1 to 4096")
    await conn.execute("UPDATE cluster SET shards_total = %s", (total,))
    await conn.execute("DELETE FROM shards")
    await conn.execute(
        "INSERT INTO shards (shard) SELECT generate_series(0, %s::integer - 1)", (total,)
    )
    await conn.execute("UPDATE workflow_runs SET shard = workload_shard_of(run_id, %s)", (total,))
