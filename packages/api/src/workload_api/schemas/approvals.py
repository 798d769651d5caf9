"""The approval resources: an approval and a person's decision (SPEC §11)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from workload_api.schemas._common import JsonObject, _Out

__all__ = [
    "Approval",
    "DecisionRequest",
]


class Approval(_Out):
    """A person's approval of one tool call of an agent, bound to its exact arguments (§11)."""

    approval_id: str
    run_id: str
    task_key: str
    tool: str
    tool_call_id: str | None
    arguments: JsonObject
    arguments_digest: str = Field(description='"sha256:" + hex of the canonical JSON arguments')
    status: str = Field(description='"pending", "approved", "rejected", "expired" or "canceled"')
    requested_at: datetime
    expires_at: datetime
    decided_by: str | None = Field(description="the deciding principal (never its token)")
    decided_at: datetime | None
    comment: str | None


class DecisionRequest(BaseModel):
    """A decision on a pending approval, for exactly the arguments it names."""

    model_config = ConfigDict(strict=True, extra="forbid")

    decision: Literal["approve", "reject"]
    arguments_digest: str = Field(max_length=80)
    comment: str | None = Field(default=None, max_length=4096)
