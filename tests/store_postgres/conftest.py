"""The per-test PostgreSQL database fixtures, for the store's tests."""

from tests.plugins.postgres import (  # noqa: F401 - fixtures are found by name
    database_url,
    empty_database_url,
    postgres_server_url,
    template_database,
)
