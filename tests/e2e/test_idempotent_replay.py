"""An idempotent replay is the original answer again, byte for byte (SPEC §6).

On both stores through the API (``real_http``: PostgreSQL too): a run whose input's keys are
not in sorted order is answered the same bytes on a replay (JSONB would have reordered them),
and a request with two ``Idempotency-Key`` headers is refused, not matched by either.
"""

from __future__ import annotations

import pytest

from tests.plugins.live_api import LiveApi

pytestmark = pytest.mark.real_http

_UNSORTED = {"zeta": 1, "alpha": {"y": 2, "x": [3, {"b": True, "a": None}]}, "mid": "é"}


def _workflow(live_api: LiveApi, workflow_id: str) -> None:
    created = live_api.operator.put(
        f"/api/v1/workflows/{workflow_id}", json={"tasks": [{"key": "a", "action": "mock"}]}
    )
    assert created.status_code == 201, created.text


def test_a_replayed_start_is_the_first_answer_byte_for_byte(live_api: LiveApi) -> None:
    _workflow(live_api, "replayed")
    path = "/api/v1/workflows/replayed/versions/1/runs"
    headers = {"Idempotency-Key": "replay-bytes-1"}
    first = live_api.operator.post(path, json={"input": _UNSORTED}, headers=headers)
    assert first.status_code == 202, first.text
    assert list(first.json()["input"]) == ["zeta", "alpha", "mid"]
    again = live_api.operator.post(path, json={"input": _UNSORTED}, headers=headers)
    assert again.status_code == 202
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    assert again.headers["location"] == first.headers["location"]


def test_a_replayed_version_is_the_first_answer_byte_for_byte(live_api: LiveApi) -> None:
    _workflow(live_api, "versioned")
    body = {"tasks": [{"key": "a", "action": "mock", "input": _UNSORTED}]}
    headers = {"Idempotency-Key": "replay-bytes-2"}
    path = "/api/v1/workflows/versioned/versions"
    first = live_api.operator.post(path, json=body, headers=headers)
    assert first.status_code == 201, first.text
    again = live_api.operator.post(path, json=body, headers=headers)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.content == first.content


def test_two_idempotency_keys_are_refused_and_nothing_is_written(live_api: LiveApi) -> None:
    _workflow(live_api, "twokeys")
    path = "/api/v1/workflows/twokeys/versions/1/runs"
    refused = live_api.operator.post(
        path,
        json={"input": {}},
        headers=[("Idempotency-Key", "two-a"), ("Idempotency-Key", "two-b")],
    )
    assert refused.status_code == 400, refused.text
    assert refused.json()["code"] == "invalid_argument"
    assert "one Idempotency-Key" in refused.json()["detail"]
    runs = live_api.viewer.get("/api/v1/runs", params={"workflow_id": "twokeys"})
    assert runs.status_code == 200
    assert runs.json()["items"] == []
    for key in ("two-a", "two-b"):  # neither key was recorded: each starts a run now
        started = live_api.operator.post(path, json={"input": {}}, headers={"Idempotency-Key": key})
        assert started.status_code == 202, started.text
        assert "Idempotent-Replayed" not in started.headers
