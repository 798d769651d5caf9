"""What every SDK model shares: the lenient base model, pages and problem objects."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

__all__ = [
    "ErrorObject",
    "Page",
    "ProblemItem",
]


T = TypeVar("T")

JsonObject = dict[str, Any]


class _Resource(BaseModel):
    """Base of every resource: immutable, tolerant of fields added by newer servers."""

    model_config = ConfigDict(extra="allow", frozen=True)


class ErrorObject(_Resource):
    """Why a task or an attempt failed."""

    code: str
    message: str
    retryable: bool


class ProblemItem(_Resource):
    """One validation problem of a rejected request: where (a JSON Pointer) and what."""

    path: str
    message: str


class Page(_Resource, Generic[T]):
    """One page of a listing; pass ``next_cursor`` back as ``cursor`` for the next one."""

    items: list[T]
    next_cursor: str | None
