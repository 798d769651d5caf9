"""Request building for the human-in-the-loop decisions (SPEC §11): approvals and drafts.

Decisions and ``create_draft`` are writes sent with an ``Idempotency-Key``, as every POST write.
Nothing here does I/O (see :mod:`workload_sdk._requests`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workload_sdk._requests import _PREFIX, ApiRequest, _listing, _segment, _write
from workload_sdk.models import Approval, Draft, Page

__all__ = [
    "approve_draft",
    "create_draft",
    "decide_approval",
    "get_approval",
    "get_draft",
    "list_approvals",
    "list_drafts",
    "reject_draft",
]


def _approval(approval_id: str) -> str:
    return f"{_PREFIX}/approvals/{_segment(approval_id)}"


def _draft(draft_id: str) -> str:
    return f"{_PREFIX}/drafts/{_segment(draft_id)}"


def list_approvals(
    status: str | None, limit: int | None, cursor: str | None
) -> ApiRequest[Page[Approval]]:
    """``GET /approvals?status=``: one page of approvals, optionally of one status."""
    return _listing(
        f"{_PREFIX}/approvals", Page[Approval].model_validate, limit, cursor, status=status
    )


def get_approval(approval_id: str) -> ApiRequest[Approval]:
    """``GET /approvals/{approval_id}``."""
    return ApiRequest("GET", _approval(approval_id), Approval.model_validate)


def decide_approval(
    approval_id: str,
    decision: str,
    arguments_digest: str,
    comment: str | None,
    idempotency_key: str | None,
) -> ApiRequest[Approval]:
    """``POST /approvals/{approval_id}/decision``: approve or reject exactly these arguments."""
    body: dict[str, Any] = {"decision": decision, "arguments_digest": arguments_digest}
    if comment is not None:
        body["comment"] = comment
    return _write(
        f"{_approval(approval_id)}/decision", Approval.model_validate, idempotency_key, json=body
    )


def create_draft(
    prompt: str,
    workflow_id: str | None,
    model: str,
    script: Sequence[Mapping[str, Any]] | None,
    idempotency_key: str | None,
) -> ApiRequest[Draft]:
    """``POST /drafts``: ask a model for a workflow definition (answered 202, generating)."""
    body: dict[str, Any] = {"prompt": prompt, "model": model}
    if workflow_id is not None:
        body["workflow_id"] = workflow_id
    if script is not None:
        body["script"] = [dict(turn) for turn in script]
    return _write(f"{_PREFIX}/drafts", Draft.model_validate, idempotency_key, json=body)


def list_drafts(limit: int | None, cursor: str | None) -> ApiRequest[Page[Draft]]:
    """``GET /drafts``: one page of drafts."""
    return _listing(f"{_PREFIX}/drafts", Page[Draft].model_validate, limit, cursor)


def get_draft(draft_id: str) -> ApiRequest[Draft]:
    """``GET /drafts/{draft_id}``."""
    return ApiRequest("GET", _draft(draft_id), Draft.model_validate)


def approve_draft(
    draft_id: str, definition_hash: str, idempotency_key: str | None
) -> ApiRequest[Draft]:
    """``POST /drafts/{draft_id}/approve``: make exactly this definition a version."""
    return _write(
        f"{_draft(draft_id)}/approve",
        Draft.model_validate,
        idempotency_key,
        json={"definition_hash": definition_hash},
    )


def reject_draft(draft_id: str, idempotency_key: str | None) -> ApiRequest[Draft]:
    """``POST /drafts/{draft_id}/reject`` (no body)."""
    return _write(f"{_draft(draft_id)}/reject", Draft.model_validate, idempotency_key)
