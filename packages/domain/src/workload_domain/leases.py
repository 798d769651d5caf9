"""Leases of remote attempts (SPEC §10): fencing by token, and why a report is refused.

A claim hands a worker a random ``lease_token``; the store keeps only its digest. Every
heartbeat, complete and fail presents the attempt id and the token, and succeeds only while the
attempt is ``running`` under that token, before its lease and its start-to-close deadline
passed. :func:`lease_lost` says why not, so that a late, duplicate or foreign report can never
overwrite a newer fact.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime

from workload_domain.agent.journal import StepRecord, StepStatus
from workload_domain.records import AttemptRecord
from workload_domain.statuses import AttemptStatus

__all__ = [
    "LEASE_EXPIRED",
    "SCHEDULE_TO_START_TIMED_OUT",
    "LeaseLostReason",
    "LeasedAttempt",
    "LeasedToolCall",
    "RunPosition",
    "lease_lost",
    "lease_renewed_since",
    "presents_token",
    "token_digest",
    "tool_call_lease_lost",
]

SCHEDULE_TO_START_TIMED_OUT = "schedule_to_start_timed_out"
"""Error code of a queued attempt that waited longer than its schedule-to-start timeout."""
LEASE_EXPIRED = "lease_expired"
"""Error code of a running attempt whose worker stopped heartbeating."""


class LeaseLostReason(enum.StrEnum):
    """Why a worker's report is refused (the ``reason`` of a 409 ``lease_lost``)."""

    EXPIRED = "expired"
    CANCELED = "canceled"
    FINISHED = "finished"
    TIMED_OUT = "timed_out"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class RunPosition:
    """Where a run stood when one of its attempts was read with it (in the same read)."""

    revision: int
    last_sequence: int
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class LeasedAttempt:
    """An attempt found by its id, with its run and the digest of its lease token.

    ``run`` is the run's position read together with the attempt (None: not read), from which
    the run's runner may bring its state up to date without reading the run again.
    """

    run_id: str
    attempt: AttemptRecord
    token_digest: str | None
    run: RunPosition | None = None


@dataclass(frozen=True, slots=True)
class LeasedToolCall:
    """An agent's remote tool call found by its step id, with its lease token's digest."""

    step: StepRecord
    token_digest: str | None
    cancel_requested: bool = False
    """Its run's cancel was requested: the call's worker is told ``canceled`` (SPEC §10)."""


def token_digest(token: str) -> str:
    """The digest a store keeps of a lease token (SHA-256, hex): never the token itself."""
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def presents_token(leased: LeasedAttempt | LeasedToolCall | None, token: str) -> bool:
    """Whether ``token`` is the lease token of ``leased`` (compared in constant time)."""
    if leased is None or leased.token_digest is None:
        return False
    return hmac.compare_digest(leased.token_digest, token_digest(token))


def lease_lost(leased: LeasedAttempt | None, token: str, now: datetime) -> LeaseLostReason | None:
    """Why ``token`` does not hold the lease of ``leased`` at ``now`` (None: it does)."""
    if leased is None or not presents_token(leased, token):
        return LeaseLostReason.UNKNOWN
    attempt = leased.attempt
    status = attempt.status
    if status is AttemptStatus.RUNNING:
        if attempt.timeout_at is not None and attempt.timeout_at <= now:
            return LeaseLostReason.TIMED_OUT
        if attempt.lease_expires_at is not None and attempt.lease_expires_at <= now:
            return LeaseLostReason.EXPIRED
        return None
    return _ENDED.get(status, LeaseLostReason.FINISHED)


def lease_renewed_since(stored: AttemptRecord, ended: AttemptRecord) -> bool:
    """Whether ``ended``, a lease's expiry decided on an older read, ends a lease renewed since.

    A heartbeat renews a lease without a new revision of its run, so a commit's revision check
    cannot see it: the lease reaper may read a lease that ran out, a heartbeat that found it
    held (at its own time, before the end) commit next, and the reaper's commit end what the
    heartbeat's answer keeps. A store refuses such a commit as a revision conflict, judging by
    the lease as stored when it writes (``stored``): an attempt it holds ``running`` whose lease
    runs past the time ``ended`` says it expired. The reaper reads the run again and decides
    nothing.
    """
    return (
        ended.status is AttemptStatus.INTERRUPTED
        and ended.error is not None
        and ended.error.code == LEASE_EXPIRED
        and stored.status is AttemptStatus.RUNNING
        and stored.lease_expires_at is not None
        and ended.finished_at is not None
        and stored.lease_expires_at > ended.finished_at
    )


_ENDED = {
    AttemptStatus.CANCELED: LeaseLostReason.CANCELED,
    AttemptStatus.TIMED_OUT: LeaseLostReason.TIMED_OUT,
    AttemptStatus.INTERRUPTED: LeaseLostReason.EXPIRED,
    AttemptStatus.QUEUED: LeaseLostReason.UNKNOWN,
}


def tool_call_lease_lost(
    leased: LeasedToolCall | None, token: str, now: datetime
) -> LeaseLostReason | None:
    """Why ``token`` does not hold the lease of a remote tool call at ``now`` (None: it does).

    A tool call ends with its worker's report, or without it: its lease or deadline passed,
    or its agent attempt ended (``lease_end`` says which). A running call of a run whose
    cancel was requested is held no more: its agent is about to stop.
    """
    if leased is None or not presents_token(leased, token):
        return LeaseLostReason.UNKNOWN
    step = leased.step
    if step.status is StepStatus.RUNNING:
        if leased.cancel_requested:
            return LeaseLostReason.CANCELED
        if step.timeout_at is not None and step.timeout_at <= now:
            return LeaseLostReason.TIMED_OUT
        if step.lease_expires_at is not None and step.lease_expires_at <= now:
            return LeaseLostReason.EXPIRED
        return None
    if step.lease_end is not None:
        try:
            return LeaseLostReason(step.lease_end)
        except ValueError:
            return LeaseLostReason.FINISHED
    return LeaseLostReason.FINISHED
