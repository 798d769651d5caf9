"""A query parameter that must be one of an enum's values: ``status`` of runs and of approvals.

Both listings read it through ``Call.enum_query``: every value of the enum is accepted, and
anything else — a near miss, another case, padding, a NUL, a very long value — is a 400
``invalid_argument`` naming the values, never a 500 (SPEC §6: query strings are validated).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from enum import StrEnum

import httpx
import pytest

from workload_api.container import Container, use_memory_store
from workload_api.settings import Settings
from workload_domain.approvals import ApprovalStatus
from workload_domain.statuses import RunStatus

pytestmark = pytest.mark.anyio

VIEWER = "viewer-" + "v" * 32
LISTINGS: dict[str, type[StrEnum]] = {
    "/api/v1/runs": RunStatus,
    "/api/v1/approvals": ApprovalStatus,
}
NOT_A_STATUS = [
    pytest.param("paused", id="unknown"),
    pytest.param("", id="empty"),
    pytest.param(" ", id="space"),
    pytest.param("PENDING", id="upper-case"),
    pytest.param("pending ", id="trailing-space"),
    pytest.param(" pending", id="leading-space"),
    pytest.param("pending\x00", id="nul"),
    pytest.param("pending,canceled", id="two-values"),
    pytest.param("null", id="null"),
    pytest.param("0", id="number"),
    pytest.param("pénding", id="non-ascii"),
    pytest.param("%70ending", id="percent-encoded-twice"),
    pytest.param("canceled" * 1000, id="8000-characters"),
]


@pytest.fixture
async def viewer() -> AsyncIterator[httpx.AsyncClient]:
    """A viewer's client of a running service (in-memory store), in process."""
    container = use_memory_store(Container(settings=Settings(viewer_tokens=VIEWER)))
    async with container.service().running():
        transport = httpx.ASGITransport(app=container.app())
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://api",
            headers={"Authorization": f"Bearer {VIEWER}"},
        ) as client:
            yield client


@pytest.mark.parametrize("path", LISTINGS)
@pytest.mark.parametrize("value", NOT_A_STATUS)
async def test_a_status_that_is_not_one_is_a_400_naming_the_statuses(
    viewer: httpx.AsyncClient, path: str, value: str
) -> None:
    response = await viewer.get(path, params={"status": value})

    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["code"] == "invalid_argument"
    allowed = ", ".join(s.value for s in LISTINGS[path])
    assert body["detail"] == f"status must be one of: {allowed}"


@pytest.mark.parametrize("path", LISTINGS)
async def test_every_status_is_accepted(viewer: httpx.AsyncClient, path: str) -> None:
    for status in LISTINGS[path]:
        response = await viewer.get(path, params={"status": status.value, "limit": 1})

        assert response.status_code == 200, (status, response.text)
        assert response.json() == {"items": [], "next_cursor": None}


@pytest.mark.parametrize("path", LISTINGS)
async def test_no_status_lists_everything(viewer: httpx.AsyncClient, path: str) -> None:
    response = await viewer.get(path)

    assert response.status_code == 200, response.text
    assert response.json() == {"items": [], "next_cursor": None}
