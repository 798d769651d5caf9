"""Errors raised by the SDK: one base class, one subclass per family of problem codes.

The server answers errors as RFC 9457 ``application/problem+json`` documents carrying a stable
``code`` and the ``request_id`` of its log lines (SPEC §6). :func:`from_response` turns any error
response (a problem document or not) into the exception of its status family, so callers catch
families and branch on ``code`` when they need to.

Hierarchy::

    WorkloadError                  status, code, detail, request_id, errors, response,
    │                              idempotency_key (of the write that failed)
    ├── APIStatusError             the server answered with an error status
    │   ├── InvalidRequest         400 invalid_json, invalid_argument, invalid_definition,
    │   │                              invalid_cursor, idempotency_key_required,
    │   │                              workflow_id_mismatch
    │   ├── Unauthenticated        401 unauthenticated
    │   ├── Forbidden              403 forbidden
    │   ├── NotFound               404 workflow_not_found, version_not_found, run_not_found,
    │   │                              task_not_found, not_found (an approval, a draft, a route)
    │   ├── MethodNotAllowed       405 method_not_allowed
    │   ├── Conflict               409 workflow_exists, idempotency_key_reused, run_finished
    │   │   ├── LeaseLost          409 lease_lost: a worker's lease is gone (reason)
    │   │   ├── ApprovalChanged    409 approval_changed: the digest is not the arguments'
    │   │   ├── ApprovalDecided    409 approval_decided: no longer pending
    │   │   ├── DraftChanged       409 draft_changed: the hash is not the definition's
    │   │   └── DraftNotReady      409 draft_not_ready: not ready (or approved, to reject)
    │   ├── PreconditionFailed     412 precondition_failed
    │   ├── PayloadTooLarge        413 payload_too_large (a body over 1 MiB, progress over
    │   │                              64 KiB)
    │   ├── UnsupportedMediaType   415 unsupported_media_type
    │   ├── TooManyRequests        429 too_many_requests: too many waiting claims or event
    │   │                              streams at once (retry_after: seconds, from Retry-After)
    │   └── ServerError            5xx internal
    │       └── Unavailable        503 unavailable
    ├── APIResponseValidationError a success response that is not the documented resource
    ├── APIConnectionError         no response: connecting, sending or receiving failed
    │   └── APITimeoutError        no response within the timeout
    ├── WaitTimeout                wait_for_run's (or runs.result's) deadline passed (also a
    │                              TimeoutError)
    ├── DraftWaitTimeout           drafts.wait's deadline passed (also a TimeoutError)
    ├── RunFailed                  runs.result: the run finished failed (run)
    └── RunCanceled                runs.result: the run finished canceled (run)

A code with a class of its own (``lease_lost``, ``approval_changed`` …) raises that class only
with its family's status; any other code raises its family's class.

A write that failed without a response (:class:`APIConnectionError`) may or may not have been
applied: retry it with the same ``idempotency_key`` (carried by the exception) and the server
answers the original outcome instead of writing twice.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import httpx

from workload_sdk.models import ProblemItem

if TYPE_CHECKING:
    from workload_sdk.models import Draft, Run

__all__ = [
    "APIConnectionError",
    "APIResponseValidationError",
    "APIStatusError",
    "APITimeoutError",
    "ApprovalChanged",
    "ApprovalDecided",
    "Conflict",
    "DraftChanged",
    "DraftNotReady",
    "DraftWaitTimeout",
    "Forbidden",
    "InvalidRequest",
    "LeaseLost",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "PreconditionFailed",
    "RunCanceled",
    "RunFailed",
    "ServerError",
    "TooManyRequests",
    "Unauthenticated",
    "Unavailable",
    "UnsupportedMediaType",
    "WaitTimeout",
    "WorkloadError",
    "from_response",
]

_MAX_DETAIL_CHARS = 500


class WorkloadError(Exception):
    """Base of every error the SDK raises.

    Attributes:
        status: The HTTP status of the response, or None when there was no response.
        code: The problem's stable ``code`` (e.g. ``run_not_found``), or None when the response
            carried none (or there was no response).
        detail: A human-readable explanation.
        request_id: The server's request id (problem body or ``X-Request-ID``), for its logs.
        errors: Validation problems (``path``, ``message``), e.g. every problem of a rejected
            workflow definition; empty otherwise.
        response: The HTTP response, when there was one.
        idempotency_key: The ``Idempotency-Key`` the failed write was sent with (None for
            reads). Pass it back to retry the same write safely.
    """

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
        errors: Sequence[ProblemItem] = (),
        response: httpx.Response | None = None,
        idempotency_key: str | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.detail = detail
        self.request_id = request_id
        self.errors = list(errors)
        self.response = response
        self.idempotency_key = idempotency_key
        super().__init__(self._message())

    def _message(self) -> str:
        head = " ".join(str(part) for part in (self.status, self.code) if part is not None)
        text = f"{head}: {self.detail}" if head else self.detail
        if self.request_id:
            text += f" (request_id {self.request_id})"
        return text


class APIStatusError(WorkloadError):
    """The server answered with an error status (the base of every status family)."""

    status: int


class InvalidRequest(APIStatusError):
    """400: the request can never succeed as sent (body, query, cursor or headers)."""


class Unauthenticated(APIStatusError):
    """401: no token, or a token the server does not know."""


class Forbidden(APIStatusError):
    """403: the token is valid but its role may not do this (a viewer writing)."""


class NotFound(APIStatusError):
    """404: the workflow, version, run, task, approval, draft or route does not exist."""


class MethodNotAllowed(APIStatusError):
    """405: the route exists but not with this method."""


class Conflict(APIStatusError):
    """409: the request conflicts with the current state (exists, key reused, run finished)."""


class LeaseLost(Conflict):
    """409 ``lease_lost``: a heartbeat or report came too late or under another lease.

    Nothing was written. The worker must stop working on the attempt and drop its result.

    Attributes:
        reason: Why: ``expired`` (no heartbeat in time), ``canceled`` (the run or task was
            canceled), ``finished`` (already completed or failed), ``timed_out`` (the task's
            timeout passed) or ``unknown`` (no such attempt, or another attempt's token). A
            plain string, so that reasons added by newer servers still arrive.
    """

    def __init__(self, detail: str, *, reason: str = "unknown", **fields: Any) -> None:
        self.reason = reason
        super().__init__(detail, **fields)


class ApprovalChanged(Conflict):
    """409 ``approval_changed``: the digest sent is not that of the approval's arguments.

    Nothing was decided. Read the approval again and decide on what it shows now.
    """


class ApprovalDecided(Conflict):
    """409 ``approval_decided``: the approval is no longer pending (decided, expired, canceled).

    Nothing changed; read the approval for its status and who decided it.
    """


class DraftChanged(Conflict):
    """409 ``draft_changed``: the hash sent is not that of the draft's definition.

    Nothing was created. Read the draft again and decide on what it shows now.
    """


class DraftNotReady(Conflict):
    """409 ``draft_not_ready``: the draft cannot be approved (or rejected) in its status.

    Approving needs a ``ready`` draft (an approved one is returned as it is); rejecting needs
    a ``ready`` or ``invalid`` one.
    """


class PreconditionFailed(APIStatusError):
    """412: ``If-Match`` named a revision the run no longer has; nothing was written."""


class PayloadTooLarge(APIStatusError):
    """413: the request body is over the server's limit (1 MiB; a heartbeat's progress 64 KiB)."""


class UnsupportedMediaType(APIStatusError):
    """415: the request body is not ``application/json``."""


class TooManyRequests(APIStatusError):
    """429: the caller holds as many waiting requests (claims, event streams) as it may.

    Attributes:
        retry_after: The seconds the server's ``Retry-After`` asks to wait (None if absent or
            not a number of seconds).
    """

    def __init__(self, detail: str, **fields: Any) -> None:
        super().__init__(detail, **fields)
        response = fields.get("response")
        raw = None if response is None else response.headers.get("retry-after", "").strip()
        # ASCII digits only: str.isdigit() is true of "²", which int() refuses.
        digits = raw is not None and re.fullmatch(r"[0-9]{1,6}", raw) is not None
        self.retry_after: int | None = int(raw) if digits and raw else None


class ServerError(APIStatusError):
    """5xx: the server failed; the body says nothing about internals."""


class Unavailable(ServerError):
    """503: the service cannot serve now (store or lock lost, shutting down); try later."""


class APIResponseValidationError(WorkloadError):
    """A success response whose body is not the resource the API documents."""


class APIConnectionError(WorkloadError):
    """No response: connecting, sending or receiving failed (a write may have been applied)."""


class APITimeoutError(APIConnectionError):
    """No response within the client's timeout (a write may have been applied)."""


