"""Every operation refuses a query parameter its OpenAPI entry does not declare (SPEC §6).

Before, operations that take no query string (``GET /queues``, ``GET /status``, one resource's
GET, every POST) read it through the page parser, which knew ``limit`` and ``cursor``: those
two were validated and then ignored (``GET /queues?limit=1`` answered every queue).
"""

from __future__ import annotations

import re

import httpx
import pytest

from tests.plugins.live_api import LiveApi
from workload_api.auth import Role
from workload_api.operations import OPERATIONS, Operation

_PATH_VALUES = {
    "version": "1",
    "run_id": "018f0000-0000-7000-8000-000000000000",
    "attempt_id": "018f0000-0000-7000-8000-000000000001",
    "approval_id": "018f0000-0000-7000-8000-000000000002",
    "draft_id": "018f0000-0000-7000-8000-000000000003",
}
_NAMES = ("limit", "cursor", "after", "status", "workflow_id", "unknown")


def _path(op: Operation) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: _PATH_VALUES.get(m[1], "x"), op.path)


CASES = [
    pytest.param(op, name, id=f"{op.method}-{op.path}-{name}")
    for op in OPERATIONS
    for name in _NAMES
    if name not in {param.name for param in op.query}
]


def _client(live: LiveApi, role: Role) -> httpx.Client:
    return {Role.VIEWER: live.viewer, Role.OPERATOR: live.operator, Role.WORKER: live.worker}[role]


@pytest.mark.parametrize(("op", "name"), CASES)
def test_an_undeclared_query_parameter_is_refused(
    live_api: LiveApi, op: Operation, name: str
) -> None:
    client = _client(live_api, op.role)
    params = {name: "1"}
    if op.method == "POST":
        response = client.post(
            _path(op), params=params, json={}, headers={"Idempotency-Key": f"q-{name}"}
        )
    else:
        response = client.get(_path(op), params=params)
    assert response.status_code == 400, response.text
    problem = response.json()
    assert problem["code"] == "invalid_argument"
    assert problem["detail"] == f"unknown query parameter '{name}'"


def test_queues_and_status_refuse_a_page_size(live_api: LiveApi) -> None:
    for path in ("/api/v1/queues", "/api/v1/status"):
        assert live_api.viewer.get(path).status_code == 200
        for query in ({"limit": "1"}, {"cursor": "x"}):
            refused = live_api.viewer.get(path, params=query)
            assert refused.status_code == 400, refused.text
