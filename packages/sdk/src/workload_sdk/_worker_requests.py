"""Request building for the worker protocol (SPEC §10) and what operators watch of it.

Claims and reports are POSTs fenced by the lease, not by an ``Idempotency-Key``: a report
repeated with the same token and body is answered the same 200, anything late is 409
``lease_lost``. Nothing here does I/O (see :mod:`workload_sdk._requests`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workload_sdk._requests import _PREFIX, ApiRequest, _listing, _segment
from workload_sdk.models import Attempt, ClaimedAttempt, Lease, Page, QueueStats, WorkerInfo
from workload_sdk.models._workers import Claim, QueueList

__all__ = [
    "CLAIM_READ_MARGIN",
    "claim_attempts",
    "complete_attempt",
    "fail_attempt",
    "heartbeat_attempt",
    "list_queues",
    "list_workers",
]

CLAIM_READ_MARGIN = 10.0
"""Seconds a claim's read timeout exceeds its ``wait_seconds``: the server answers an empty
claim only after the whole wait, so a read timeout of just the wait would cut it off."""


def _attempt(attempt_id: str) -> str:
    return f"{_PREFIX}/attempts/{_segment(attempt_id)}"


def _claimed(data: Any) -> list[ClaimedAttempt]:
    return Claim.model_validate(data).attempts


def claim_attempts(
    worker_id: str,
    queues: Sequence[str],
    actions: Sequence[str],
    max_attempts: int,
    wait_seconds: float,
) -> ApiRequest[list[ClaimedAttempt]]:
    """``POST /workers/{worker_id}/claim``: up to ``max_attempts``, waiting for work.

    The read timeout is ``wait_seconds`` plus :data:`CLAIM_READ_MARGIN`.
    """
    if not queues or not actions:
        raise ValueError("a claim names at least one queue and one action")
    return ApiRequest(
        "POST",
        f"{_PREFIX}/workers/{_segment(worker_id)}/claim",
        _claimed,
        json={
            "queues": list(queues),
            "actions": list(actions),
            "max_attempts": max_attempts,
            # 20.0 goes as 20: a whole number of seconds is an integer in JSON.
            "wait_seconds": int(wait_seconds) if float(wait_seconds).is_integer() else wait_seconds,
        },
        read_timeout=wait_seconds + CLAIM_READ_MARGIN,
    )


def heartbeat_attempt(
    attempt_id: str, lease_token: str, progress: Mapping[str, Any] | None
) -> ApiRequest[Lease]:
    """``POST /attempts/{attempt_id}/heartbeat``: renew the lease (and record progress)."""
    body: dict[str, Any] = {"lease_token": lease_token}
    if progress is not None:
        body["progress"] = dict(progress)
    return ApiRequest("POST", f"{_attempt(attempt_id)}/heartbeat", Lease.model_validate, json=body)


def complete_attempt(
    attempt_id: str, lease_token: str, output: Mapping[str, Any]
) -> ApiRequest[Attempt]:
    """``POST /attempts/{attempt_id}/complete``: the attempt succeeded with ``output``."""
    return ApiRequest(
        "POST",
        f"{_attempt(attempt_id)}/complete",
        Attempt.model_validate,
        json={"lease_token": lease_token, "output": dict(output)},
    )


def fail_attempt(
    attempt_id: str, lease_token: str, code: str, message: str, retryable: bool
) -> ApiRequest[Attempt]:
    """``POST /attempts/{attempt_id}/fail``: the attempt failed with an error object."""
    error = {"code": code, "message": message, "retryable": retryable}
    return ApiRequest(
        "POST",
        f"{_attempt(attempt_id)}/fail",
        Attempt.model_validate,
        json={"lease_token": lease_token, "error": error},
    )


def list_workers(limit: int | None, cursor: str | None) -> ApiRequest[Page[WorkerInfo]]:
    """``GET /workers``: one page of the workers the server has seen."""
    return _listing(f"{_PREFIX}/workers", Page[WorkerInfo].model_validate, limit, cursor)


def _queues(data: Any) -> list[QueueStats]:
    return QueueList.model_validate(data).items


def list_queues() -> ApiRequest[list[QueueStats]]:
    """``GET /queues``: every queue with work or history (not paged)."""
    return ApiRequest("GET", f"{_PREFIX}/queues", _queues)
