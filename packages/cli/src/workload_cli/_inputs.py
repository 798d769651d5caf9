"""Reading what the user gives: definition files, ``--input`` values, idempotency keys."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from workload_cli._session import UsageError

__all__ = ["check_idempotency_key", "read_json_file", "read_object_file", "run_input"]

_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # The server refuses duplicate keys too; saying so here names the file.
    keys = [key for key, _ in pairs]
    duplicates = sorted({key for key in keys if keys.count(key) > 1})
    if duplicates:
        raise ValueError(f"duplicate key {duplicates[0]!r}")
    return dict(pairs)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse(text: str, source: str) -> Any:
    try:
        return json.loads(
            text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant
        )
    except ValueError as exc:
        raise UsageError(f"{source} is not valid JSON: {exc}") from None


def _read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None


def read_json_file(path: str) -> Any:
    """The JSON document of a file (``-``: standard input)."""
    return _parse(_read_text(path), "standard input" if path == "-" else path)


def read_object_file(path: str) -> dict[str, Any]:
    """A file holding one JSON object, such as a workflow definition."""
    document = read_json_file(path)
    if not isinstance(document, dict):
        raise UsageError(f"{path} must hold a JSON object (a workflow definition)")
    return document


def run_input(value: str | None) -> dict[str, Any] | None:
    """The run input of ``--input``: a JSON object, ``@file`` or ``@-`` (standard input)."""
    if value is None:
        return None
    at_file = value.startswith("@")
    document = read_json_file(value[1:]) if at_file else _parse(value, "--input")
    if not isinstance(document, dict):
        raise UsageError("--input must be a JSON object")
    return document


def check_idempotency_key(key: str | None) -> str | None:
    """``--idempotency-key`` as given, once checked (1-255 visible ASCII characters)."""
    if key is not None and not _IDEMPOTENCY_KEY.fullmatch(key):
        raise UsageError("--idempotency-key must be 1-255 visible ASCII characters")
    return key
