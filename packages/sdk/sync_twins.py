"""Derive the SDK's blocking modules from their async sources (ADR 0035): one source, two twins.

Each ``src/workload_sdk/_async_*.py`` in :data:`SOURCES` is the one source of a pair; its blocking
twin (``_resources.py`` from ``_async_resources.py`` …) is written by this rewrite, token by
token: ``async`` and ``await`` go, and every name in :data:`RENAMES` (or of the two regular
families: ``AsyncX`` is ``X``, module ``_async_x`` is ``_x``) becomes its blocking name, in code,
in docstrings and in comments alike (``await x`` and ``async for``/``async with`` read in prose
lose their ``await``/``async`` too). The derived files are not tracked (``.gitignore``): the build
hook (``hatch_build.py``) writes them on every build, editable ones (``uv sync``) included, and
``python packages/sdk/sync_twins.py`` writes them by hand. ``tests/sdk/test_sync_twins.py``
fails when one on disk differs from what its source derives.

Only the standard library: hatchling loads this file by path, and the tests import it the same
way.
"""

from __future__ import annotations

import io
import re
import sys
import tokenize
from pathlib import Path

__all__ = ["PACKAGE", "RENAMES", "SOURCES", "derive", "derived", "twin", "write"]

PACKAGE = Path("src/workload_sdk")
"""Where the twins are, relative to the SDK's project folder."""

SOURCES = (
    "_async_approval_resources.py",
    "_async_client.py",
    "_async_pagination.py",
    "_async_resources.py",
    "_async_run_resources.py",
    "_async_run_task_resources.py",
    "_async_sender.py",
    "_async_worker_resources.py",
)
"""The async sources in :data:`PACKAGE`; each one's blocking twin is its name derived
(``_async_resources.py``: ``_resources.py``)."""

RENAMES = {
    # The names that do not follow the two regular families.
    "AsyncSender": "SyncSender",
    "asyncio": "time",  # only ``asyncio.sleep`` is used: ``time.sleep``
    "asynccontextmanager": "contextmanager",
    "aiter_lines": "iter_lines",  # httpx.Response
    "aread": "read",
    "aclose": "close",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
    "StopAsyncIteration": "StopIteration",
}
"""The async names whose blocking twins are not the name with ``Async``/``_async`` read away."""

HEADER = (
    "# Derived from {source} by packages/sdk/sync_twins.py at build time (ADR 0035): do not\n"
    "# edit; edit {source} and run `uv run python packages/sdk/sync_twins.py`.\n"
)

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PROSE_AWAIT = re.compile(r"\bawait\s+|\basync\s+(?=for\b|with\b)")
# A name of the derived code that still reads async: a rename is missing.
_LEFT = re.compile(
    r".*(?:async|Async|await).*|__a(?:iter|next|enter|exit)__|a(?:iter_|read|close)\w*"
)
_PROSE = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", -1)}


def _name(word: str) -> str:
    if word in RENAMES:
        return RENAMES[word]
    if word.startswith("Async") and word[5:6].isupper():
        return word.removeprefix("Async")
    if word.startswith("_async_"):
        return word.removeprefix("_async")
    return word


def twin(source: str) -> str:
    """The file name of a source's blocking twin (``_async_client.py``: ``_client.py``)."""
    return _name(source.removesuffix(".py")) + ".py"


def _prose(text: str) -> str:
    return _WORD.sub(lambda m: _name(m.group()), _PROSE_AWAIT.sub("", text))


def derive(source: str, name: str = "<source>") -> str:
    """The blocking twin of an async module's text.

    Raises:
        ValueError: a name of the result still reads async (a rename :data:`RENAMES` lacks).
    """
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    out: list[str] = []
    at = 0  # where the text not yet copied starts
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        begin = starts[token.start[0] - 1] + token.start[1]
        end = starts[token.end[0] - 1] + token.end[1]
        if token.type == tokenize.NAME and token.string in {"async", "await"}:
            out.append(source[at:begin])
            # The space before ``await`` stays, the one after it goes: ``(await x)`` is ``(x)``.
            at = end + len(source[end:]) - len(source[end:].lstrip(" "))
            continue
        if token.type == tokenize.NAME:
            text = _name(token.string)
        elif token.type in _PROSE:
            text = _prose(token.string)
        else:
            continue
        out.append(source[at:begin] + text)
        at = end
    out.append(source[at:])
    result = "".join(out)
    left = sorted(
        {
            token.string
            for token in tokenize.generate_tokens(io.StringIO(result).readline)
            if token.type == tokenize.NAME and _LEFT.fullmatch(token.string)
        }
    )
    if left:
        raise ValueError(f"{name}: the derived module still names {', '.join(left)}")
    return result


def derived(project: Path) -> dict[Path, str]:
    """Every blocking module's text, from the async sources under ``project`` (the SDK's folder)."""
    package = project / PACKAGE
    return {
        package / twin(source): HEADER.format(source=source)
        + derive((package / source).read_text(encoding="utf-8"), source)
        for source in SOURCES
    }


def write(project: Path) -> list[Path]:
    """Write every blocking module (only those that changed); return them all."""
    texts = derived(project)
    for path, text in texts.items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    return sorted(texts)


if __name__ == "__main__":
    for written in write(Path(__file__).resolve().parent):
        sys.stdout.write(f"{written}\n")
