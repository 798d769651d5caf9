"""Workload's PostgreSQL adapter: the Store and CoordinatorLock ports, and schema migrations."""

from workload_store_postgres._pool import StoreDown
from workload_store_postgres.lock import COORDINATOR_LOCK_KEY, PostgresCoordinatorLock
from workload_store_postgres.migrations import (
    ChecksumMismatch,
    MigrationError,
    MigrationStatus,
    SchemaBehind,
    UnknownMigration,
    check_schema,
    migrate_up,
    migration_status,
)
from workload_store_postgres.store import PostgresStore
from workload_store_postgres.urls import check_database_url

__all__ = [
    "COORDINATOR_LOCK_KEY",
    "ChecksumMismatch",
    "MigrationError",
    "MigrationStatus",
    "PostgresCoordinatorLock",
    "PostgresStore",
    "SchemaBehind",
    "StoreDown",
    "UnknownMigration",
    "check_database_url",
    "check_schema",
    "migrate_up",
    "migration_status",
]
