"""Loads the named queries of the package's SQL files (package data) once, on first use.

``queries.sql`` holds the store's queries; ``cluster.sql`` those of a replica's membership
(SPEC §16). Names are unique across both.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import LiteralString

__all__ = ["query", "statement_name"]

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


_FILES = ("queries.sql", "cluster.sql")


@functools.cache
def _all() -> dict[str, str]:
    found: dict[str, str] = {}
    for file in _FILES:
        text = resources.files(__package__).joinpath(file).read_text(encoding="utf-8")
        parts = _NAME.split(text)
        # parts: [preamble, name1, body1, name2, body2, ...]
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in found:
                raise RuntimeError(f"the query name {name!r} is defined twice")
            found[name] = body.strip()
    return found


def query(name: str) -> LiteralString:
    """The SQL text of the named query (a static string from the package's own file)."""
    # The text comes from a file in this package, never from input: a literal in all but type.
    text: LiteralString = _all()[name]  # type checkers treat LiteralString as str here
    return text


@functools.cache
def _names() -> dict[str, str]:
    return {body: name for name, body in _all().items()}


def statement_name(sql: str) -> str:
    """What a statement is called in traces: its named query, else its first keyword."""
    name = _names().get(sql)
    if name is not None:
        return name
    words = sql.split(None, 1)
    return words[0].upper() if words else "statement"
