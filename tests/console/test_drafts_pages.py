"""Drafts in the console (SPEC §11, §13): the new-draft form, a draft's page, approve the hash.

In-process by default; the cases marked ``real_http`` run again over uvicorn and PostgreSQL.
The mock model answers from the form's script; the ``gate`` holds its answer when a test wants
to see a draft while it is generating.
"""

from __future__ import annotations

import json
import re
import threading

import httpx
import pytest

from tests.console.helpers import (
    NIGHTLY,
    NIGHTLY_V2,
    SELF_LOOP,
    V1,
    assert_safe_page,
    create,
    create_draft,
    csrf_of,
    form_field,
    generated,
    post_forms,
    script,
    sign_in,
)
from tests.plugins.live_api import OPERATOR_TOKEN, LiveApi
from tests.waiting import wait_until

WRONG_HASH = "sha256:" + "1" * 64


@pytest.fixture
def operator_browser(live_api: LiveApi) -> httpx.Client:
    return sign_in(live_api, OPERATOR_TOKEN)


def new_draft_form(page: str, **fields: str) -> dict[str, str]:
    """The new-draft form of the drafts page, filled in."""
    return {
        "csrf": csrf_of(page),
        "idempotency_key": form_field(page, "idempotency_key"),
        "prompt": "every night, fetch the rows and summarize them",
        "workflow_id": "",
        "model": "mock",
        "script": "",
    } | fields


def approve_form(page: str, **fields: str) -> dict[str, str]:
    return {
        "csrf": csrf_of(page),
        "idempotency_key": form_field(page, "idempotency_key"),
        "definition_hash": form_field(page, "definition_hash"),
    } | fields


def workflow_versions(live_api: LiveApi, workflow_id: str) -> int:
    answer = live_api.viewer.get(f"{V1}/workflows/{workflow_id}")
    return 0 if answer.status_code == 404 else int(answer.json()["latest_version"])


@pytest.mark.real_http
def test_the_new_draft_form_makes_a_draft_shown_with_its_problems_dag_and_definition(
    live_api: LiveApi, operator_browser: httpx.Client
) -> None:
    drafts = assert_safe_page(operator_browser.get("/ui/drafts"))
    assert "/ui/drafts" in post_forms(drafts)
    answers = json.dumps(script(SELF_LOOP, NIGHTLY))
    answer = operator_browser.post("/ui/drafts", data=new_draft_form(drafts, script=answers))
    assert answer.status_code == 303, answer.text
    draft_id = answer.headers["location"].rsplit("/", 1)[1]
    assert answer.headers["location"] == f"/ui/drafts/{draft_id}"
    draft = generated(live_api, draft_id)
    assert draft["status"] == "ready"
    assert draft["created_by"].startswith("operator:")

    page = assert_safe_page(operator_browser.get(f"/ui/drafts/{draft_id}"))
    assert 'id="draft-status" class="badge s-ready" role="status">ready<' in page
    assert 'data-live-flag data-active="false"' in page
    assert '<h3 id="answer-1">Answer 1</h3>' in page
    assert "<code>/tasks/0/depends_on/0</code>: a task cannot depend on itself" in page
    assert "Answer 2" not in page, "the second answer compiled"
    assert re.findall(r'<g class="node s-defined" data-task="([^"]+)"', page) == [
        "fetch",
        "summarize",
    ]
    assert 'a new workflow, <span class="mono">nightly-report</span> version 1' in page
    assert "Changes against" not in page, "nothing to compare with"
    assert form_field(page, "definition_hash") == draft["definition_hash"]
    assert post_forms(page) == [
        "/ui/logout",
        f"/ui/drafts/{draft_id}/approve",
        f"/ui/drafts/{draft_id}/reject",
    ]
    listed = operator_browser.get("/ui/drafts").text
    assert f'data-draft="{draft_id}" data-status="ready"' in listed


