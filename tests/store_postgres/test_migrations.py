"""Schema migrations against a real PostgreSQL server."""

from __future__ import annotations

import psycopg
import pytest

from tests.plugins.postgres import with_database
from workload_store_postgres.migrations import (
    ChecksumMismatch,
    NotUtf8,
    SchemaBehind,
    UnknownMigration,
    check_schema,
    known_migrations,
    migrate_up,
    migration_status,
)

pytestmark = pytest.mark.anyio

TABLES = {
    "workflows",
    "workflow_versions",
    "workflow_runs",
    "task_runs",
    "attempts",
    "state_events",
    "idempotency_records",
    "schema_migrations",
}


async def test_an_unmigrated_database_is_refused_then_migrated(empty_database_url: str) -> None:
    with pytest.raises(SchemaBehind, match="workload migrate up"):
        await check_schema(empty_database_url)
    status = await migration_status(empty_database_url)
    assert [m.version for m in status.pending] == [m.version for m in known_migrations()]

    applied = await migrate_up(empty_database_url)
    assert [m.version for m in applied] == [m.version for m in known_migrations()]
    status = await check_schema(empty_database_url)
    assert status.up_to_date
    assert [(a.version, a.checksum) for a in status.applied] == [
        (m.version, m.checksum) for m in known_migrations()
    ]
    assert await migrate_up(empty_database_url) == ()  # idempotent

    with psycopg.connect(empty_database_url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    assert {r[0] for r in rows} >= TABLES


async def test_an_unknown_migration_is_refused(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "INSERT INTO schema_migrations (version, name, checksum) VALUES (9999, 'future', 'x')"
        )
    with pytest.raises(UnknownMigration, match="9999"):
        await check_schema(database_url)
    with pytest.raises(UnknownMigration):
        await migrate_up(database_url)


async def test_a_changed_migration_is_refused(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        conn.execute("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1")
    with pytest.raises(ChecksumMismatch):
        await check_schema(database_url)


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO workflows VALUES ('BAD ID', 1, '', now(), now())",
        "INSERT INTO attempts VALUES ('00000000-0000-7000-8000-000000000000', 'a', 1,"
        " 'running', now(), NULL, NULL, NULL)",
    ],
)
async def test_constraints_refuse_bad_rows(database_url: str, statement: str) -> None:
    with psycopg.connect(database_url) as conn, pytest.raises(psycopg.errors.IntegrityError):
        conn.execute(statement)


async def test_status_columns_only_hold_known_statuses(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        conn.execute("INSERT INTO workflows VALUES ('w', 1, '', now(), now())")
        conn.execute(
            "INSERT INTO workflow_versions VALUES ('w', 1, 'sha256:' || repeat('a', 64), 1,"
            " '{}'::jsonb, now())"
        )
        conn.commit()
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(
                "INSERT INTO workflow_runs (run_id, workflow_id, version, status, revision,"
                " last_sequence, input, cancel_requested, created_at, updated_at, started_at,"
                " finished_at, shard) VALUES ('00000000-0000-7000-8000-000000000001', 'w', 1,"
                " 'paused', 1, 1, '{}'::jsonb, false, now(), now(), NULL, NULL, 0)"
            )


async def test_a_database_that_is_not_utf8_is_refused_with_a_clear_message(
    empty_database_url: str,
) -> None:
    # Found by the packaging work: in SQL_ASCII, psycopg answers text as bytes, and every
    # applied migration looked edited. Now the encoding itself is the message.
    name = "workload_sql_ascii_test"
    admin = with_database(empty_database_url, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(
            f"CREATE DATABASE {name} ENCODING 'SQL_ASCII' TEMPLATE template0"
            " LC_COLLATE 'C' LC_CTYPE 'C'"
        )
    url = with_database(empty_database_url, name)
    try:
        for command in (migrate_up, check_schema, migration_status):
            with pytest.raises(NotUtf8, match="encoding is SQL_ASCII, not UTF8"):
                await command(url)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
