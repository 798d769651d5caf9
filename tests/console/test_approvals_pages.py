"""The approvals inbox and an approval's page (SPEC §11, §13): decide on exactly what was shown.

In-process by default; the cases marked ``real_http`` run again over uvicorn and PostgreSQL.
An agent on the mock model calls ``deploy`` (an in-process tool needing approval), so "the tool
ran" is a succeeded ``tool_call`` step of its journal.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from markupsafe import escape

from tests.console.helpers import (
    DEPLOY_ARGUMENTS,
    V1,
    assert_safe_page,
    create,
    csrf_of,
    deployer,
    form_field,
    pending_approval,
    post_forms,
    sign_in,
    start,
    steps,
)
from tests.plugins.live_api import OPERATOR_TOKEN, VIEWER_TOKEN, LiveApi

HOSTILE: dict[str, Any] = {
    "output": {"note": "<script>alert(1)</script>", "env": "caf\u00e9 \u202eevil"}
}
WRONG_DIGEST = "sha256:" + "0" * 64


@pytest.fixture
def operator_browser(live_api: LiveApi) -> httpx.Client:
    return sign_in(live_api, OPERATOR_TOKEN)


def waiting(live_api: LiveApi, workflow_id: str = "deployer", *calls: dict[str, Any]) -> Any:
    """Start an agent whose tool needs approval; its pending approval."""
    create(live_api, deployer(workflow_id, *calls))
    return pending_approval(live_api, start(live_api, workflow_id))


def decide_form(page: str, decision: str, **fields: str) -> dict[str, str]:
    """The decision form of an approval's page, as a browser sends it on a button's click."""
    form = {
        "csrf": csrf_of(page),
        "idempotency_key": form_field(page, "idempotency_key"),
        "arguments_digest": form_field(page, "arguments_digest"),
        "decision": decision,
    }
    return form | fields


def get_approval(live_api: LiveApi, approval_id: str) -> dict[str, Any]:
    answer = live_api.viewer.get(f"{V1}/approvals/{approval_id}")
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


@pytest.mark.real_http
def test_the_inbox_shows_pending_approvals_by_default_and_filters_by_status(
    live_api: LiveApi, operator_browser: httpx.Client
) -> None:
    decided = waiting(live_api, "first")
    answer = live_api.operator.post(
        f"{V1}/approvals/{decided['approval_id']}/decision",
        json={"decision": "approve", "arguments_digest": decided["arguments_digest"]},
        headers={"Idempotency-Key": "inbox-1"},
    )
    assert answer.status_code == 200, answer.text
    pending = waiting(live_api, "second")

    inbox = assert_safe_page(operator_browser.get("/ui/approvals"))
    assert f'data-approval="{pending["approval_id"]}" data-status="pending"' in inbox
    assert decided["approval_id"] not in inbox
    assert f'href="/ui/approvals/{pending["approval_id"]}">deploy</a>' in inbox
    assert f'href="/ui/runs/{pending["run_id"]}"' in inbox
    assert f'href="/ui/runs/{pending["run_id"]}#task-agent">task agent</a>' in inbox
    assert str(escape('"services": [')) in inbox, "the arguments, as JSON"
    assert '<option value="pending" selected>' in inbox

    approved = operator_browser.get("/ui/approvals?status=approved").text
    assert decided["approval_id"] in approved
    assert pending["approval_id"] not in approved
    every = operator_browser.get("/ui/approvals?status=all").text
    assert decided["approval_id"] in every
    assert pending["approval_id"] in every
    assert "No expired approvals." in operator_browser.get("/ui/approvals?status=expired").text


@pytest.mark.parametrize("where", ["inbox", "page"])
def test_arguments_are_shown_exactly_with_nothing_hidden_or_run(
    live_api: LiveApi, operator_browser: httpx.Client, where: str
) -> None:
    approval = waiting(live_api, "deployer", HOSTILE)
    path = "/ui/approvals" if where == "inbox" else f"/ui/approvals/{approval['approval_id']}"
    page = assert_safe_page(operator_browser.get(path))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert" not in page
    assert "\u202e" not in page, "no character hides what is shown"
    assert "\u00e9" not in page, "every non-ASCII character is escaped"
    assert "caf\\u00e9 \\u202eevil" in page, "shown escaped, as the digest covers it"


@pytest.mark.real_http
def test_an_operator_approves_what_was_shown_and_the_tool_runs_once(
    live_api: LiveApi, operator_browser: httpx.Client
) -> None:
    approval = waiting(live_api)
    path = f"/ui/approvals/{approval['approval_id']}"
    page = assert_safe_page(operator_browser.get(path))
    assert post_forms(page) == ["/ui/logout", f"{path}/decision"]
    assert form_field(page, "arguments_digest") == approval["arguments_digest"]
    assert f'id="arguments-digest">{approval["arguments_digest"]}<' in page
    assert ">Approve</button>" in page
    assert ">Reject</button>" in page

    form = decide_form(page, "approve", comment="ship it")
    first = operator_browser.post(f"{path}/decision", data=form)
    again = operator_browser.post(f"{path}/decision", data=form)
    assert (first.status_code, first.headers["location"]) == (303, path)
    assert (again.status_code, again.headers["location"]) == (303, path), "a double submit"

    run = live_api.wait_for_run(approval["run_id"])
    assert run["status"] == "succeeded"
    tools = [s for s in steps(live_api, approval["run_id"]) if s["kind"] == "tool_call"]
    assert [(t["status"], t["response"]) for t in tools] == [
        ("succeeded", {"output": DEPLOY_ARGUMENTS["output"]})
    ]
    decided = get_approval(live_api, approval["approval_id"])
    assert (decided["status"], decided["comment"]) == ("approved", "ship it")
    assert decided["decided_by"].startswith("operator:")
    shown = assert_safe_page(operator_browser.get(path))
    assert post_forms(shown) == ["/ui/logout"], "no decision controls once decided"
    assert f'id="decided-by">{decided["decided_by"]}<' in shown
    assert 'id="decision-comment">ship it<' in shown
    assert OPERATOR_TOKEN not in shown


def test_a_rejection_and_its_comment_reach_the_model(
    live_api: LiveApi, operator_browser: httpx.Client
) -> None:
    approval = waiting(live_api)
    path = f"/ui/approvals/{approval['approval_id']}"
    page = operator_browser.get(path).text
    answer = operator_browser.post(
        f"{path}/decision", data=decide_form(page, "reject", comment="not on a Friday")
    )
    assert (answer.status_code, answer.headers["location"]) == (303, path)
    assert live_api.wait_for_run(approval["run_id"])["status"] == "succeeded"
    journal = steps(live_api, approval["run_id"])
    tools = [s for s in journal if s["kind"] == "tool_call"]
    assert [t["status"] for t in tools] == ["failed"], "the tool never ran"
    told = journal[-1]["request"]["messages"][-1]
    assert told["role"] == "tool"
    assert "rejected" in told["content"]
    assert "not on a Friday" in told["content"]
    shown = operator_browser.get(path).text
    assert 'id="approval-status" class="badge s-rejected">rejected<' in shown
    assert 'id="decision-comment">not on a Friday<' in shown


@pytest.mark.real_http
@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_decision_on_other_arguments_than_shown_is_refused_and_said_so(
    live_api: LiveApi, operator_browser: httpx.Client, decision: str
) -> None:
    approval = waiting(live_api)
    path = f"/ui/approvals/{approval['approval_id']}"
    page = operator_browser.get(path).text
    form = decide_form(page, decision, arguments_digest=WRONG_DIGEST, comment="looked fine")
    answer = operator_browser.post(f"{path}/decision", data=form)
    assert answer.status_code == 409
    refused = assert_safe_page(answer)
    assert '<p class="message" role="alert" id="decision-message">Nothing was decided' in refused
    assert "their digest differs" in refused
    assert form_field(refused, "arguments_digest") == approval["arguments_digest"]
    assert ">looked fine</textarea>" in refused, "the comment is kept"
    assert get_approval(live_api, approval["approval_id"])["status"] == "pending"


def test_a_decision_on_an_approval_decided_meanwhile_is_refused_and_said_so(
    live_api: LiveApi, operator_browser: httpx.Client
) -> None:
    approval = waiting(live_api)
    path = f"/ui/approvals/{approval['approval_id']}"
    page = operator_browser.get(path).text
    elsewhere = live_api.operator.post(
        f"{V1}/approvals/{approval['approval_id']}/decision",
        json={"decision": "reject", "arguments_digest": approval["arguments_digest"]},
        headers={"Idempotency-Key": "elsewhere-1"},
    )
    assert elsewhere.status_code == 200, elsewhere.text
    answer = operator_browser.post(f"{path}/decision", data=decide_form(page, "approve"))
    assert answer.status_code == 409
    assert "Nothing was decided: this approval was no longer pending" in answer.text
    assert 'id="approval-status" class="badge s-rejected">rejected<' in answer.text
    assert post_forms(answer.text) == ["/ui/logout"]
    assert get_approval(live_api, approval["approval_id"])["status"] == "rejected"


@pytest.mark.parametrize(
    ("fields", "text"),
    [
        pytest.param({"decision": ""}, "/decision", id="no-decision"),
        pytest.param({"decision": "maybe"}, "/decision", id="unknown-decision"),
        pytest.param({"comment": "x" * 4097}, "/comment", id="comment-too-long"),
        pytest.param({"comment": "a\x00b"}, "cannot be stored", id="nul-in-comment"),
    ],
)
def test_a_malformed_decision_is_refused_and_said_so(
    live_api: LiveApi, operator_browser: httpx.Client, fields: dict[str, str], text: str
) -> None:
    approval = waiting(live_api)
    path = f"/ui/approvals/{approval['approval_id']}"
    page = operator_browser.get(path).text
    answer = operator_browser.post(f"{path}/decision", data=decide_form(page, "approve") | fields)
    assert answer.status_code == 400
    assert "Nothing was decided" in answer.text
    assert text in answer.text
    assert get_approval(live_api, approval["approval_id"])["status"] == "pending"


@pytest.mark.real_http
def test_an_operator_decides_from_the_inbox_and_comes_back_to_it(
    live_api: LiveApi, operator_browser: httpx.Client
) -> None:
    """SPEC §13: "approvals inbox (arguments, approve/reject)" — on the inbox itself."""
    approve, reject = waiting(live_api, "first"), waiting(live_api, "second")
    inbox = assert_safe_page(operator_browser.get("/ui/approvals"))
    paths = [f"/ui/approvals/{a['approval_id']}/decision" for a in (approve, reject)]
    assert post_forms(inbox) == ["/ui/logout", *paths]
    assert f'aria-label="Approve deploy ({approve["approval_id"]})">Approve</button>' in inbox
    assert f'aria-label="Reject deploy ({reject["approval_id"]})">Reject</button>' in inbox
    forms = inbox.split('class="inline-decision">')[1:]
    for approval, form, decision in zip(
        (approve, reject), forms, ("approve", "reject"), strict=True
    ):
        body = decide_form(form, decision) | {"csrf": csrf_of(inbox), "back": "inbox"}
        assert body["arguments_digest"] == approval["arguments_digest"]
        answer = operator_browser.post(
            f"/ui/approvals/{approval['approval_id']}/decision", data=body
        )
        assert (answer.status_code, answer.headers["location"]) == (303, "/ui/approvals")
    assert get_approval(live_api, approve["approval_id"])["status"] == "approved"
    assert get_approval(live_api, reject["approval_id"])["status"] == "rejected"
    assert live_api.wait_for_run(approve["run_id"])["status"] == "succeeded"
    after = assert_safe_page(operator_browser.get("/ui/approvals"))
    assert post_forms(after) == ["/ui/logout"]
    assert "No pending approvals." in after


def test_a_viewer_sees_the_inbox_without_decisions(live_api: LiveApi) -> None:
    waiting(live_api)
    viewer = sign_in(live_api, VIEWER_TOKEN)
    inbox = assert_safe_page(viewer.get("/ui/approvals"))
    assert post_forms(inbox) == ["/ui/logout"]
    assert ">Approve</button>" not in inbox
