"""docs/deploy.md stays true to the files it describes, and stays inside the repository.

Its commands need Docker or a cluster, so they are not run here (the image's and the wheels'
are, by the ``packaging`` session); what it names is checked: every link resolves in the
repository (anchors too), and its tables of compose services and Kubernetes overlays are the
ones in compose.yaml and deploy/kubernetes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.deploy.release import ROOT, release_version

DOCS = ROOT / "docs"
PAGES = [DOCS / "deploy.md", DOCS / "adr" / "0019-packaging-and-deployment.md", ROOT / "README.md"]
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _table_column(text: str, heading: str) -> list[str]:
    """The first column of the first table under ``heading``, header and separator left out."""
    lines = text.split(f"\n{heading}\n", 1)[1].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        table.append(line.split("|")[1].strip())
    return table[2:]


@pytest.mark.parametrize("page", [p for p in PAGES if p.name != "README.md"], ids=lambda p: p.name)
def test_links_resolve_inside_the_repository(page: Path) -> None:
    for target in _LINK.findall(page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.is_relative_to(ROOT), f"{page.name} links outside the repository: {target}"
        assert resolved.exists(), f"{page.name}: {target} does not exist"
        if anchor:
            assert anchor in _anchors(resolved), f"{page.name}: no #{anchor} in {resolved.name}"


def test_the_compose_table_names_the_app_profile() -> None:
    text = (DOCS / "deploy.md").read_text(encoding="utf-8")
    named = {
        name.strip("` ") for cell in _table_column(text, "## Compose") for name in cell.split(",")
    }
    services = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))["services"]
    app = {name for name, service in services.items() if "app" in service.get("profiles", [])}
    assert named == app | {"postgres"}


def test_the_kubernetes_table_names_the_overlays() -> None:
    text = (DOCS / "deploy.md").read_text(encoding="utf-8")
    named = {cell.strip("`") for cell in _table_column(text, "## Kubernetes")}
    overlays = {
        f"overlays/{p.name}" for p in (ROOT / "deploy" / "kubernetes" / "overlays").iterdir()
    }
    assert named == overlays


def test_the_version_in_the_commands_is_the_release_version() -> None:
    said = {
        (page.name, version)
        for page in PAGES
        for version in re.findall(
            r"workload(?:-cli)?[: ](\d+\.\d+\.\d+)\b", page.read_text(encoding="utf-8")
        )
    }
    assert {name for name, _ in said} >= {"deploy.md", "README.md"}
    assert {version for _, version in said} == {release_version()}, said
