r"""JSON values: canonical encoding, JSON Pointers, and the checks PostgreSQL JSONB imposes.

The domain accepts JSON objects from callers (task inputs, run inputs, executor outputs). They are
stored as JSONB, which cannot hold ``\\u0000`` and has no NaN or Infinity, so every such value is
checked here before anything is written. JSONB also gives some numbers back in another form
(``1e+20`` as ``100000000000000000000``, ``-0.0`` as ``0.0``): :func:`jsonb_value` puts a value in
the form JSONB gives back, so that what is hashed and answered before storage is what every
later read returns.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from workload_domain.errors import Problem, quoted

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_PROBLEMS",
    "DuplicateKey",
    "JsonObject",
    "canonical_json",
    "json_problems",
    "jsonb_value",
    "pointer",
    "sha256_tag",
    "storable",
    "strict_loads",
]

JsonObject = dict[str, Any]
"""A JSON object as Python holds it after ``json.loads``."""

MAX_JSON_DEPTH = 64
"""Deepest nesting of objects and arrays accepted inside a user-supplied JSON value."""

MAX_PROBLEMS = 100
"""The most problems :func:`json_problems` lists for one value (its answer's ``errors``)."""


def pointer(parts: Iterable[str | int]) -> str:
    """Return the JSON Pointer (RFC 6901) of a location; the root is ``""``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


class DuplicateKey(ValueError):
    """An object of the text names a key twice (which value was meant cannot be known)."""


def strict_loads(text: str | bytes) -> Any:
    """Parse JSON text strictly: no duplicate keys, no NaN or Infinity, no number out of range.

    The one parser of JSON that reaches a definition or a stored value, whoever wrote it (a
    request body, a model's answer). Nesting is bounded by Python's recursion limit only:
    check the value with :func:`json_problems`.

    Raises:
        DuplicateKey: an object names a key twice.
        ValueError: anything else that is not strict JSON.
        RecursionError: nested too deeply to parse.
    """
    return json.loads(
        text,
        object_pairs_hook=_no_duplicates,
        parse_constant=_no_constants,
        parse_float=_finite_float,
    )


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKey(f"duplicate object key {quoted(key)}")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):  # 1e400 parses to infinity: not storable JSON
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def canonical_json(value: Any) -> bytes:
    """Encode ``value`` canonically: sorted keys, no spaces, UTF-8, no NaN."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def sha256_tag(data: bytes) -> str:
    """Return ``"sha256:" + hex digest`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def json_problems(
    value: Any,
    path: tuple[str | int, ...] = (),
    *,
    max_depth: int = MAX_JSON_DEPTH,
    max_problems: int = MAX_PROBLEMS,
) -> list[Problem]:
    """List why ``value`` is not a storable JSON value (empty when it is).

    Rejects non-JSON types, non-string keys, NaN and infinities, the NUL character in strings and
    keys, and nesting deeper than ``max_depth``. At most ``max_problems`` are listed: a value
    with a problem in each of its million strings is refused with a hundred of them, not an
    answer seven times its size.
    """
    problems: list[Problem] = []
    # An explicit stack: hostile input must not reach Python's recursion limit.
    stack: list[tuple[Any, tuple[str | int, ...], int]] = [(value, path, 0)]
    while stack and len(problems) < max_problems:
        item, where, depth = stack.pop()
        if isinstance(item, bool) or item is None or isinstance(item, int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                problems.append(Problem(pointer(where), "numbers must be finite"))
            continue
        if isinstance(item, str):
            problem = _string_problem(item)
            if problem:
                problems.append(Problem(pointer(where), f"strings {problem}"))
            continue
        if isinstance(item, Mapping | list | tuple):
            if depth >= max_depth:
                problems.append(
                    Problem(pointer(where), f"nesting is deeper than {max_depth} levels")
                )
                continue
            if isinstance(item, Mapping):
                for key, child in item.items():
                    if not isinstance(key, str):
                        problems.append(Problem(pointer(where), "object keys must be strings"))
                        continue
                    problem = _string_problem(key)
                    if problem:
                        problems.append(Problem(pointer((*where, key)), f"keys {problem}"))
                    stack.append((child, (*where, key), depth + 1))
            else:
                for index, child in enumerate(item):
                    stack.append((child, (*where, index), depth + 1))
            continue
        problems.append(Problem(pointer(where), f"{type(item).__name__} is not a JSON value"))
    del problems[max_problems:]
    problems.sort(key=lambda p: p.path)
    return problems


def _string_problem(text: str) -> str | None:
    if "\x00" in text:
        return "must not contain U+0000"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "must be valid Unicode (no lone surrogates)"
    return None


def jsonb_value(value: Any) -> Any:
    """``value`` as PostgreSQL's JSONB gives it back: the one form to hash, answer and store.

    JSONB keeps a number as ``numeric``, which has no exponent and no negative zero. So a float
    whose shortest repr has a positive exponent (``abs(x) >= 1e16``: always an integer) comes back
    as an integer, and ``-0.0`` as ``0.0``: such a float becomes that integer (the decimal its
    repr names, which is what JSONB stores: ``1e+20`` → ``100000000000000000000``, equal to it)
    or ``0.0``. Every other value comes back as it is: other floats (``1e-07`` is stored as
    ``0.0000001``, which parses to the same float), integers of any size, strings, booleans and
    null. The result is a copy; it is its own ``jsonb_value`` and survives JSONB unchanged, so
    its canonical JSON (and a hash of it) is the same before and after storage.

    ``value`` must be a checked JSON value (:func:`json_problems`): its nesting is bounded.
    """
    if isinstance(value, float):
        return _jsonb_float(value)
    if isinstance(value, Mapping):
        return {key: jsonb_value(child) for key, child in value.items()}
    if isinstance(value, list | tuple):
        return [jsonb_value(child) for child in value]
    return value


def _jsonb_float(value: float) -> float | int:
    if value == 0:
        return 0.0  # -0.0 too: numeric has no negative zero
    text = repr(value)
    if "e+" in text:  # 1e+20: numeric writes it out, and reads back as an integer
        return int(Decimal(text))
    return value


_REPLACEMENT = "\ufffd"


def storable(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """A copy of a JSON value that JSONB can hold, for values nobody validated (model output).

    NUL characters and lone surrogates become U+FFFD, non-finite numbers become null, and
    anything nested deeper than ``max_depth`` becomes the string ``"…"``. Numbers take the form
    JSONB gives back (:func:`jsonb_value`), so that a digest of a model's tool-call arguments
    is the digest of the arguments every read returns. Other valid values are returned
    unchanged (equal, not necessarily the same object).
    """
    if max_depth < 0:
        return "…"
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, float):
        return _jsonb_float(value) if math.isfinite(value) else None
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, Mapping):
        return {_clean(str(k)): storable(v, max_depth=max_depth - 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v, max_depth=max_depth - 1) for v in value]
    return _clean(str(value))


def _clean(text: str) -> str:
    if _string_problem(text) is None:
        return text
    return "".join(
        _REPLACEMENT if ch == "\x00" or "\ud800" <= ch <= "\udfff" else ch for ch in text
    )
