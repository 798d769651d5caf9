"""Loads the named queries of the package's SQL files (package data) once, on first use.

``queries.sql`` holds the store's queries; ``cluster.sql`` those of a replica's membership
(SPEC §16). Names are unique across both.

A block headed ``-- part: <name>`` is no query but a piece several share (the select list of
the runs listings, say): a line ``-- with part: <name>`` in a query stands for its text, so the
statement sent is the whole query and the piece is written once. A part is defined before the
queries that use it, in the same file; the comments that head it are not pasted.

Comment lines are for the reader of the file and are not sent: a statement is its SQL only,
so that it is ASCII (the file's comments use a dash or a section sign; psycopg encodes a
statement's text at every execution, and a text with one character past Latin-1 is stored and
encoded character by character: 2 % of a run's instructions for ``create_run`` and
``commit_run``, measured by callgrind), shorter, and starts with its first keyword (the
``db.operation.name`` of its span).

psycopg turns a statement's named placeholders into PostgreSQL's numbered ones at every
execution, and keeps the result only for texts of up to 4,096 bytes (a guard against the
ever-new texts ORMs generate). Ours are a fixed set; ``claim_attempts`` is longer (5,534 bytes),
so every claim parsed it again (150-190 µs a claim). Reading the files raises that limit to the
longest statement (:func:`_cache_every_statement`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from importlib import resources
from typing import LiteralString

from psycopg import _queries as psycopg_queries

__all__ = ["query", "statement_name"]

_HEAD = re.compile(r"^-- (name|part): (\w+)\s*$", re.MULTILINE)
_USE = re.compile(r"^-- with part: (\w+)[ \t]*$", re.MULTILINE)


_FILES = ("queries.sql", "cluster.sql")


@functools.cache
def _all() -> dict[str, str]:
    found: dict[str, str] = {}
    for file in _FILES:
        text = resources.files(__package__).joinpath(file).read_text(encoding="utf-8")
        for name, body in parse(text).items():
            if name in found:
                raise RuntimeError(f"the query name {name!r} is defined twice")
            found[name] = body
    _cache_every_statement(found.values())
    return found


def _cache_every_statement(statements: Iterable[str]) -> None:
    """Let psycopg keep its conversion of every statement of ours, however long.

    The limit is a module constant of psycopg's (``MAX_CACHED_STATEMENT_LENGTH``, read at each
    execution); it is only ever raised, never lowered, and stays psycopg's own if a version
    of psycopg no longer has it (``tests/store_postgres/test_queries.py`` says so then).
    """
    longest = max(len(sql.encode()) for sql in statements)
    limit = getattr(psycopg_queries, "MAX_CACHED_STATEMENT_LENGTH", None)
    if isinstance(limit, int) and limit < longest:
        psycopg_queries.MAX_CACHED_STATEMENT_LENGTH = longest


def parse(text: str) -> dict[str, str]:
    """The named queries of one file's ``text``, each with the parts it uses pasted in."""
    pieces = _HEAD.split(text)
    # pieces: [preamble, kind1, name1, body1, kind2, name2, body2, ...]
    found: dict[str, str] = {}
    parts: dict[str, str] = {}
    for kind, name, body in zip(pieces[1::3], pieces[2::3], pieces[3::3], strict=True):
        into, what = (parts, "part") if kind == "part" else (found, "query")
        if name in into:
            raise RuntimeError(f"the {what} name {name!r} is defined twice")
        sql = "\n".join(_without_comments(_with_parts(body, parts).strip().splitlines()))
        if not sql.isascii():
            raise RuntimeError(f"the {what} {name!r} has SQL that is not ASCII")
        into[name] = sql
    return found


def _without_comments(lines: list[str]) -> list[str]:
    """The lines that are not whole-line comments (``--`` first, after any indentation)."""
    return [line for line in lines if not line.lstrip().startswith("--")]


def _with_parts(body: str, parts: dict[str, str]) -> str:
    def paste(use: re.Match[str]) -> str:
        if use[1] not in parts:
            raise RuntimeError(f"the part {use[1]!r} is used before it is defined")
        return parts[use[1]]

    return _USE.sub(paste, body)


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
