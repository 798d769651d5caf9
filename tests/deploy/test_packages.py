"""The packages' metadata (SPEC §18): complete, one version for all, ``workload --version``.

The built wheels themselves are checked by ``test_install.py`` (the ``packaging`` session);
these read the sources, so a gap fails in the ``tests`` session already.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.deploy.release import PACKAGE_DIRS, ROOT, project, release_version
from workload_cli._version import PACKAGES
from workload_cli.main import app

URL = "https://github.com/workload-dev/workload"  # a placeholder: ADR 0019
_SIBLING = re.compile(r"^(workload-[a-z-]+)(\[[a-z,]+\])?(.*)$")


def test_every_package_is_listed_by_workload_version() -> None:
    names = {project(directory)["name"] for directory in PACKAGE_DIRS}
    assert len(PACKAGE_DIRS) == 9
    assert set(PACKAGES) == names
    assert len(PACKAGES) == len(names)


@pytest.mark.parametrize("directory", PACKAGE_DIRS, ids=lambda d: d.name)
def test_package_metadata_is_complete(directory: Path) -> None:
    meta = project(directory)
    assert meta["version"] == release_version()
    assert meta["description"]
    assert meta["requires-python"] == ">=3.11"
    assert meta["license"] == "Apache-2.0"  # SPDX (PEP 639), no licence classifier with it
    assert meta["license-files"] == ["LICENSE"]
    licence = (directory / "LICENSE").read_text(encoding="utf-8")
    assert licence == (ROOT / "LICENSE").read_text(encoding="utf-8")
    readme = (directory / meta["readme"]).read_text(encoding="utf-8")
    assert readme.startswith(f"# {meta['name']}\n")
    assert meta["urls"]["Repository"] == URL
    assert set(meta["urls"]) == {"Homepage", "Documentation", "Repository", "Issues"}
    classifiers = meta["classifiers"]
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert "Development Status :: 3 - Alpha" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]
    assert len(set(classifiers)) == len(classifiers), "a classifier repeats"


@pytest.mark.parametrize("directory", PACKAGE_DIRS, ids=lambda d: d.name)
def test_typed_packages_ship_py_typed(directory: Path) -> None:
    (source,) = (directory / "src").iterdir()
    assert (source / "py.typed").is_file()
    assert "Typing :: Typed" in project(directory)["classifiers"]
    document = tomllib.loads((directory / "pyproject.toml").read_text(encoding="utf-8"))
    assert document["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == [
        f"src/{source.name}"
    ]


def _requirements(project: dict[str, Any]) -> list[str]:
    extras = project.get("optional-dependencies", {}).values()
    return [*project["dependencies"], *(r for group in extras for r in group)]


@pytest.mark.parametrize("directory", PACKAGE_DIRS, ids=lambda d: d.name)
def test_siblings_are_pinned_to_the_release_version(directory: Path) -> None:
    """A wheel of one release never resolves a sibling of another (from an index, say)."""
    siblings = [_SIBLING.match(r) for r in _requirements(project(directory))]
    pins = {m.group(1): m.group(3) for m in siblings if m is not None}
    assert all(pin == f"=={release_version()}" for pin in pins.values()), pins


def test_workload_version_prints_every_installed_package() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # The full workspace is installed here: all nine, the command's own first.
    assert lines == [f"{name} {metadata.version(name)}" for name in PACKAGES]
    assert lines[0] == f"workload-cli {release_version()}"
