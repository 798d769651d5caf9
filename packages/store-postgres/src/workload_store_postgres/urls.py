"""Database URLs: checked before anything connects, so a typo is a configuration error."""

from __future__ import annotations

import psycopg
from psycopg.conninfo import conninfo_to_dict

__all__ = ["check_database_url"]


def check_database_url(url: str) -> str:
    """``url`` if libpq can parse it (a ``postgresql://`` URL or ``key=value`` pairs).

    Raises:
        ValueError: it cannot be parsed; the message says why, without repeating the URL
            (it may hold a password).
    """
    try:
        conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        reason = _unquoted(str(exc).splitlines()[0]) if str(exc) else "unparseable"
        raise ValueError(
            f"not a PostgreSQL connection URL or key=value string ({reason})"
        ) from None
    return url


def _unquoted(message: str) -> str:
    """The ``message`` of libpq, up to the first part of the URL it quotes (maybe a password).

    Quoted single punctuation (``"="``, ``"]"``) is libpq's own and stays; from the first other
    quote on, the message is cut: a quote inside the URL would misalign any finer split.
    """
    parts = message.split('"')
    kept = [parts[0]]
    for index in range(1, len(parts), 2):
        quoted = parts[index]
        if index + 1 >= len(parts) or len(quoted) != 1 or quoted.isalnum():
            return '"'.join(kept) + '"…"'
        kept += [quoted, parts[index + 1]]
    return '"'.join(kept)