class WaitTimeout(WorkloadError, TimeoutError):
    """``wait_for_run`` (``runs.wait``, ``runs.result``) gave up before the run finished.

    ``run`` is the last state seen.
    """

    def __init__(self, detail: str, *, run: Run) -> None:
        super().__init__(detail)
        self.run = run


class RunFailed(WorkloadError):
    """``runs.result``: the run finished ``failed``; ``run`` is the run (its tasks say why)."""

    def __init__(self, detail: str, *, run: Run) -> None:
        super().__init__(detail)
        self.run = run


class RunCanceled(WorkloadError):
    """``runs.result``: the run finished ``canceled``; ``run`` is the run."""

    def __init__(self, detail: str, *, run: Run) -> None:
        super().__init__(detail)
        self.run = run


class DraftWaitTimeout(WorkloadError, TimeoutError):
    """``drafts.wait`` gave up while the draft was generating; ``draft`` is the last state seen."""

    def __init__(self, detail: str, *, draft: Draft) -> None:
        super().__init__(detail)
        self.draft = draft


_CLASS_BY_STATUS: Mapping[int, type[APIStatusError]] = {
    400: InvalidRequest,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    412: PreconditionFailed,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    429: TooManyRequests,
    503: Unavailable,
}


# Codes with a class of their own, by (status, code): another status keeps its family's class.
_CLASS_BY_CODE: Mapping[tuple[int, str], type[APIStatusError]] = {
    (409, "approval_changed"): ApprovalChanged,
    (409, "approval_decided"): ApprovalDecided,
    (409, "draft_changed"): DraftChanged,
    (409, "draft_not_ready"): DraftNotReady,
}


