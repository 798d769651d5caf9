"""RFC 9457 problem details: the one place where errors become HTTP statuses.

Domain errors carry a category and a stable code; :data:`STATUS_BY_CATEGORY` maps categories to
statuses, so the HTTP layer never matches message strings. Errors that only exist at the HTTP
layer (authentication, media type, body size, method) are :class:`HttpProblem`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from http import HTTPStatus
from types import MappingProxyType
from typing import Any

from workload_api.jsonresponse import JSONResponse
from workload_domain.errors import ErrorCategory, Problem, WorkloadError

__all__ = [
    "MAX_TEXT",
    "PROBLEM_MEDIA_TYPE",
    "STATUS_BY_CATEGORY",
    "HttpProblem",
    "problem_for",
    "problem_response",
    "problem_type",
]

PROBLEM_MEDIA_TYPE = "application/problem+json"

STATUS_BY_CATEGORY: Mapping[ErrorCategory, int] = MappingProxyType(
    {
        ErrorCategory.INVALID_INPUT: 400,
        ErrorCategory.TOO_LARGE: 413,
        ErrorCategory.NOT_FOUND: 404,
        ErrorCategory.CONFLICT: 409,
        ErrorCategory.REVISION_CONFLICT: 409,
        ErrorCategory.PRECONDITION_FAILED: 412,
        ErrorCategory.TOO_MANY_REQUESTS: 429,
        ErrorCategory.UNAVAILABLE: 503,
        ErrorCategory.INTERNAL: 500,
    }
)


def problem_type(code: str) -> str:
    """The problem ``type`` URI of a code (a URN: stable, and it resolves nowhere)."""
    return f"urn:workload:problem:{code}"


class HttpProblem(Exception):
    """A problem raised by the HTTP layer itself."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        problems: Sequence[Problem] = (),
        headers: Mapping[str, str] | None = None,
        extensions: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.problems = tuple(problems)
        self.headers = dict(headers or {})
        self.extensions = dict(extensions or {})


def problem_for(error: WorkloadError) -> HttpProblem:
    """The HTTP problem of a domain error (internal details never reach the client).

    An error that says when to try again (``retry_after``) is answered with ``Retry-After``.
    """
    status = STATUS_BY_CATEGORY[error.category]
    headers = {} if error.retry_after is None else {"Retry-After": str(error.retry_after)}
    if status >= 500:
        detail = (
            "the service is unavailable, try again later"
            if status == 503
            else "an internal error occurred; it was logged with this request id"
        )
        return HttpProblem(status, error.code, detail, headers=headers)
    problems = getattr(error, "problems", ())
    return HttpProblem(
        status,
        error.code,
        error.message,
        problems=problems,
        headers=headers,
        extensions=error.extensions(),
    )


MAX_TEXT = 1024
"""The longest ``detail``, ``path`` or ``message`` a problem carries: messages quote client input
in bounded form (``errors.quoted``), and this cap holds even where a path is made of it."""


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_TEXT else f"{text[:MAX_TEXT]}… ({len(text)} characters)"


def problem_response(problem: HttpProblem, request_id: str) -> JSONResponse:
    """Render a problem as ``application/problem+json``."""
    body: dict[str, Any] = {
        "type": problem_type(problem.code),
        "title": HTTPStatus(problem.status).phrase,
        "status": problem.status,
        "detail": _bounded(problem.detail),
        "code": problem.code,
        "request_id": request_id,
    }
    body.update({k: _bounded(v) for k, v in problem.extensions.items()})
    if problem.problems:
        body["errors"] = [
            {"path": _bounded(p.path), "message": _bounded(p.message)} for p in problem.problems
        ]
    return JSONResponse(
        body, status_code=problem.status, headers=problem.headers, media_type=PROBLEM_MEDIA_TYPE
    )