@pytest.mark.real_http
def test_a_new_version_shows_its_diff_and_approving_the_hash_shown_makes_it(
    live_api: LiveApi, operator_browser: httpx.Client
) -> None:
    create(live_api, NIGHTLY)
    draft_id = create_draft(live_api, script(NIGHTLY_V2), workflow_id="nightly-report")
    draft = generated(live_api, draft_id)
    path = f"/ui/drafts/{draft_id}"
    page = assert_safe_page(operator_browser.get(path))
    assert "Changes against nightly-report version 1" in page
    assert "Approving makes it version 2 of" in page
    added = re.findall(r'<span class="d-add">([^<]*)</span>', page)
    removed = re.findall(r'<span class="d-del">([^<]*)</span>', page)
    assert any("&#34;key&#34;: &#34;mail&#34;" in line for line in added), added
    assert removed == [], "the draft only adds a task"
    assert '<span class="d-file">--- nightly-report version 1</span>' in page

    answer = operator_browser.post(f"{path}/approve", data=approve_form(page))
    assert (answer.status_code, answer.headers["location"]) == (303, path)
    version = live_api.viewer.get(f"{V1}/workflows/nightly-report/versions/2").json()
    assert version["definition"] == draft["definition"]
    assert version["definition_hash"] == draft["definition_hash"]
    again = operator_browser.post(f"{path}/approve", data=approve_form(page))
    assert again.status_code == 303, "a double submit replays"
    assert workflow_versions(live_api, "nightly-report") == 2, "no third version"

    approved = assert_safe_page(operator_browser.get(path))
    assert 'class="badge s-approved" role="status">approved<' in approved
    link = '<a href="/ui/workflows/nightly-report/versions/2">nightly-report version 2</a>'
    assert link in approved
    assert "Changes against nightly-report version 1" in approved, "still what it changed"
    assert post_forms(approved) == ["/ui/logout"]


@pytest.mark.real_http
def test_approving_another_hash_than_shown_is_refused_and_said_so(
    live_api: LiveApi, operator_browser: httpx.Client
) -> None:
    draft_id = create_draft(live_api, script(NIGHTLY))
    generated(live_api, draft_id)
    path = f"/ui/drafts/{draft_id}"
    page = operator_browser.get(path).text
    answer = operator_browser.post(
        f"{path}/approve", data=approve_form(page, definition_hash=WRONG_HASH)
    )
    assert answer.status_code == 409
    refused = assert_safe_page(answer)
    assert '<p class="message" role="alert" id="decision-message">Nothing was approved' in refused
    assert "its hash differs" in refused
    assert workflow_versions(live_api, "nightly-report") == 0
    assert live_api.viewer.get(f"{V1}/drafts/{draft_id}").json()["status"] == "ready"


def test_a_rejected_draft_cannot_be_approved_and_the_page_says_so(
    live_api: LiveApi, operator_browser: httpx.Client
) -> None:
    draft_id = create_draft(live_api, script(NIGHTLY))
    generated(live_api, draft_id)
    path = f"/ui/drafts/{draft_id}"
    page = operator_browser.get(path).text
    rejected = operator_browser.post(
        f"{path}/reject",
        data={"csrf": csrf_of(page), "idempotency_key": "reject-form-1"},
    )
    assert (rejected.status_code, rejected.headers["location"]) == (303, path)
    shown = operator_browser.get(path).text
    assert 'class="badge s-rejected" role="status">rejected<' in shown
    assert post_forms(shown) == ["/ui/logout"]
    late = operator_browser.post(f"{path}/approve", data=approve_form(page))
    assert late.status_code == 409
    assert "Nothing was approved: this draft is not ready" in late.text
    assert workflow_versions(live_api, "nightly-report") == 0


def test_an_invalid_draft_shows_every_answers_problems_and_can_only_be_rejected(
    live_api: LiveApi, operator_browser: httpx.Client
) -> None:
    answers = [{"content": "I cannot do that"}, *script({"id": "x"}, SELF_LOOP, [1, 2])]
    draft_id = create_draft(live_api, answers)
    assert generated(live_api, draft_id)["status"] == "invalid"
    page = operator_browser.get(f"/ui/drafts/{draft_id}").text
    assert re.findall(r'<h3 id="answer-(\d)">', page) == ["1", "2", "3", "4"]
    assert post_forms(page) == ["/ui/logout", f"/ui/drafts/{draft_id}/reject"]
    assert 'id="definition"' not in page
    assert "svg" not in page


