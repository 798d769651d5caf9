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
    """Libpq's ``message`` without the parts of the URL it quotes (they may hold a password).

    Quoted punctuation (``"="``, ``"]"``) is libpq's own and stays.
    """
    parts = message.split('"')
    for index in range(1, len(parts), 2):  # the quoted ones, and what follows a quote left open
        if any(char.isalnum() for char in parts[index]):
            parts[index] = "…"
    return '"'.join(parts)
