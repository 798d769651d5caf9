"""Shared test configuration: async tests on asyncio, and the hexagon guarded in tests too."""

from __future__ import annotations

from pathlib import Path

import pytest

_DATABASE_FIXTURES = frozenset(
    {"database_url", "empty_database_url", "postgres_server_url", "template_database"}
)
_PURE = tuple(Path(__file__).parent / name for name in ("domain", "engine"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Domain and engine tests must run without a database: fail any that asks for one."""
    for item in items:
        path = Path(str(item.path))
        if any(path.is_relative_to(pure) for pure in _PURE):
            wanted = _DATABASE_FIXTURES.intersection(getattr(item, "fixturenames", ()))
            if wanted:
                item.add_marker(
                    pytest.mark.usefixtures("_forbid_database_in_pure_tests"),
                )


@pytest.fixture
def _forbid_database_in_pure_tests(request: pytest.FixtureRequest) -> None:
    pytest.fail(
        f"{request.node.nodeid} asks for a database; domain and engine tests must not "
        "(SPEC §2: those packages do no I/O)",
        pytrace=False,
    )
