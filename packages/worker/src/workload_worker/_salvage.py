"""A claim's answer the SDK could not read whole: the attempts in it that it can read.

The server hands a claim's attempts out before it answers: an answer refused whole (one item
out of step with this worker's SDK, say) would leave every attempt in it leased to this worker
and run by nobody, until each lease ran out — counted against its task's ``max_attempts``
(SPEC §10). The items that validate are run; one that does not, but names its attempt and lease
token, is failed (retryable) at once, with what was wrong with it; the rest expire.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

from pydantic import ValidationError

from workload_sdk import APIResponseValidationError, AsyncClient, ClaimedAttempt, WorkloadError

__all__ = ["UNREADABLE_CLAIM", "Salvaged", "fail_unreadable", "salvage"]

logger = logging.getLogger("workload.worker")

UNREADABLE_CLAIM = "unreadable_claim"
"""The error code of an attempt whose claim item this worker could not read."""


@dataclass(frozen=True, slots=True)
class Salvaged:
    """The readable attempts of a claim's answer, and the unreadable ones that can be failed."""

    attempts: list[ClaimedAttempt]
    unreadable: list[tuple[str, str, str]]
    """``(attempt_id, lease_token, why)`` of each item that does not validate."""


def salvage(error: APIResponseValidationError) -> Salvaged | None:
    """What can be read of a claim's answer ``error`` refused; None when it has no items."""
    response = error.response
    if response is None:
        return None
    try:
        body = response.json()
    except (ValueError, RecursionError):
        return None
    items = body.get("attempts") if isinstance(body, dict) else None
    if not isinstance(items, list):
        return None
    readable: list[ClaimedAttempt] = []
    unreadable: list[tuple[str, str, str]] = []
    for item in items:
        try:
            readable.append(ClaimedAttempt.model_validate(item))
        except ValidationError as exc:
            attempt_id = item.get("attempt_id") if isinstance(item, dict) else None
            token = item.get("lease_token") if isinstance(item, dict) else None
            if isinstance(attempt_id, str) and isinstance(token, str):
                fields = sorted({str(e["loc"][0]) for e in exc.errors() if e["loc"]})
                why = "the worker could not read its claim item: " + (
                    ", ".join(fields[:10]) or "(the item)"
                )
                unreadable.append((attempt_id, token, why))
    return Salvaged(readable, unreadable)


async def fail_unreadable(client: AsyncClient, unreadable: tuple[str, str, str]) -> None:
    """Fail an attempt whose claim item could not be read (retryable: another worker may)."""
    attempt_id, token, why = unreadable
    logger.warning("attempt %s: %s; failed (retryable)", attempt_id, why)
    with contextlib.suppress(WorkloadError):  # its lease runs out otherwise, as before
        await client.attempts.fail(attempt_id, token, UNREADABLE_CLAIM, why, retryable=True)
