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


_TEMPLATES = (
    'missing "=" after ',
    'end of string reached when looking for matching "]" in IPv6 host address in URI: ',
)
"""The beginnings of libpq's messages whose own quotes come before the part of the URL."""


def _unquoted(message: str) -> str:
    """The ``message`` of libpq, up to the first part of the URL it quotes (maybe a password).

    Only a message known to quote something of its own first keeps that; any other is cut at
    its first quote (a quote or punctuation inside the URL would mislead a finer split).
    """
    for template in _TEMPLATES:
        if message.startswith(template):
            return f'{template}"…"'
    head, quote, _ = message.partition('"')
    return f'{head}"…"' if quote else message
