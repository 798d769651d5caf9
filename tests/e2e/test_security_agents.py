"""Who may do what with agents' steps, approvals and drafts (SPEC §6, §10, §11).

Every one of these operations needs a valid bearer token (401 without); viewers read and never
write (403, and nothing changes); workers do nothing here (403).
"""

from __future__ import annotations

import itertools

import pytest

from tests.plugins.live_api import LiveApi

V1 = "/api/v1"
_keys = itertools.count()
NOWHERE = "00000000-0000-7000-8000-000000000000"
DIGEST = "sha256:" + "0" * 64

READS = {
    "list-steps": f"{V1}/runs/{NOWHERE}/tasks/a/steps",
    "list-approvals": f"{V1}/approvals",
    "get-approval": f"{V1}/approvals/{NOWHERE}",
    "list-drafts": f"{V1}/drafts",
    "get-draft": f"{V1}/drafts/{NOWHERE}",
}
WRITES = {
    "decide": (
        f"{V1}/approvals/{NOWHERE}/decision",
        {"decision": "approve", "arguments_digest": DIGEST},
    ),
    "create-draft": (f"{V1}/drafts", {"prompt": "a pipeline", "script": [{"content": "{}"}]}),
    "approve-draft": (f"{V1}/drafts/{NOWHERE}/approve", {"definition_hash": DIGEST}),
    "reject-draft": (f"{V1}/drafts/{NOWHERE}/reject", None),
}


def idem() -> dict[str, str]:
    return {"Idempotency-Key": f"security-agents-{next(_keys)}"}


@pytest.mark.parametrize("name", sorted(READS))
def test_reads_need_a_token_and_refuse_workers(live_api: LiveApi, name: str) -> None:
    path = READS[name]
    assert live_api.anonymous.get(path).status_code == 401
    assert live_api.worker.get(path).status_code == 403
    assert live_api.viewer.get(path).status_code in (200, 404)


@pytest.mark.parametrize("name", sorted(WRITES))
def test_writes_are_for_operators_only(live_api: LiveApi, name: str) -> None:
    path, body = WRITES[name]
    before = live_api.viewer.get(f"{V1}/drafts").json()
    assert live_api.anonymous.post(path, json=body, headers=idem()).status_code == 401
    for client in (live_api.viewer, live_api.worker):
        refused = client.post(path, json=body, headers=idem())
        assert refused.status_code == 403, refused.text
        assert refused.json()["code"] == "forbidden"
    assert live_api.viewer.get(f"{V1}/drafts").json() == before  # nothing was written
    # Operators must name an Idempotency-Key for every write.
    keyless = live_api.operator.post(path, json=body)
    assert (keyless.status_code, keyless.json()["code"]) == (400, "idempotency_key_required")