def _error_class(status: int, code: str | None) -> type[APIStatusError]:
    if code is not None and (status, code) in _CLASS_BY_CODE:
        return _CLASS_BY_CODE[status, code]
    cls = _CLASS_BY_STATUS.get(status)
    if cls is not None:
        return cls
    return ServerError if status >= 500 else APIStatusError


def _body(response: httpx.Response) -> tuple[Any, str]:
    """The parsed JSON body (None if not JSON) and the text of a response."""
    try:
        text = response.text
    except httpx.ResponseNotRead:
        return None, ""
    try:
        return response.json(), text
    except (ValueError, RecursionError):
        return None, text


def _problem_items(raw: Any) -> list[ProblemItem]:
    if not isinstance(raw, list):
        return []
    items = []
    for item in raw:
        if isinstance(item, Mapping) and isinstance(item.get("message"), str):
            items.append(ProblemItem(path=str(item.get("path", "")), message=item["message"]))
    return items


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def from_response(
    response: httpx.Response, *, idempotency_key: str | None = None
) -> APIStatusError:
    """The exception of an error response, chosen by its status family.

    A problem document gives ``code``, ``detail``, ``request_id`` and ``errors``; any other body
    (a proxy's HTML page, plain text, an empty body) still gives the right class, with the
    body's text (or the status phrase) as ``detail`` and ``X-Request-ID`` as ``request_id``.

    Args:
        response: An HTTP response with a 4xx or 5xx status.
        idempotency_key: The key the request was sent with, if it was a write.

    Returns:
        An :class:`APIStatusError` subclass (not raised).
    """
    status = response.status_code
    body, text = _body(response)
    problem: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "error"
    detail = (
        _text(problem.get("detail"))
        or _text(problem.get("title"))
        or (None if problem else text.strip()[:_MAX_DETAIL_CHARS])
        or phrase
    )
    code = _text(problem.get("code"))
    fields: dict[str, Any] = {
        "status": status,
        "code": code,
        "request_id": _text(problem.get("request_id")) or response.headers.get("x-request-id"),
        "errors": _problem_items(problem.get("errors")),
        "response": response,
        "idempotency_key": idempotency_key,
    }
    if status == 409 and code == "lease_lost":
        return LeaseLost(detail, reason=_text(problem.get("reason")) or "unknown", **fields)
    return _error_class(status, code)(detail, **fields)
