"""``workload --version``: the version of every Workload package installed beside the command.

The packages are released together at one version (docs/adr/0019-packaging-and-deployment.md),
but an environment may hold only some of them (``workload-cli`` without its ``server`` extra
has no ``workload-api``), or a mix after a partial upgrade: each is listed as installed, read
from its distribution's metadata, so a mix shows.
"""

from __future__ import annotations

from importlib import metadata

__all__ = ["PACKAGES", "installed_versions"]

PACKAGES = (
    "workload-cli",
    "workload-sdk",
    "workload-worker",
    "workload-api",
    "workload-engine",
    "workload-store-postgres",
    "workload-model-openai",
    "workload-model-anthropic",
    "workload-domain",
)
"""Every distribution of the workspace, the command's own first."""


def installed_versions() -> list[tuple[str, str]]:
    """``(distribution, version)`` of each of :data:`PACKAGES` that is installed, in order."""
    found: list[tuple[str, str]] = []
    for name in PACKAGES:
        try:
            found.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            continue
    return found
