"""The repository is self-contained: every reference points into it (STYLE 26).

A clone has everything its docs and comments cite. "SPEC §n" means section §n of
``docs/reference.md``: every such citation, in any tracked file, must have its heading there. And
no tracked file may point at the project's working files outside the repository (the parent
directory's ``shared`` folder and the specification file in it).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference.md"
# Written split, so that this file does not name what it forbids.
_OUTSIDE = re.compile("|".join((r"\.\./" + "shared", "shared/" + "SPEC")))
# "SPEC §4", "SPEC §5, §6", "SPEC §4–§5", "SPEC §7, §14, §16", "SPEC §11 and §13".
_CITATION = re.compile(r"SPEC\s+§\s*\d+(?:\s*(?:,|–|-|and|or)\s*§\s*\d+)*")
_PART = re.compile(r"(,|–|-|and|or)?\s*§\s*(\d+)")
_HEADING = re.compile(r"^#{2,3} §(\d+)\b", re.MULTILINE)


def _tracked() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [ROOT / name for name in listed.split("\0") if name]


def _text(path: Path) -> str | None:
    """The file's text, or None for a binary file (or one removed from the work tree)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace")


def outside_references(name: str, text: str) -> list[str]:
    """Every line of ``text`` that points outside the repository, as ``name:line: text``."""
    return [
        f"{name}:{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        if _OUTSIDE.search(line)
    ]


def cited_sections(text: str) -> set[int]:
    """The section numbers "SPEC §n" citations in ``text`` name (lists and ranges too)."""
    cited: set[int] = set()
    for citation in _CITATION.finditer(text):
        previous = None
        for joint, number in _PART.findall(citation.group()):
            section = int(number)
            if joint in {"–", "-"} and previous is not None:
                cited.update(range(previous, section))
            cited.add(section)
            previous = section
    return cited


def reference_sections(text: str) -> set[int]:
    """The section numbers that have a heading (``## §n …``) in the reference."""
    return {int(n) for n in _HEADING.findall(text)}


def test_no_tracked_file_points_outside_the_repository() -> None:
    found = [
        line
        for path in _tracked()
        if (text := _text(path)) is not None
        for line in outside_references(str(path.relative_to(ROOT)), text)
    ]
    assert found == []


def test_every_spec_citation_has_its_section_in_the_reference() -> None:
    headings = reference_sections(REFERENCE.read_text(encoding="utf-8"))
    missing: dict[int, list[str]] = {}
    for path in _tracked():
        text = _text(path)
        if text is None:
            continue
        for section in sorted(cited_sections(text) - headings):
            missing.setdefault(section, []).append(str(path.relative_to(ROOT)))
    assert missing == {}


def test_the_reference_is_linked_from_both_readmes() -> None:
    for readme in (ROOT / "README.md", ROOT / "docs" / "README.md"):
        text = readme.read_text(encoding="utf-8")
        assert "reference.md" in text, readme
        assert '"SPEC §n"' in text, readme


@pytest.mark.parametrize(
    ("text", "sections"),
    [
        ("see SPEC §4", {4}),
        ("(SPEC §5, §6)", {5, 6}),
        ("SPEC §7, §14, §16.", {7, 14, 16}),
        ("SPEC §4–§5", {4, 5}),
        ("SPEC §10–§12", {10, 11, 12}),
        ("SPEC §11 and §13", {11, 13}),
        ("SPEC §6 ----", {6}),
        ("SPEC§99", set()),  # no space: not a citation
        ("§3 alone is no SPEC citation", set()),
        ("SPEC says §3", set()),
    ],
    ids=["one", "pair", "list", "range", "long-range", "and", "rule", "unspaced", "bare", "prose"],
)
def test_citations_are_read_with_their_lists_and_ranges(text: str, sections: set[int]) -> None:
    assert cited_sections(text) == sections


@pytest.mark.parametrize(
    "line",
    [
        "see ../sha" + "red/SPEC.md",
        "[spec](../../sha" + "red/STYLE.md)",
        "the sha" + "red/SPEC file",
    ],
    ids=["relative", "link", "path"],
)
def test_an_outside_reference_is_found(line: str) -> None:
    assert outside_references("f.md", f"ok\n{line}\n") == [f"f.md:2: {line}"]


def test_a_citation_without_a_heading_is_missing() -> None:
    reference = "# Reference\n\n## §1 What it is\n\n### §2 Architecture\n\n§3 in prose\n"
    assert reference_sections(reference) == {1, 2}
    assert cited_sections("SPEC §2, §3") - reference_sections(reference) == {3}
