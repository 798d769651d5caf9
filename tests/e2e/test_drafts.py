"""Drafts (SPEC §11): a workflow from a prompt, a version only with a person's approval.

In-process on the in-memory store (the mock model's ``script`` plays the model), and again
over real HTTP and PostgreSQL for the tests marked ``real_http``.
"""

from __future__ import annotations

import itertools
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.plugins.live_api import LiveApi
from tests.waiting import wait_until

V1 = "/api/v1"
_keys = itertools.count()
VALID = {
    "id": "nightly-report",
    "description": "fetch then summarize",
    "tasks": [
        {"key": "fetch", "action": "mock", "input": {"output": {"rows": 3}}},
        {"key": "summarize", "action": "mock", "depends_on": ["fetch"]},
    ],
}
INVALID = {"id": "nightly-report", "tasks": [{"key": "a", "action": "mock", "depends_on": ["a"]}]}


def idem() -> dict[str, str]:
    return {"Idempotency-Key": f"drafts-{next(_keys)}"}


def turn(definition: Any, fenced: bool = False) -> dict[str, str]:
    text = json.dumps(definition)
    return {"content": f"Here it is:\n```json\n{text}\n```" if fenced else text}


def create_draft(api: LiveApi, script: list[dict[str, str]], **fields: Any) -> dict[str, Any]:
    body = {"prompt": "every night, fetch the rows and summarize them", "script": script, **fields}
    response = api.operator.post(f"{V1}/drafts", json=body, headers=idem())
    assert response.status_code == 202, response.text
    created: dict[str, Any] = response.json()
    assert created["status"] == "generating"
    return created


