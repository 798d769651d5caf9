"""Loads the named queries of ``queries.sql`` (shipped as package data) once, on first use."""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import LiteralString

__all__ = ["query", "statement_name"]

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


@functools.cache
def _all() -> dict[str, str]:
    text = resources.files(__package__).joinpath("queries.sql").read_text(encoding="utf-8")
    parts = _NAME.split(text)
    # parts: [preamble, name1, body1, name2, body2, ...]
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


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
