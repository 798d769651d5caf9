"""What a handler's return value or exception is reported as: complete, or fail with an error."""

from __future__ import annotations

import json
from dataclasses import dataclass

from workload_worker._context import JsonObject
from workload_worker.errors import NonRetryableError

__all__ = [
    "INVALID_OUTPUT",
    "MAX_CODE_CHARS",
    "MAX_MESSAGE_CHARS",
    "WORKER_SHUTDOWN",
    "Completed",
    "Failed",
    "Outcome",
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
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
        json.dumps(result, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return Failed(
            INVALID_OUTPUT,
            _bounded(f"the handler's output is not JSON: {exc}", MAX_MESSAGE_CHARS),
            retryable=False,
        )
    return Completed(result)


def failure_of(exc: Exception) -> Failed:
    """The report of a handler's exception: its class name, its message, retryable or not."""
    code = type(exc).__name__
    if isinstance(exc, NonRetryableError) and exc.code:
        code = exc.code
    message = str(exc) or type(exc).__name__
    return Failed(
        _bounded(code, MAX_CODE_CHARS),
        _bounded(message, MAX_MESSAGE_CHARS),
        retryable=not isinstance(exc, NonRetryableError),
    )


def shutdown_failure(grace_seconds: float | None = None) -> Failed:
    """The report of an attempt whose worker stopped before its handler finished."""
    after = "" if grace_seconds is None else f" after a grace period of {grace_seconds:g} s"
    return Failed(WORKER_SHUTDOWN, f"the worker stopped{after}", retryable=True)