def generated(api: LiveApi, draft_id: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        draft: dict[str, Any] = api.viewer.get(f"{V1}/drafts/{draft_id}").json()
        return draft if draft["status"] != "generating" else None

    return wait_until(done, message=f"draft {draft_id} is still generating")


def approve(api: LiveApi, draft_id: str, definition_hash: str, **headers: str) -> Any:
    return api.operator.post(
        f"{V1}/drafts/{draft_id}/approve",
        json={"definition_hash": definition_hash},
        headers=headers or idem(),
    )


@pytest.mark.real_http
def test_a_second_answer_that_compiles_makes_a_ready_draft_with_the_first_ones_problems(
    live_api: LiveApi,
) -> None:
    created = create_draft(live_api, [turn(INVALID), turn(VALID, fenced=True)])
    draft = generated(live_api, created["draft_id"])
    assert draft["status"] == "ready"
    assert draft["workflow_id"] == "nightly-report"
    assert draft["definition"]["tasks"][1]["depends_on"] == ["fetch"]
    assert draft["definition"]["tasks"][0]["timeout_seconds"] == 300  # normalized
    assert draft["definition_hash"].startswith("sha256:")
    assert draft["problems"] == [
        {
            "answer": 1,
            "path": "/tasks/0/depends_on/0",
            "message": "a task cannot depend on itself",
        }
    ]
    assert draft["usage"]["model_calls"] == 2
    assert draft["created_by"].startswith("operator:")
    # Nothing became a version yet.
    assert live_api.viewer.get(f"{V1}/workflows/nightly-report").status_code == 404

    wrong = approve(live_api, draft["draft_id"], "sha256:" + "0" * 64)
    assert (wrong.status_code, wrong.json()["code"]) == (409, "draft_changed")
    assert live_api.viewer.get(f"{V1}/workflows/nightly-report").status_code == 404

    approved = approve(live_api, draft["draft_id"], draft["definition_hash"])
    assert approved.status_code == 200, approved.text
    assert (approved.json()["status"], approved.json()["version"]) == ("approved", 1)
    version = live_api.viewer.get(f"{V1}/workflows/nightly-report/versions/1").json()
    assert version["definition_hash"] == draft["definition_hash"]
    assert version["definition"] == draft["definition"]

    again = approve(live_api, draft["draft_id"], draft["definition_hash"])
    assert (again.status_code, again.json()["version"]) == (200, 1)
    workflow = live_api.viewer.get(f"{V1}/workflows/nightly-report").json()
    assert workflow["latest_version"] == 1  # no second version
    rejected = live_api.operator.post(f"{V1}/drafts/{draft['draft_id']}/reject", headers=idem())
    assert (rejected.status_code, rejected.json()["code"]) == (409, "draft_not_ready")


def test_an_answer_naming_a_key_twice_is_a_problem_as_in_a_request(live_api: LiveApi) -> None:
    # POST /workflows refuses such a body (invalid_json); the model's answer goes through the
    # same parser, so it is a problem told to the model, never "the last one wins".
    twice = '{"id": "nightly-report", "tasks": [{"key": "a", "action": "mock"}], "id": "other"}'
    created = create_draft(live_api, [{"content": twice}, turn(VALID)])
    draft = generated(live_api, created["draft_id"])
    assert draft["status"] == "ready"
    assert draft["definition"]["id"] == "nightly-report"
    assert draft["problems"] == [
        {
            "answer": 1,
            "path": "",
            "message": "the answer is not strict JSON: duplicate object key 'id'",
        }
    ]
    for bad in ('{"id": "x", "tasks": [], "n": NaN}', '{"id": "x", "n": 1e400, "tasks": []}'):
        refused = generated(live_api, create_draft(live_api, [{"content": bad}] * 4)["draft_id"])
        assert refused["status"] == "invalid"
        assert [p["message"] for p in refused["problems"]] == [
            "the answer is not a JSON object"
        ] * 4


@pytest.mark.real_http
def test_concurrent_approvals_into_one_workflow_all_become_versions(live_api: LiveApi) -> None:
    first = generated(live_api, create_draft(live_api, [turn(VALID)])["draft_id"])
    assert approve(live_api, first["draft_id"], first["definition_hash"]).status_code == 200
    drafts = []
    for n in range(20):
        changed = {**VALID, "description": f"variant {n}"}
        draft = create_draft(live_api, [turn(changed)], workflow_id="nightly-report")
        drafts.append(generated(live_api, draft["draft_id"]))
    assert {d["status"] for d in drafts} == {"ready"}
    with ThreadPoolExecutor(len(drafts)) as pool:
        answers = list(
            pool.map(lambda d: approve(live_api, d["draft_id"], d["definition_hash"]), drafts)
        )
    assert [a.status_code for a in answers] == [200] * len(drafts), [a.text for a in answers]
    assert sorted(a.json()["version"] for a in answers) == list(range(2, 2 + len(drafts)))
    for answer in answers:  # each version is the definition its draft was approved with
        version = answer.json()["version"]
        stored = live_api.viewer.get(f"{V1}/workflows/nightly-report/versions/{version}").json()
        assert stored["definition_hash"] == answer.json()["definition_hash"]
    workflow = live_api.viewer.get(f"{V1}/workflows/nightly-report").json()
    assert workflow["latest_version"] == 1 + len(drafts)


def test_a_draft_for_an_existing_workflow_becomes_its_next_version(live_api: LiveApi) -> None:
    first = create_draft(live_api, [turn(VALID)])
    ready = generated(live_api, first["draft_id"])
    assert approve(live_api, ready["draft_id"], ready["definition_hash"]).status_code == 200

    changed = {**VALID, "description": "now with a third task"}
    changed["tasks"] = [
        *VALID["tasks"],
        {"key": "mail", "action": "mock", "depends_on": ["summarize"]},
    ]
    wrong_id = {**changed, "id": "something-else"}
    second = create_draft(live_api, [turn(wrong_id), turn(changed)], workflow_id="nightly-report")
    ready = generated(live_api, second["draft_id"])
    assert ready["status"] == "ready"
    assert [p["path"] for p in ready["problems"]] == ["/id"]
    approved = approve(live_api, ready["draft_id"], ready["definition_hash"])
    assert approved.json()["version"] == 2
    assert live_api.viewer.get(f"{V1}/workflows/nightly-report").json()["latest_version"] == 2


def test_four_bad_answers_make_an_invalid_draft_that_cannot_be_approved(
    live_api: LiveApi,
) -> None:
    script = [{"content": "I cannot do that"}, turn({"id": "x"}), turn(INVALID), turn([1, 2])]
    # A fifth turn is accepted (SPEC §11 does not limit the script) and never read: at most 4
    # model calls, so the valid definition it holds never becomes the draft.
    script.append(turn(VALID))
    draft = generated(live_api, create_draft(live_api, script)["draft_id"])
    assert draft["status"] == "invalid"
    assert draft["definition"] is None
    assert {p["answer"] for p in draft["problems"]} == {1, 2, 3, 4}
    assert draft["usage"]["model_calls"] == 4
    refused = approve(live_api, draft["draft_id"], "sha256:" + "1" * 64)
    assert (refused.status_code, refused.json()["code"]) == (409, "draft_not_ready")
    rejected = live_api.operator.post(f"{V1}/drafts/{draft['draft_id']}/reject", headers=idem())
    assert (rejected.status_code, rejected.json()["status"]) == (200, "rejected")
    assert live_api.viewer.get(f"{V1}/workflows/x").status_code == 404


def test_a_rejected_draft_never_becomes_a_version(live_api: LiveApi) -> None:
    draft = generated(live_api, create_draft(live_api, [turn(VALID)])["draft_id"])
    key = idem()
    first = live_api.operator.post(f"{V1}/drafts/{draft['draft_id']}/reject", headers=key)
    assert first.status_code == 200
    replay = live_api.operator.post(f"{V1}/drafts/{draft['draft_id']}/reject", headers=key)
    assert replay.json() == first.json()
    refused = approve(live_api, draft["draft_id"], draft["definition_hash"])
    assert (refused.status_code, refused.json()["code"]) == (409, "draft_not_ready")
    assert live_api.viewer.get(f"{V1}/workflows/nightly-report").status_code == 404


def test_a_model_that_runs_out_ends_the_draft_invalid(live_api: LiveApi) -> None:
    draft = generated(live_api, create_draft(live_api, [turn(INVALID)])["draft_id"])
    assert draft["status"] == "invalid"
    assert draft["problems"][-1]["answer"] == 2
    assert draft["problems"][-1]["message"].startswith("model_error:")


def test_draft_requests_are_checked(live_api: LiveApi) -> None:
    cases: list[tuple[Any, str]] = [
        ({}, "/prompt"),
        ({"prompt": ""}, "/prompt"),
        ({"prompt": "x", "model": "gpt"}, "/model"),
        ({"prompt": "x", "model": "openai:m", "script": []}, "/script"),
        ({"prompt": "x", "script": [{"text": "y"}]}, "/script/0"),
        ({"prompt": "x", "workflow_id": "Not Valid"}, "/workflow_id"),
        ({"prompt": "x", "extra": 1}, "/extra"),
        ({"prompt": "x\u0000"}, "/prompt"),
        # Found by schemathesis: a NUL in the model name reached PostgreSQL (a 500).
        ({"prompt": "x", "model": "openai:\u0017\u00d5\u0000"}, "/model"),
        ({"prompt": "x", "model": "openai:m\u0000"}, "/model"),
        ({"prompt": "x", "model": "openai:m\u0085"}, "/model"),
    ]
    for body, path in cases:
        response = live_api.operator.post(f"{V1}/drafts", json=body, headers=idem())
        assert response.status_code == 400, (body, response.text)
        assert path in [e["path"] for e in response.json().get("errors", [])], response.json()
    viewer = live_api.viewer.post(f"{V1}/drafts", json={"prompt": "x"}, headers=idem())
    assert viewer.status_code == 403
    missing = live_api.viewer.get(f"{V1}/drafts/00000000-0000-7000-8000-000000000000")
    assert (missing.status_code, missing.json()["code"]) == (404, "not_found")
    assert live_api.viewer.get(f"{V1}/drafts/not-a-uuid").status_code == 404


def test_drafts_are_listed_in_pages(live_api: LiveApi) -> None:
    ids = [create_draft(live_api, [turn(VALID)])["draft_id"] for _ in range(3)]
    first = live_api.viewer.get(f"{V1}/drafts", params={"limit": 2}).json()
    second = live_api.viewer.get(
        f"{V1}/drafts", params={"limit": 2, "cursor": first["next_cursor"]}
    ).json()
    assert [d["draft_id"] for d in first["items"] + second["items"]] == ids
    assert second["next_cursor"] is None
