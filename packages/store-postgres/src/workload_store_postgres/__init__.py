"""Workload's PostgreSQL adapter: schema migrations (more of the Store port to come)."""

from workload_store_postgres.migrations import (
    MigrationError,
    MigrationStatus,
    SchemaBehind,
    UnknownMigration,
    check_schema,
    migrate_up,
    migration_status,
)

__all__ = [
    "MigrationError",
    "MigrationStatus",
    "SchemaBehind",
    "UnknownMigration",
    "check_schema",
    "migrate_up",
    "migration_status",
]
