"""Values on a page, bounded: each one and all of them together (ADR 0026; issue 33, D3).

A task's output may be up to 1 MiB of JSON, and a run may have many tasks: shown whole, forty
of them made a 40 MiB page. A page shows each value (an output, an error, a run's input, a
step's request or response, an attempt's error message) as its first :data:`VALUE_BYTES` of
indented JSON, and all its values together up to about :data:`PAGE_BYTES` of HTML; past that a
value is not shown at all. Either way the page says so and links the whole value as JSON
(``console/raw.py``).

Only what is shown is serialized: the JSON is written piece by piece
(``json.JSONEncoder.iterencode``) and the writing stops at the bound, so a 1 MiB output costs
what its first 16 KiB cost, not a megabyte of ``json.dumps``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

__all__ = ["PAGE_BYTES", "VALUE_BYTES", "Preview", "Previews", "bounded_json"]

VALUE_BYTES = 16 * 1024
"""The most of one value a page shows (bytes of its indented JSON)."""
PAGE_BYTES = 256 * 1024
"""The most of all its values a page shows (bytes of their HTML, once escaped)."""


@dataclass(frozen=True, slots=True)
class Preview:
    """What a page shows of a value: its start, escaped, and whether there is more."""

    html: Markup
    cut: bool
    """The value is longer than what is shown (or not shown at all)."""
    hidden: bool
    """Nothing of it is shown: the page's bound was reached before it."""


def bounded_json(value: Any, limit: int, *, ascii_only: bool = False) -> tuple[str, bool]:
    """The value's indented JSON (keys sorted), cut after ``limit`` bytes; whether it was cut.

    Written piece by piece and abandoned at the bound (a cut never splits a character).
    """
    encoder = json.JSONEncoder(indent=2, sort_keys=True, ensure_ascii=ascii_only)
    parts: list[str] = []
    size = 0
    for chunk in encoder.iterencode(value):
        encoded = chunk.encode("utf-8", "surrogatepass")
        if size + len(encoded) > limit:
            parts.append(encoded[: limit - size].decode("utf-8", "ignore"))
            return "".join(parts), True
        parts.append(chunk)
        size += len(encoded)
    return "".join(parts), False


class Previews:
    """The values of one page: each bounded, and all of them together (one per render)."""

    def __init__(self, value_bytes: int = VALUE_BYTES, page_bytes: int = PAGE_BYTES) -> None:
        self._value_bytes = value_bytes
        self._left = page_bytes

    def json(self, value: Any, *, exact: bool = False) -> Preview:
        """A JSON value, indented; ``exact``: every non-ASCII character escaped (as the CLI)."""
        if self._left <= 0:
            return Preview(Markup(""), cut=True, hidden=True)
        text, cut = bounded_json(value, min(self._value_bytes, self._left), ascii_only=exact)
        return self._shown(text, cut)

    def text(self, value: str) -> Preview:
        """Free text (an error's message), as it is."""
        if self._left <= 0:
            return Preview(Markup(""), cut=True, hidden=True)
        limit = min(self._value_bytes, self._left)
        encoded = value.encode("utf-8", "surrogatepass")
        cut = len(encoded) > limit
        return self._shown(encoded[:limit].decode("utf-8", "ignore") if cut else value, cut)

    def _shown(self, text: str, cut: bool) -> Preview:
        html = escape(text)
        self._left -= len(html.encode("utf-8", "surrogatepass"))
        return Preview(html, cut=cut, hidden=False)
