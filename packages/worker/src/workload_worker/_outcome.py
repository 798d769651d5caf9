"""What a handler's return value or exception is reported as: complete, or fail with an error."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from workload_worker._context import JsonObject
from workload_worker.errors import NonRetryableError, WorkerError

__all__ = [
    "INVALID_OUTPUT",
    "MAX_CODE_CHARS",
    "MAX_MESSAGE_CHARS",
    "WORKER_SHUTDOWN",
    "Completed",
    "Failed",
    "Outcome",
    "clean_json",
    "error_code",
    "failure_of",
    "outcome_of",
    "shutdown_failure",
]

MAX_MESSAGE_CHARS = 2000
"""An error message is cut to this length (tracebacks go to the worker's log, not the API)."""
MAX_CODE_CHARS = 128
INVALID_OUTPUT = "invalid_output"
"""The code of a handler that returned something other than a JSON object (not retryable)."""
WORKER_SHUTDOWN = "worker_shutdown"
"""The code of an attempt cancelled because its worker stopped (retryable)."""


@dataclass(frozen=True, slots=True)
class Completed:
    """The handler returned ``output``: report ``complete``."""

    output: JsonObject


@dataclass(frozen=True, slots=True)
class Failed:
    """The attempt failed: report ``fail`` with this error object."""

    code: str
    message: str
    retryable: bool


Outcome = Completed | Failed


def _bounded(text: str, limit: int) -> str:
    return clean_text(text if len(text) <= limit else text[: limit - 1] + "…")


_REPLACEMENT = "\ufffd"
_MAX_DEPTH = 64


def clean_text(text: str) -> str:
    """``text`` as the server can store it: NUL and lone surrogates become U+FFFD.

    A file name read with ``surrogateescape``, or an exception quoting raw bytes, would
    otherwise make the report unsendable (not UTF-8) or refused (PostgreSQL holds no NUL).
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        if "\x00" not in text:
            return text
    return "".join(_REPLACEMENT if c == "\x00" or "\ud800" <= c <= "\udfff" else c for c in text)


def clean_json(value: Any, depth: int = _MAX_DEPTH) -> Any:
    """A copy of ``value`` the server can store (for progress, which is shown, not used).

    Strings and keys as :func:`clean_text`; non-finite numbers become null, values JSON has no
    form for their ``str``, and anything nested deeper than 64 levels ``"…"``.
    """
    if depth < 0:
        return "…"
    if isinstance(value, str):
        return clean_text(value)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_json(v, depth - 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v, depth - 1) for v in value]
    return clean_text(str(value))


def outcome_of(result: object) -> Outcome:
    """The report of a handler's return value: a JSON object completes, anything else fails."""
    if not isinstance(result, dict):
        kind = "None" if result is None else type(result).__name__
        return Failed(
            INVALID_OUTPUT,
            f"the handler returned {kind}, not a dict (the output must be a JSON object)",
            retryable=False,
        )
    try:
        # UTF-8 too: a lone surrogate (a file name read with surrogateescape) cannot be sent.
        json.dumps(result, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        return Failed(
            INVALID_OUTPUT,
            _bounded(f"the handler's output is not JSON: {exc}", MAX_MESSAGE_CHARS),
            retryable=False,
        )
    return Completed(result)


_NOT_IN_CODE = re.compile(r"[^A-Za-z0-9._:-]")


def error_code(text: str) -> str:
    """``text`` as an error code the API accepts (ADR 0023): 1-128 of ``A-Z a-z 0-9 . _ : -``.

    Any other character becomes ``_`` (a class named in another script stays recognisable by
    its length and punctuation); an empty code is ``error``.
    """
    return _NOT_IN_CODE.sub("_", text)[:MAX_CODE_CHARS] or "error"


def failure_of(exc: Exception) -> Failed:
    """The report of a handler's exception: its class name, its message, retryable or not."""
    code = type(exc).__name__
    explicit = getattr(exc, "code", None) if isinstance(exc, WorkerError) else None
    if isinstance(explicit, str) and explicit:  # NonRetryableError's, or a class's own
        code = explicit
    message = str(exc) or type(exc).__name__
    return Failed(
        error_code(code),
        _bounded(message, MAX_MESSAGE_CHARS),
        retryable=not isinstance(exc, NonRetryableError),
    )


def shutdown_failure(grace_seconds: float | None = None) -> Failed:
    """The report of an attempt whose worker stopped before its handler finished."""
    after = "" if grace_seconds is None else f" after a grace period of {grace_seconds:g} s"
    return Failed(WORKER_SHUTDOWN, f"the worker stopped{after}", retryable=True)
