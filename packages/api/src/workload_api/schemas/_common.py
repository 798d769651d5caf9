"""What every resource model shares: the base models, pages, errors and definitions."""

from __future__ import annotations

from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, WithJsonSchema

__all__ = [
    "DEFINITION_MARKER",
    "DefinitionDocument",
    "ErrorObject",
    "JsonObject",
    "Page",
]


T = TypeVar("T")

JsonObject = dict[str, Any]

DEFINITION_MARKER = "x-workload-definition"

DefinitionDocument = Annotated[
    dict[str, Any], WithJsonSchema({"type": "object", DEFINITION_MARKER: True})
]
"""A normalized definition; the OpenAPI document points it at the WorkflowDefinition schema."""


class _Out(BaseModel):
    # Resources are read from the domain's records by attribute (see resources.py).
    model_config = ConfigDict(frozen=True, from_attributes=True)


class ErrorObject(_Out):
    """Why an attempt or task failed."""

    code: str
    message: str
    retryable: bool


class Page(_Out, Generic[T]):
    """One page of a listing; pass ``next_cursor`` back as ``cursor`` for the next one."""

    items: list[T]
    next_cursor: str | None


class _In(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
