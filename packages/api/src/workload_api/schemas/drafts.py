"""The draft resources: a generated workflow draft and its review (SPEC §11)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from workload_api.schemas._common import JsonObject, _Out
from workload_api.schemas.runs import Usage
from workload_domain.agent.spec import MAX_SCRIPT_TURNS, MODEL_PATTERN
from workload_domain.definition import WORKFLOW_ID_PATTERN

__all__ = [
    "ApproveDraftRequest",
    "CreateDraftRequest",
    "Draft",
]


class Draft(_Out):
    """A workflow written by a model from a prompt, waiting for a person's approval (§11)."""

    draft_id: str
    status: str = Field(description='"generating", "ready", "invalid", "approved" or "rejected"')
    prompt: str
    model: str
    workflow_id: str | None
    definition: JsonObject | None = Field(description="the normalized definition (ready)")
    definition_hash: str | None
    problems: list[JsonObject] = Field(
        description='every problem of every answer: {"answer", "path", "message"}'
    )
    usage: Usage
    created_by: str
    created_at: datetime
    updated_at: datetime
    version: int | None = Field(description="once approved: the version it became")


# The turns are checked by the use case (each problem at its /script/i); the document says
# what it accepts: objects with exactly one string "content".
_SCRIPT_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {
            "type": "array",
            "maxItems": MAX_SCRIPT_TURNS,
            "items": {
                "type": "object",
                "properties": {"content": {"type": "string"}},
                "required": ["content"],
                "additionalProperties": False,
            },
        },
        {"type": "null"},
    ]
}


class CreateDraftRequest(BaseModel):
    """The body of POST /drafts."""

    model_config = ConfigDict(strict=True, extra="forbid")

    prompt: str = Field(min_length=1, max_length=100_000)
    workflow_id: str | None = Field(default=None, pattern=WORKFLOW_ID_PATTERN)
    model: str = Field(default="mock", pattern=MODEL_PATTERN)
    script: Annotated[list[JsonObject] | None, WithJsonSchema(_SCRIPT_SCHEMA)] = Field(
        default=None,
        max_length=MAX_SCRIPT_TURNS,
        description='mock model only: turns {"content": "…"} (the runtime reads at most 4)',
    )


class ApproveDraftRequest(BaseModel):
    """The body of POST /drafts/{draft_id}/approve."""

    model_config = ConfigDict(strict=True, extra="forbid")

    definition_hash: str = Field(max_length=80)
