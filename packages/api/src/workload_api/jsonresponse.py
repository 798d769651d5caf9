"""JSON responses rendered by orjson (ADR 0031), byte for byte what the stdlib rendered.

Starlette's :class:`~starlette.responses.JSONResponse` renders with ``json.dumps`` (compact
separators, UTF-8, no NaN). orjson writes the same bytes for the values an answer holds (strings,
integers within 64 bits, floats, lists, objects with string keys), except a float's exponent
(``1e-7`` where the stdlib wrote ``1e-07``, the same number). For whatever orjson does not take
as the stdlib would — an integer beyond 64 bits, a key that is not a string, a subclass of a
container, a date or a dataclass (passed through, so orjson refuses them) — the stdlib renders
it as before, so nothing that rendered before fails now. A NaN or an infinity, which the stdlib
refused (a 500), is ``null``: no answer holds one, since bodies and stored values are finite.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import JSONResponse as StdlibJSONResponse

__all__ = ["JSONResponse", "render_json"]

_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def render_json(content: Any) -> bytes | None:
    """The bytes of ``content`` by orjson, or None where it must go to the stdlib."""
    try:
        return orjson.dumps(content, option=_PASSTHROUGH)
    except TypeError:
        return None


class JSONResponse(StdlibJSONResponse):
    """Starlette's JSON response, rendered by orjson where orjson renders as the stdlib does."""

    def render(self, content: Any) -> bytes:
        """The body's bytes (orjson, else the stdlib)."""
        rendered = render_json(content)
        return super().render(content) if rendered is None else rendered
