"""End-to-end fixtures: per-test databases and a live API on each."""

from tests.plugins.live_api import live_api  # noqa: F401 - fixtures are found by name
from tests.plugins.postgres import (  # noqa: F401
    database_url,
    empty_database_url,
    postgres_server_url,
    template_database,
)
