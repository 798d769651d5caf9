"""The approval and draft models (SPEC §11)."""

from __future__ import annotations

from datetime import datetime

from workload_sdk.models._common import JsonObject, _Resource
from workload_sdk.models._runs import Usage

__all__ = [
    "Approval",
    "Draft",
    "DraftProblem",
]


class Approval(_Resource):
    """A person's decision on one tool call of an agent, bound to its exact arguments (§11).

    ``arguments_digest`` is ``"sha256:"`` + the hex digest of the arguments' canonical JSON:
    a decision names it, so it applies only to the arguments that were shown. ``status``
    (``"pending"``, ``"approved"``, ``"rejected"``, ``"expired"`` or ``"canceled"``) is a
    plain string so that statuses added by newer servers still parse. ``decided_by`` is a
    stable principal id such as ``operator:3f9a1c0b2d4e``, never a token.
    """

    approval_id: str
    run_id: str
    task_key: str
    tool: str
    tool_call_id: str | None
    arguments: JsonObject
    arguments_digest: str
    status: str
    requested_at: datetime
    expires_at: datetime
    decided_by: str | None
    decided_at: datetime | None
    comment: str | None

    @property
    def is_pending(self) -> bool:
        """Whether the approval still waits for a decision."""
        return self.status == "pending"


class DraftProblem(_Resource):
    """One problem of one of the model's answers to a draft: which answer, where, what."""

    answer: int
    path: str
    message: str


class Draft(_Resource):
    """A workflow definition written by a model from a prompt, waiting for a person (§11).

    ``status`` is ``"generating"``, then ``"ready"`` (``definition`` and ``definition_hash``
    set) or ``"invalid"`` (no definition; ``problems`` says why), then ``"approved"``
    (``version`` set) or ``"rejected"``; a plain string so that statuses added by newer
    servers still parse. ``problems`` holds every problem of every answer, numbered by
    ``answer``. Approving names ``definition_hash``, so the version is exactly what was shown.
    """

    draft_id: str
    status: str
    prompt: str
    model: str
    workflow_id: str | None
    definition: JsonObject | None
    definition_hash: str | None
    problems: list[DraftProblem]
    usage: Usage
    created_by: str
    created_at: datetime
    updated_at: datetime
    version: int | None

    @property
    def is_generating(self) -> bool:
        """Whether the model is still writing it (``drafts.wait`` waits for the end)."""
        return self.status == "generating"
