"""Definitions as plain JSON, in the very form the server stores them (SPEC §3).

The server normalizes a definition before it hashes it: integral seconds are integers (``30``,
not ``30.0``), and every number is in the form PostgreSQL's JSONB gives back (``1e+20`` is the
integer ``100000000000000000000``, ``-0.0`` is ``0.0``). The builder produces that form itself,
so that what it builds is what the server answers, byte for byte and hash for hash. These rules
mirror ``workload_domain``'s compiler and ``jsonvalues``; ``tests/authoring`` compares the two.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, PydanticUserError

from workload_worker.errors import DefinitionError

__all__ = ["canonical_hash", "json_copy", "jsonb_value", "model_json", "normalized_number"]


def json_copy(value: Mapping[str, Any] | BaseModel, what: str) -> dict[str, Any]:
    """A JSON object's copy as it crosses the wire (a model dumped as JSON).

    Raises:
        DefinitionError: ``value`` is not a mapping or a model, or holds what JSON cannot.
    """
    if isinstance(value, BaseModel):
        value = model_json(value)
    if not isinstance(value, Mapping):
        raise DefinitionError(f"{what} must be a JSON object (a dict or a pydantic model)")
    try:
        copied: dict[str, Any] = json.loads(json.dumps(dict(value), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise DefinitionError(f"{what} is not JSON: {exc}") from None
    return copied


def schema_of(model: type[BaseModel], what: str) -> dict[str, Any]:
    """``model``'s JSON schema, as it crosses the wire.

    Raises:
        DefinitionError: pydantic cannot write the schema, or it holds what JSON cannot (an
            infinite default).
    """
    named = f"{what} {model.__name__}"
    try:
        schema = model.model_json_schema()
    except PydanticUserError as exc:  # PydanticInvalidForJsonSchema: a type with no schema
        raise DefinitionError(f"{named} has no JSON schema: {exc.message}") from None
    return json_copy(schema, f"{named}'s JSON schema")


def model_json(model: BaseModel) -> Any:
    """A model dumped as JSON the way its JSON Schema names it: by alias, sets in one order.

    ``model_json_schema()`` names a field by its alias, and so does the dump. A set has no order
    but is dumped as a list in its iteration order, which changes with the process's hash seed
    (``PYTHONHASHSEED``): its members are sorted by their canonical JSON, so that a definition
    built from a model hashes the same in every process.
    """
    dumped = model.model_dump(mode="json", by_alias=True)
    try:
        python = model.model_dump(mode="python", by_alias=True)
    except TypeError:  # a set of models or dataclasses (unhashable once dumped): as dumped
        return dumped
    return _sets_ordered(python, dumped)


def _sets_ordered(python: Any, dumped: Any) -> Any:
    """``dumped`` with each list that was a set in ``python`` (the same dump's Python form) sorted.

    The two forms are walked side by side; where they differ in shape (a serializer for JSON
    only), the JSON form is kept as it is.
    """
    if isinstance(python, set | frozenset) and isinstance(dumped, list):
        return sorted(dumped, key=_canonical)
    if isinstance(python, Mapping) and isinstance(dumped, dict) and len(python) == len(dumped):
        pairs = zip(python.values(), dumped.items(), strict=True)
        return {key: _sets_ordered(inner, value) for inner, (key, value) in pairs}
    if isinstance(python, list | tuple) and isinstance(dumped, list) and len(python) == len(dumped):
        return [_sets_ordered(inner, value) for inner, value in zip(python, dumped, strict=True)]
    return dumped


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def normalized_number(value: Any) -> Any:
    """An integral float as an integer (``30.0`` → ``30``); anything else as it is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def jsonb_value(value: Any) -> Any:
    """``value`` with its numbers as JSONB gives them back (no exponent, no negative zero)."""
    if isinstance(value, float):
        if value == 0:
            return 0.0
        text = repr(value)
        return int(Decimal(text)) if "e+" in text else value
    if isinstance(value, Mapping):
        return {key: jsonb_value(child) for key, child in value.items()}
    if isinstance(value, list | tuple):
        return [jsonb_value(child) for child in value]
    return value


def canonical_hash(document: Mapping[str, Any]) -> str:
    """``"sha256:" + hex`` of the canonical JSON (sorted keys, no spaces, UTF-8)."""
    canonical = json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")
    return "sha256:" + hashlib.sha256(canonical).hexdigest()
