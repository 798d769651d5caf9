"""What the deploy tests share: the repository's root, its packages and the release version.

Standard library only: the ``packaging`` session imports it with no Workload package installed.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

__all__ = ["PACKAGE_DIRS", "ROOT", "project", "release_version"]

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = sorted(p.parent for p in (ROOT / "packages").glob("*/pyproject.toml"))


def project(directory: Path) -> dict[str, Any]:
    """The ``[project]`` table of ``directory/pyproject.toml``."""
    document = tomllib.loads((directory / "pyproject.toml").read_text(encoding="utf-8"))
    table: dict[str, Any] = document["project"]
    return table


def release_version() -> str:
    """The one version every package carries: the workspace root's (ADR 0019)."""
    version: str = project(ROOT)["version"]
    return version
