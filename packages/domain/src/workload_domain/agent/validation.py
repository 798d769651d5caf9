"""JSON Schema for tool arguments and structured output, with ``jsonschema-rs``.

Schemas come from workflow definitions (users) and instances from models (untrusted), so:
references are never retrieved (``offline``: a ``$ref`` to a URL or a file is a problem of the
definition, not a request the service makes), regular expressions run on a backtracking-limited
engine, and at most :data:`MAX_REPORTED` errors are reported. Compiled validators are cached by
the schema's canonical JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jsonschema_rs

from workload_domain.jsonvalues import JsonObject, canonical_json, pointer

__all__ = ["MAX_REPORTED", "CompiledSchema", "SchemaError", "compile_schema"]

MAX_REPORTED = 10


class SchemaError(Exception):
    """A schema that cannot be used: invalid under its meta-schema, or an unresolvable $ref."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True, eq=False)
class CompiledSchema:
    """A schema ready to validate instances."""

    _validator: Any

    def errors(self, instance: Any) -> list[str]:
        """Why ``instance`` does not satisfy the schema: ``"/path: message"`` (empty: valid)."""
        found: list[str] = []
        for error in self._validator.iter_errors(instance):
            where = pointer(error.instance_path) or "/"
            found.append(f"{where}: {_first_line(error.message)}")
            if len(found) == MAX_REPORTED:
                break
        return found


def compile_schema(schema: JsonObject) -> CompiledSchema:
    """Compile ``schema`` (raises :class:`SchemaError`)."""
    return _compile(canonical_json(schema))


@lru_cache(maxsize=1024)
def _compile(document: bytes) -> CompiledSchema:

    try:
        validator = jsonschema_rs.validator_for(json.loads(document), offline=True)
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
        raise SchemaError(_first_line(str(exc))) from None
    return CompiledSchema(validator)


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "invalid"
    return line if len(line) <= limit else line[: limit - 1] + "…"
