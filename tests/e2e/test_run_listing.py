"""GET /api/v1/runs newest first, oldest first and within a creation window (SPEC §6, amended
2026-12-01), on both backends; cursors bound to the order and window; every malformed order or
time a 400 ``invalid_argument``, never a 500.
"""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.plugins.live_api import LiveApi

_keys = itertools.count()
RUNS = 201
QUICK = {"id": "quick", "tasks": [{"key": "a", "action": "mock"}]}
OTHER = {"id": "other", "tasks": [{"key": "a", "action": "mock"}]}


def post(client: httpx.Client, path: str, body: Any = None) -> dict[str, Any]:
    headers = {"Idempotency-Key": f"listing-{next(_keys)}"}
    response = (
        client.post(path, json=body, headers=headers)
        if body
        else client.post(path, headers=headers)
    )
    assert response.status_code in (201, 202), response.text
    answer: dict[str, Any] = response.json()
    return answer


def every_page(viewer: httpx.Client, **params: Any) -> tuple[list[str], int]:
    """Every run id of the listing, following ``next_cursor``, and the number of pages."""
    ids: list[str] = []
    pages = 0
    while True:
        response = viewer.get("/api/v1/runs", params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        ids.extend(run["run_id"] for run in body["items"])
        pages += 1
        if body["next_cursor"] is None:
            return ids, pages
        params = {**params, "cursor": body["next_cursor"]}


def problem(response: httpx.Response, code: str) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    return body


@pytest.fixture
def created(live_api: LiveApi) -> list[tuple[str, str, str]]:
    """201 runs of two workflows: (run id, workflow id, created_at), oldest first."""
    post(live_api.operator, "/api/v1/workflows", QUICK)
    post(live_api.operator, "/api/v1/workflows", OTHER)
    runs = []
    for i in range(RUNS):
        workflow_id = "quick" if i % 3 else "other"
        run = post(live_api.operator, f"/api/v1/workflows/{workflow_id}/versions/1/runs")
        runs.append((run["run_id"], workflow_id, run["created_at"]))
    return runs


@pytest.mark.real_http
def test_runs_page_newest_first_by_default_and_oldest_first_on_request(
    live_api: LiveApi, created: list[tuple[str, str, str]]
) -> None:
    viewer = live_api.viewer
    oldest_first = [run_id for run_id, _, _ in created]
    assert every_page(viewer, limit=50) == (oldest_first[::-1], 5)
    assert every_page(viewer, limit=50, order="desc") == (oldest_first[::-1], 5)
    assert every_page(viewer, limit=50, order="asc") == (oldest_first, 5)
    first = viewer.get("/api/v1/runs").json()["items"]
    assert [run["run_id"] for run in first] == oldest_first[::-1][:50]  # the default limit
    quick = [run_id for run_id, workflow_id, _ in created if workflow_id == "quick"]
    assert every_page(viewer, limit=30, workflow_id="quick")[0] == quick[::-1]
    assert every_page(viewer, limit=30, workflow_id="quick", order="asc")[0] == quick


@pytest.mark.real_http
def test_the_creation_window_is_exclusive_both_ways(
    live_api: LiveApi, created: list[tuple[str, str, str]]
) -> None:
    viewer = live_api.viewer
    after, before = created[50][2], created[150][2]
    lower, upper = datetime.fromisoformat(after), datetime.fromisoformat(before)
    inside = [r for r, _, at in created if lower < datetime.fromisoformat(at) < upper]
    assert created[50][0] not in inside
    assert created[150][0] not in inside
    assert 90 <= len(inside) <= 99
    window = {"created_after": after, "created_before": before}
    assert every_page(viewer, limit=17, **window)[0] == inside[::-1]
    assert every_page(viewer, limit=17, order="asc", **window)[0] == inside
    only_after = [r for r, _, at in created if datetime.fromisoformat(at) > lower]
    assert every_page(viewer, limit=200, created_after=after)[0] == only_after[::-1]
    # The same instant in another offset, and "+" sent unencoded (a space once decoded).
    shifted = lower.astimezone(datetime.fromisoformat("2026-01-01T00:00:00+05:30").tzinfo)
    assert every_page(viewer, limit=200, created_after=shifted.isoformat())[0] == only_after[::-1]
    spaced = shifted.isoformat().replace("+", " ")
    assert every_page(viewer, limit=200, created_after=spaced)[0] == only_after[::-1]
    nothing = viewer.get("/api/v1/runs", params={"created_after": before, "created_before": after})
    assert nothing.json() == {"items": [], "next_cursor": None}


@pytest.mark.real_http
def test_a_cursor_replayed_with_another_order_or_window_is_refused(
    live_api: LiveApi, created: list[tuple[str, str, str]]
) -> None:
    viewer = live_api.viewer
    after = created[20][2]
    params: dict[str, str | int | None] = {"limit": 10, "created_after": after}
    cursor = viewer.get("/api/v1/runs", params=params).json()["next_cursor"]
    assert cursor is not None
    # The default order is desc: the cursor works with it said or unsaid.
    orders: list[dict[str, str]] = [{}, {"order": "desc"}]
    for order in orders:
        again = viewer.get("/api/v1/runs", params={**params, **order, "cursor": cursor})
        assert again.status_code == 200, again.text
    changes: list[dict[str, str | None]] = [
        {"order": "asc"},
        {"created_after": created[21][2]},
        {"created_after": None},
        {"created_before": created[-1][2]},
        {"workflow_id": "quick"},
    ]
    for changed in changes:
        replayed = {k: v for k, v in {**params, **changed, "cursor": cursor}.items() if v}
        body = problem(viewer.get("/api/v1/runs", params=replayed), "invalid_cursor")
        assert "filters" in body["detail"]


MALFORMED_ORDERS = ["", "ASC", "Desc", "up", "newest", "desc\x00", "asc ", "a" * 5000, "é"]
MALFORMED_TIMES = [
    "",
    "now",
    "1",
    "-1",
    "1733000000",
    "2026-12-01",
    "2026-12-01T00:00:00",  # no offset: which zone?
    "2026-12-01T00:00Z",
    "2026-12-01 00:00:00Z",
    "20261201T000000Z",
    "0000-01-01T00:00:00Z",  # year 0
    "10000-01-01T00:00:00Z",
    "-2026-12-01T00:00:00Z",
    "0001-01-01T00:00:00+01:00",  # before year 1 in UTC
    "9999-12-31T23:30:00-01:00",  # past 9999 in UTC
    "2026-02-30T00:00:00Z",
    "2026-13-01T00:00:00Z",
    "2026-12-01T24:00:00Z",
    "2026-12-01T00:60:00Z",
    "2026-12-01T00:00:61Z",  # no second 61 (60 is a leap second: RFC 3339 allows it)
    "2026-12-01T00:00:00+24:00",
    "2026-12-01T00:00:00+01:60",
    "2026-12-01T00:00:00+0100",
    "2026-12-01T00:00:00.Z",
    "2026-12-01T00:00:00.12345678901234567Z",  # 37 characters: past the parameter's 35
    "2026-12-01T00:00:00Z\n",
    "2026-12-01T00:00:00Z\x00",
    "\x00",
    "２０２６-12-01T00:00:00Z",  # digits, but not ASCII ones
    "2026-12-01T00:00:00Z" * 300,
    "9" * 5000,
]


@pytest.mark.parametrize("value", MALFORMED_ORDERS, ids=range(len(MALFORMED_ORDERS)))
def test_a_malformed_order_is_an_invalid_argument(live_api: LiveApi, value: str) -> None:
    body = problem(live_api.viewer.get("/api/v1/runs", params={"order": value}), "invalid_argument")
    assert body["detail"] == "order must be asc or desc"


@pytest.mark.parametrize("name", ["created_after", "created_before"])
@pytest.mark.parametrize("value", MALFORMED_TIMES, ids=range(len(MALFORMED_TIMES)))
def test_a_malformed_time_is_an_invalid_argument(live_api: LiveApi, name: str, value: str) -> None:
    body = problem(live_api.viewer.get("/api/v1/runs", params={name: value}), "invalid_argument")
    assert body["detail"].startswith(f"{name} must be an RFC 3339 time with an offset")


@pytest.mark.parametrize(
    "value",
    [
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59.999999Z",
        "9999-12-31T23:59:59.999999999Z",
        "2026-12-01t00:00:00z",
        "2026-12-01T00:00:00.5+14:00",
        "2026-12-01T00:00:00-12:00",
        "2026-12-01T00:00:00.123456789Z",
    ],
)
@pytest.mark.parametrize("name", ["created_after", "created_before"])
def test_boundary_times_are_accepted(live_api: LiveApi, name: str, value: str) -> None:
    response = live_api.viewer.get("/api/v1/runs", params={name: value, "order": "asc"})
    assert response.status_code == 200, response.text
    assert response.json() == {"items": [], "next_cursor": None}


def test_repeated_listing_parameters_are_refused(live_api: LiveApi) -> None:
    for name, value in (("order", "asc"), ("created_after", "2026-12-01T00:00:00Z")):
        response = live_api.viewer.get(f"/api/v1/runs?{name}={value}&{name}={value}")
        problem(response, "invalid_argument")
