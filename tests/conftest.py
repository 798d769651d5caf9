"""Shared test configuration: fixture plugins, asyncio for async tests, the hexagon guarded.

The plugins import nothing heavy at load time (drivers and servers are imported when a fixture
runs), so a package tested alone (``nox -s tests_domain``) loads them without its dependencies.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest_plugins = ["tests.plugins.postgres"]
# The live service's fixtures need the service's packages and the SDK (its clients); the API's
# own session (tests_api) installs no SDK and uses none of them.
if all(importlib.util.find_spec(m) is not None for m in ("workload_api", "workload_sdk")):
    pytest_plugins.append("tests.plugins.live_api")

_DATABASE_FIXTURES = frozenset(
    {
        "database_url",
        "empty_database_url",
        "other_database_url",
        "postgres_server_url",
        "template_database",
    }
)
_PURE = tuple(Path(__file__).parent / name for name in ("domain", "engine"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark database tests; fail any domain or engine test that asks for a database."""
    for item in items:
        wanted = _DATABASE_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if wanted:
            item.add_marker(pytest.mark.postgres)
        path = Path(str(item.path))
        if any(path.is_relative_to(pure) for pure in _PURE) and wanted:
            item.add_marker(pytest.mark.usefixtures("_forbid_database_in_pure_tests"))


@pytest.fixture
def _forbid_database_in_pure_tests(request: pytest.FixtureRequest) -> None:
    pytest.fail(
        f"{request.node.nodeid} asks for a database; domain and engine tests must not "
        "(SPEC §2: those packages do no I/O)",
        pytrace=False,
    )
