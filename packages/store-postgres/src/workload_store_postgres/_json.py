r"""JSON written to PostgreSQL by orjson (ADR 0038), the stdlib's encoder where orjson refuses.

Every JSONB parameter the store sends — a run's input, an event's data, the JSON row arrays a
commit writes (``jsonb_to_recordset``) — is encoded by :func:`dumps`, set on each pooled
connection (:func:`use_on`). PostgreSQL parses the text into JSONB, so only its meaning counts,
not its bytes: orjson writes UTF-8 where the stdlib escaped to ASCII, ``1e-7`` where it wrote
``1e-07``, and a datetime as its ``isoformat()``, all the same values once stored.

Where orjson refuses a value — an integer beyond 64 bits, a string with a lone surrogate, a key
that is not a string, a dataclass (passed through, so it refuses it) — the stdlib encodes it as
before, so whatever stored before stores the same now, and whatever PostgreSQL refused (a lone
surrogate, ``\u0000``) it still refuses. A NaN or an infinity, which orjson writes as ``null``
and the stdlib as a token PostgreSQL refuses, reaches no parameter: every value stored comes
from a strict parse (``strict_loads``, a provider's answer without constants) or is checked by
``json_problems``.

Reading stays with the stdlib: orjson reads an integer beyond 64 bits as a float, which would
change a stored value.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

import orjson
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb, set_json_dumps

__all__ = ["dumps", "stdlib_dumps", "use_on"]

_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS


def _plain(value: Any) -> Any:
    """What a value the encoders do not know is in JSON (else ``TypeError``)."""
    if isinstance(value, Jsonb):
        return value.obj
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"no JSON form for {type(value).__name__}")


def stdlib_dumps(value: Any) -> str:
    """``value`` as the stdlib's compact JSON text: the store's encoder before ADR 0038."""
    return json.dumps(value, default=_plain, separators=(",", ":"))


def dumps(value: Any) -> bytes | str:
    """``value`` as JSON text: orjson's bytes, else the stdlib's compact text."""
    try:
        return orjson.dumps(value, default=_plain, option=_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError included
        return stdlib_dumps(value)


def use_on(conn: AsyncConnection[Any]) -> None:
    """Encode the JSON and JSONB parameters of ``conn`` with :func:`dumps`."""
    set_json_dumps(dumps, conn)
