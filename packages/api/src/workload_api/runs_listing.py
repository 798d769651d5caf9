"""GET /api/v1/runs: its query parameters, how they are read, and the handler (SPEC §6).

Runs list newest first unless ``order=asc``; ``created_after`` and ``created_before`` are
exclusive bounds on ``created_at``, RFC 3339 times with an offset. Anything else (an unknown
order, a time without an offset, a date PostgreSQL or Python cannot hold) is a 400
``invalid_argument``, never a 500; a cursor carries the order and filters it was issued for.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from starlette.datastructures import QueryParams
from starlette.responses import Response

from workload_api.handlers import Call, QueryParam
from workload_api.jsonresponse import JSONResponse
from workload_api.problems import HttpProblem
from workload_domain.definition import WORKFLOW_ID_PATTERN
from workload_domain.run_listing import RunOrder
from workload_domain.statuses import RunStatus

__all__ = ["RUNS_QUERY", "list_runs", "parse_instant"]

_WORKFLOW_ID = re.compile(WORKFLOW_ID_PATTERN)
# RFC 3339 §5.6 date-time, ASCII digits only. A space where the offset's sign belongs is read
# as "+": that is what an unencoded "+" in a query string decodes to.
# Any number of fraction digits (RFC 3339's 1*DIGIT) within the parameter's 35 characters.
_DATE_TIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:([Zz])|([+ -])([0-9]{2}):([0-9]{2}))"
)
_TIME_TEXT_MAX = 35
_LAST = datetime.max.replace(tzinfo=UTC)
_TIME_RULE = "an RFC 3339 time with an offset, such as 2026-12-01T09:30:00Z"

RUNS_QUERY = (
    QueryParam(
        "workflow_id",
        {"type": "string", "pattern": WORKFLOW_ID_PATTERN},
        "only this workflow's runs",
    ),
    QueryParam(
        "status",
        {"type": "string", "enum": [s.value for s in RunStatus]},
        "only runs in this status",
    ),
    QueryParam(
        "order",
        {"type": "string", "enum": [o.value for o in RunOrder], "default": RunOrder.DESC.value},
        "desc: newest first (by created_at, then run_id); asc: oldest first",
    ),
    QueryParam(
        "created_after",
        {"type": "string", "format": "date-time", "maxLength": 35},
        "only runs created strictly after this RFC 3339 time",
    ),
    QueryParam(
        "created_before",
        {"type": "string", "format": "date-time", "maxLength": 35},
        "only runs created strictly before this RFC 3339 time",
    ),
)


def _bad(detail: str) -> HttpProblem:
    return HttpProblem(400, "invalid_argument", detail)


def parse_instant(text: str, *, round_up: bool = False) -> datetime | None:
    """The UTC instant an RFC 3339 date-time names, to the microsecond; None if it names none.

    Digits past the microsecond are dropped, or (``round_up``) carried up to the next
    microsecond: as an exclusive upper bound that selects exactly the stored times (which have
    microseconds) below the given one. A leap second (``23:59:60``) is the instant after the
    minute's last second, which no stored time falls in. Longer than 35 characters: None.
    """
    found = _DATE_TIME.fullmatch(text) if len(text) <= _TIME_TEXT_MAX else None
    if found is None:
        return None
    year, month, day, hour, minute, second = (int(found.group(i)) for i in range(1, 7))
    digits = found.group(7) or ""
    micros, rest = int(digits[:6].ljust(6, "0")), digits[6:].strip("0")
    leap = 1 if second == 60 else 0
    offset = timedelta(0)
    if found.group(8) is None:
        hours, minutes = int(found.group(10)), int(found.group(11))
        if hours > 23 or minutes > 59:
            return None
        offset = timedelta(hours=hours, minutes=minutes)
        if found.group(9) == "-":
            offset = -offset
    try:
        local = datetime(year, month, day, hour, minute, second - leap, micros, timezone(offset))
        instant = local.astimezone(UTC) + timedelta(seconds=leap)
    except (ValueError, OverflowError):  # day 31 of a 30-day month, year 0, past 9999 in UTC
        return None
    if round_up and rest and instant < _LAST:
        instant += timedelta(microseconds=1)
    return instant


def _instant(query: QueryParams, name: str, *, round_up: bool) -> datetime | None:
    raw = query.get(name)
    if raw is None:
        return None
    instant = parse_instant(raw, round_up=round_up)
    if instant is None:
        raise _bad(f"{name} must be {_TIME_RULE}")
    return instant


async def list_runs(call: Call) -> Response:
    """``GET /api/v1/runs``: a page of runs in the order and window asked for."""
    cursor, limit = call.page_args(*(p.name for p in RUNS_QUERY))
    query = call.request.query_params
    workflow_id = query.get("workflow_id")
    if workflow_id is not None and not _WORKFLOW_ID.fullmatch(workflow_id):
        raise _bad("workflow_id is not a valid workflow id")
    status = call.enum_query("status", RunStatus)
    try:
        order = RunOrder(query.get("order", RunOrder.DESC.value))
    except ValueError:
        raise _bad("order must be asc or desc") from None
    page = await call.usecases.runs.list(
        workflow_id,
        status,
        cursor,
        limit,
        order=order,
        created_after=_instant(query, "created_after", round_up=False),
        created_before=_instant(query, "created_before", round_up=True),
    )
    return JSONResponse(page)
