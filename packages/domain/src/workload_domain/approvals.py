"""Approvals of agents' tool calls (SPEC §11): a person decides before a tool runs.

An approval is bound to *exactly* the arguments the model asked for (``arguments_digest``), is
decided once, and is part of its run's history: it is written in the run's revision-checked
commits, with the events ``approval.requested`` … ``approval.canceled``. Its id is derived from
the call it guards (the attempt, the model step that asked, the call's position in it), so a
replayed agent loop finds the same approval instead of asking again.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from datetime import datetime

from workload_domain.jsonvalues import JsonObject, canonical_json, sha256_tag

__all__ = [
    "ApprovalRecord",
    "ApprovalStatus",
    "Decision",
    "approval_id",
    "arguments_digest",
]

_APPROVALS = uuid.UUID("5c0f7a1e-2b8d-4e36-9d4f-7a1b3c5e9f20")


class ApprovalStatus(enum.StrEnum):
    """Where an approval is: ``pending``, then decided once."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELED = "canceled"


class Decision(enum.StrEnum):
    """What a person decides."""

    APPROVE = "approve"
    REJECT = "reject"


def approval_id(run_id: str, task_key: str, attempt: int, model_step: int, index: int) -> str:
    """The id of the approval of call ``index`` of model step ``model_step`` (a UUIDv5)."""
    return str(uuid.uuid5(_APPROVALS, f"{run_id}/{task_key}/{attempt}/{model_step}/{index}"))


def arguments_digest(arguments: object) -> str:
    """``"sha256:" + hex`` of the canonical JSON of the arguments (as a definition's hash)."""
    return sha256_tag(canonical_json(arguments))


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    """One approval of one tool call."""

    approval_id: str
    run_id: str
    task_key: str
    attempt: int
    tool: str
    tool_call_id: str | None
    arguments: JsonObject
    arguments_digest: str
    status: ApprovalStatus
    requested_at: datetime
    expires_at: datetime
    decided_by: str | None = None
    decided_at: datetime | None = None
    comment: str | None = None
