"""Request bodies checked against their models: every problem, each with a JSON Pointer."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from workload_domain.errors import InvalidArgument, Problem
from workload_domain.jsonvalues import json_problems, pointer

__all__ = ["parse", "storable"]

M = TypeVar("M", bound=BaseModel)


def parse(model: type[M], body: Any) -> M:
    """``body`` as ``model`` (strict: no coercion, no unknown fields).

    Raises:
        InvalidArgument: with every problem found (``unknown field`` for an extra one).
    """
    try:
        return model.model_validate(body if body is not None else {})
    except ValidationError as exc:
        problems = tuple(
            Problem(
                pointer(p for p in e["loc"] if isinstance(p, str | int)),
                "unknown field" if e["type"] == "extra_forbidden" else e["msg"],
            )
            for e in exc.errors(include_url=False, include_input=False)
        )
        raise InvalidArgument("the request body is invalid", problems) from None


def storable(value: Any, *where: str | int) -> None:
    """Refuse a JSON value PostgreSQL cannot store (NUL characters, lone surrogates, depth).

    Raises:
        InvalidArgument: with the problems and their paths.
    """
    problems = tuple(json_problems(value, where))
    if problems:
        raise InvalidArgument("the value cannot be stored", problems)
