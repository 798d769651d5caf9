"""No module of the packages grows past 450 lines without saying why it is one file.

The rule (docs/architecture.md, "Module size"): a module under ``packages/*/src`` has at most
:data:`MAX_LINES` lines, or its module docstring has a line starting with :data:`REASON` — a
catalogue that reads best as one table, say. Anything else is split by responsibility.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 450
REASON = "One file because"


def has_reason(source: str) -> bool:
    """Whether the module docstring of ``source`` has a line starting with :data:`REASON`."""
    try:
        docstring = ast.get_docstring(ast.parse(source))
    except SyntaxError:
        return False
    return docstring is not None and any(
        line.strip().startswith(REASON) for line in docstring.splitlines()
    )


def too_long(path: Path) -> bool:
    """Whether ``path`` has more than :data:`MAX_LINES` lines and no reason to."""
    source = path.read_text(encoding="utf-8")
    return len(source.splitlines()) > MAX_LINES and not has_reason(source)


def package_modules() -> list[Path]:
    return sorted(ROOT.glob("packages/*/src/**/*.py"))


def test_no_module_of_the_packages_is_too_long_without_its_reason() -> None:
    modules = package_modules()
    assert len(modules) > 100  # the glob found the packages' sources
    offenders = sorted(str(path.relative_to(ROOT)) for path in modules if too_long(path))
    assert offenders == [], (
        f"over {MAX_LINES} lines without a line starting {REASON!r} in the module docstring: "
        "split it by responsibility (or say why it is one file)"
    )


def _module(tmp_path: Path, docstring: str, lines: int, tail: str = "") -> Path:
    head = f'"""{docstring}"""\n\n'
    filler = lines - len(head.splitlines()) - len(tail.splitlines())
    body = "".join(f"X{i} = {i}\n" for i in range(filler))
    path = tmp_path / "module.py"
    path.write_text(head + body + (tail + "\n" if tail else ""), encoding="utf-8")
    assert len(path.read_text(encoding="utf-8").splitlines()) == lines
    return path


def test_the_limit_is_450_lines(tmp_path: Path) -> None:
    assert not too_long(_module(tmp_path, "A module.", 450))
    assert too_long(_module(tmp_path, "A module.", 451))
    assert too_long(_module(tmp_path, "A module.", 5000))


def test_a_reason_line_in_the_module_docstring_lifts_it(tmp_path: Path) -> None:
    reason = "A catalogue.\n\nOne file because it is a table of codes.\n"
    assert not too_long(_module(tmp_path, reason, 451))
    assert not too_long(_module(tmp_path, "One file because the table is one.", 900))
    indented = "A catalogue.\n\n    One file because it is a table.\n"
    assert not too_long(_module(tmp_path, indented, 451))


def test_a_reason_anywhere_else_does_not(tmp_path: Path) -> None:
    # in the middle of a line, in another case, in a comment, in a later string, or missing
    assert too_long(_module(tmp_path, "A table. One file because it is one.", 451))
    assert too_long(_module(tmp_path, "A table.\n\none file because it is one.", 451))
    assert too_long(_module(tmp_path, "A table.", 451, tail="# One file because it is one."))
    assert too_long(_module(tmp_path, "A table.", 451, tail='"""One file because it is."""'))
    assert too_long(_module(tmp_path, "", 451))


def test_a_module_without_a_docstring_or_that_does_not_parse_has_no_reason() -> None:
    assert not has_reason("x = 1\n")
    assert not has_reason('x = 1\n"""One file because it is late."""\n')
    assert not has_reason('"""One file because\n')  # unterminated: a syntax error
    assert has_reason('"""One file because it is one table."""\n')
    assert has_reason('# a comment first\n"""One file because it is one table."""\n')