def test_a_generating_draft_is_followed_until_it_is_ready(
    live_api: LiveApi, operator_browser: httpx.Client, gate: threading.Event
) -> None:
    gate.clear()
    draft_id = create_draft(live_api, script(NIGHTLY))
    page = assert_safe_page(operator_browser.get(f"/ui/drafts/{draft_id}"))
    assert 'id="draft-live" data-url="/ui/drafts/' in page
    assert 'data-active="true" data-every="1000"' in page
    assert "The model is writing the workflow" in page
    assert post_forms(page) == ["/ui/logout"], "nothing to decide yet"
    live = operator_browser.get(f"/ui/drafts/{draft_id}/live")
    assert 'data-live-flag data-active="true"' in live.text
    gate.set()

    def ready() -> str | None:
        text = operator_browser.get(f"/ui/drafts/{draft_id}/live").text
        return text if 'data-live-flag data-active="false"' in text else None

    fragment = wait_until(ready, message="the draft's page still says generating")
    assert "<html" not in fragment, "a fragment, not a page"
    assert f'action="/ui/drafts/{draft_id}/approve"' in fragment


@pytest.mark.parametrize(
    ("fields", "text"),
    [
        pytest.param({"script": "[{"}, "the script is not valid JSON", id="script-not-json"),
        pytest.param({"script": '{"content": "x"}'}, "a JSON list of turns", id="not-a-list"),
        pytest.param(
            {"script": '[{"content": "a", "content": "b"}]'},
            "duplicate object key &#39;content&#39;",
            id="duplicate",
        ),
        pytest.param({"script": "[NaN]"}, "the script is not valid JSON", id="nan"),
        pytest.param({"script": '[{"content": 1e400}]'}, "not valid JSON", id="infinite-number"),
        pytest.param(
            {"script": '[{"content": "\\ud800"}]'}, "lone UTF-16 surrogate", id="lone-surrogate"
        ),
        pytest.param({"script": "[" * 100 + "]" * 100}, "nested too deeply", id="deep"),
        pytest.param({"script": "[" * 5000 + "]" * 5000}, "nested too deeply", id="very-deep"),
        pytest.param({"script": '[{"text": "x"}]'}, "/script/0", id="not-a-turn"),
        pytest.param(
            {"model": "openai:gpt-4o", "script": '[{"content": "{}"}]'},
            "only the mock model follows a script",
            id="script-for-openai",
        ),
        pytest.param({"model": "claude"}, "/model", id="unknown-model"),
        pytest.param({"prompt": ""}, "/prompt", id="no-prompt"),
        pytest.param({"workflow_id": "Not One"}, "/workflow_id", id="bad-workflow-id"),
        pytest.param({"prompt": "a\x00b"}, "cannot be stored", id="nul-in-prompt"),
    ],
)
def test_a_bad_new_draft_is_shown_back_and_nothing_is_made(
    live_api: LiveApi, operator_browser: httpx.Client, fields: dict[str, str], text: str
) -> None:
    page = operator_browser.get("/ui/drafts").text
    form = new_draft_form(page, **fields)
    answer = operator_browser.post("/ui/drafts", data=form)
    assert answer.status_code == 400, answer.text
    shown = assert_safe_page(answer)
    assert '<p class="message" role="alert">No draft was made' in shown
    assert text in shown
    if form["prompt"]:
        assert f">{form['prompt']}</textarea>" in shown, "what was typed is kept"
    assert live_api.viewer.get(f"{V1}/drafts").json()["items"] == []


def test_a_draft_of_an_endpoint_not_configured_here_is_refused_saying_so(
    live_api: LiveApi, operator_browser: httpx.Client
) -> None:
    """No endpoint is configured here: the form is shown back naming the endpoint (SPEC §11)."""
    page = operator_browser.get("/ui/drafts").text
    answer = operator_browser.post(
        "/ui/drafts", data=new_draft_form(page, model="openai:llama3.2", workflow_id="nightly")
    )
    assert answer.status_code == 400, answer.text
    shown = assert_safe_page(answer)
    assert "no model endpoint named &#39;openai&#39; is configured on this server" in shown
    assert live_api.viewer.get(f"{V1}/drafts").json()["items"] == []
