"""Approvals and drafts in a real browser (SPEC §11, §13): Playwright driving Debian's chromium.

The service runs over real HTTP and PostgreSQL (``real_http_only``). An agent on the mock model
calls ``deploy``, an in-process tool that needs approval, so "the tool ran once" is one
succeeded ``tool_call`` step of its journal. Each test saves a screenshot of every page it
visits under its ``tmp_path/shots`` (checking that every control on it has a name) and works
the decision forms with the keyboard. Select these tests with ``-m browser``.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.console.browsing import shoot, sign_in, tab_to
from tests.console.conftest import OpenPage
from tests.console.helpers import (
    DEPLOY_ARGUMENTS,
    NIGHTLY,
    NIGHTLY_V2,
    SELF_LOOP,
    V1,
    create,
    create_draft,
    deployer,
    generated,
    pending_approval,
    script,
    start,
    steps,
)
from tests.plugins.live_api import OPERATOR_TOKEN, VIEWER_TOKEN, LiveApi

pytestmark = [pytest.mark.browser, pytest.mark.real_http_only]

WAITING_COLOUR = "rgb(255, 244, 214)"
"""The fill of the waiting statuses (``waiting_retry``, ``waiting_approval``) in console.css."""


def approval_of(live_api: LiveApi, approval_id: str) -> dict[str, Any]:
    found: dict[str, Any] = live_api.viewer.get(f"{V1}/approvals/{approval_id}").json()
    return found


def decide_by_keyboard(page: Page, comment: str, button: str) -> None:
    """Type the comment, then Tab to the button and press Enter."""
    page.get_by_label("Comment").focus()
    page.keyboard.type(comment)
    page.keyboard.press("Tab")
    if button == "Reject":
        page.keyboard.press("Tab")
    expect(page.get_by_role("button", name=button)).to_be_focused()
    page.keyboard.press("Enter")


def test_an_operator_approves_from_the_inbox_and_the_agent_finishes(
    live_api: LiveApi, browser: OpenPage, shots: Path
) -> None:
    create(live_api, deployer())
    run_id = start(live_api, "deployer")
    approval = pending_approval(live_api, run_id)
    page = browser("operator")
    sign_in(page, live_api, OPERATOR_TOKEN)

    # The run waits: its status and its task are coloured as waiting, and link the approval.
    page.goto(f"{live_api.base_url}/ui/runs/{run_id}")
    status = page.locator("#run-status")
    expect(status).to_have_text("waiting_approval")
    assert status.evaluate("e => getComputedStyle(e).backgroundColor") == WAITING_COLOUR
    node = page.locator("svg.dag g.node[data-task=agent] rect")
    assert node.evaluate("e => getComputedStyle(e).fill") == WAITING_COLOUR
    expect(page.get_by_role("link", name="pending approval of deploy")).to_be_visible()
    shoot(page, shots, "run-waiting-approval")

    # To the inbox with the keyboard, then to the approval.
    tab_to(page, "Approvals")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{live_api.base_url}/ui/approvals")
    row = page.locator(f"#approvals tr[data-approval='{approval['approval_id']}']")
    expect(row).to_have_attribute("data-status", "pending")
    expect(row.locator("pre")).to_contain_text('"env": "prod"')
    shoot(page, shots, "approvals-inbox")
    row.get_by_role("link", name="deploy").click()
    expect(page.get_by_role("heading", name="Approval of deploy")).to_be_visible()
    expect(page.locator("#arguments")).to_contain_text('"services": [')
    expect(page.locator("#arguments-digest")).to_have_text(approval["arguments_digest"])
    shoot(page, shots, "approval-pending")

    decide_by_keyboard(page, "ship it", "Approve")
    expect(page.locator("#approval-status")).to_have_text("approved")
    expect(page.locator("#decided-by")).to_have_text(re.compile(r"^operator:[0-9a-f]{12}$"))
    expect(page.locator("#decision-comment")).to_have_text("ship it")
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    shoot(page, shots, "approval-approved")

    # The agent went on and finished; the tool ran once, with exactly those arguments.
    page.get_by_role("link", name=run_id).click()
    expect(page.locator("#run-status")).to_have_text("succeeded")
    table = page.locator("#steps-agent tbody tr")
    expect(table).to_have_count(3)
    expect(page.locator("#steps-agent tr[data-step='1#2']")).to_have_attribute(
        "data-status", "succeeded"
    )
    page.get_by_text("Step 2 of attempt 1").click()
    expect(page.locator("#step-agent-1-2 pre").last).to_contain_text('"services": [')
    expect(page.locator("#run-usage")).to_contain_text("2 model calls · 1 tool call")
    expect(page.get_by_role("link", name="pending approval of deploy")).to_have_count(0)
    shoot(page, shots, "run-agent-steps")
    tools = [s for s in steps(live_api, run_id) if s["kind"] == "tool_call"]
    assert [(t["status"], t["response"]) for t in tools] == [
        ("succeeded", {"output": DEPLOY_ARGUMENTS["output"]})
    ]
    page.goto(f"{live_api.base_url}/ui/runs/{run_id}/tasks/agent/steps")
    expect(page.locator("#steps-agent tbody tr")).to_have_count(3)
    shoot(page, shots, "agent-steps")


def test_an_operator_rejects_and_the_model_is_told(
    live_api: LiveApi, browser: OpenPage, shots: Path
) -> None:
    create(live_api, deployer())
    run_id = start(live_api, "deployer")
    approval = pending_approval(live_api, run_id)
    page = browser("operator")
    sign_in(page, live_api, OPERATOR_TOKEN)
    page.goto(f"{live_api.base_url}/ui/runs/{run_id}")
    page.get_by_role("link", name="approval of deploy for agent").click()
    expect(page.get_by_role("heading", name="Approval of deploy")).to_be_visible()

    # Arguments other than those shown (as if they changed in between): refused, said so.
    page.locator("input[name=arguments_digest]").evaluate(
        "e => { e.value = 'sha256:' + '0'.repeat(64); }"
    )
    decide_by_keyboard(page, "looks fine", "Approve")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Nothing was decided")
    expect(alert).to_contain_text("digest differs")
    assert approval_of(live_api, approval["approval_id"])["status"] == "pending"
    shoot(page, shots, "approval-changed")

    page.get_by_label("Comment").fill("")
    decide_by_keyboard(page, "not on a Friday", "Reject")
    expect(page.locator("#approval-status")).to_have_text("rejected")
    expect(page.locator("#decision-comment")).to_have_text("not on a Friday")
    shoot(page, shots, "approval-rejected")

    page.get_by_role("link", name=run_id).click()
    expect(page.locator("#run-status")).to_have_text("succeeded")
    expect(page.locator("#steps-agent tr[data-step='1#2']")).to_have_attribute(
        "data-status", "failed"
    )
    page.get_by_text("Step 3 of attempt 1").click()
    told = page.locator("#step-agent-1-3 pre").first
    expect(told).to_contain_text("rejected by operator:")
    expect(told).to_contain_text("not on a Friday")
    shoot(page, shots, "run-after-rejection")
    journal = steps(live_api, run_id)
    assert [s["status"] for s in journal if s["kind"] == "tool_call"] == ["failed"]
    assert "not on a Friday" in journal[-1]["request"]["messages"][-1]["content"]


def test_an_operator_writes_a_draft_follows_it_and_approves_its_hash(
    live_api: LiveApi, browser: OpenPage, shots: Path, gate: threading.Event
) -> None:
    create(live_api, NIGHTLY)
    page = browser("operator")
    sign_in(page, live_api, OPERATOR_TOKEN)
    tab_to(page, "Drafts")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{live_api.base_url}/ui/drafts")
    shoot(page, shots, "drafts-empty")

    # The form with the keyboard; the model's answers wait at the gate until the page is up.
    gate.clear()
    page.get_by_label("What the workflow should do").focus()
    page.keyboard.type("every night, fetch the rows, summarize them and mail the summary")
    page.keyboard.press("Tab")
    expect(page.get_by_label("Workflow id")).to_be_focused()
    page.keyboard.type("nightly-report")
    page.keyboard.press("Tab")
    expect(page.get_by_role("textbox", name=re.compile("^Model"))).to_be_focused()
    expect(page.get_by_role("textbox", name=re.compile("^Model"))).to_have_value("mock")
    page.keyboard.press("Tab")
    page.get_by_label("Script").fill(json.dumps(script(SELF_LOOP, NIGHTLY_V2)))
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Write the draft")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/ui/drafts/[0-9a-f-]{36}$"))
    draft_id = page.url.rsplit("/", 1)[1]
    status = page.locator("#draft-status")
    expect(status).to_have_text("generating")
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    shoot(page, shots, "draft-generating")

    # It follows the generation with no reload.
    page.evaluate("window.__notReloaded = true")
    gate.set()
    expect(status).to_have_text("ready")
    assert page.evaluate("window.__notReloaded") is True, "the page was reloaded"
    draft = generated(live_api, draft_id)
    expect(page.get_by_role("heading", name="Answer 1")).to_be_visible()
    expect(page.locator("ul.problems")).to_contain_text("a task cannot depend on itself")
    expect(page.locator("svg.dag g.node")).to_have_count(3)
    expect(page.locator("#diff .d-add").filter(has_text='"key": "mail"')).to_have_count(1)
    expect(page.locator("#diff .d-del")).to_have_count(0)
    expect(page.locator("input[name=definition_hash]")).to_have_value(draft["definition_hash"])
    shoot(page, shots, "draft-ready")

    page.get_by_role("button", name="Approve").focus()
    page.keyboard.press("Enter")
    expect(status).to_have_text("approved")
    shoot(page, shots, "draft-approved")
    page.get_by_role("link", name="nightly-report version 2").click()
    expect(page.get_by_role("heading", name="nightly-report version 2")).to_be_visible()
    expect(page.locator("svg.dag g.node")).to_have_count(3)
    version = live_api.viewer.get(f"{V1}/workflows/nightly-report/versions/2").json()
    assert version["definition"] == draft["definition"]
    assert version["definition_hash"] == draft["definition_hash"]
    page.get_by_role("link", name="Drafts").click()
    expect(page.locator(f"#drafts tr[data-draft='{draft_id}']")).to_have_attribute(
        "data-status", "approved"
    )
    shoot(page, shots, "drafts")


def test_a_viewer_sees_no_decision_controls_and_a_forged_decision_is_refused(
    live_api: LiveApi, browser: OpenPage, shots: Path
) -> None:
    create(live_api, deployer())
    run_id = start(live_api, "deployer")
    approval = pending_approval(live_api, run_id)
    draft = generated(live_api, create_draft(live_api, script(NIGHTLY)))
    page = browser("viewer")
    sign_in(page, live_api, VIEWER_TOKEN)
    for name, path in (
        ("viewer-approvals", "/ui/approvals"),
        ("viewer-approval", f"/ui/approvals/{approval['approval_id']}"),
        ("viewer-drafts", "/ui/drafts"),
        ("viewer-draft", f"/ui/drafts/{draft['draft_id']}"),
        ("viewer-run-waiting", f"/ui/runs/{run_id}"),
    ):
        page.goto(live_api.base_url + path)
        expect(page.locator("main h1")).to_be_visible()
        expect(page.locator("form[method=post]:not([action='/ui/logout'])")).to_have_count(0)
        for button in ("Approve", "Reject", "Write the draft"):
            expect(page.get_by_role("button", name=button)).to_have_count(0)
        shoot(page, shots, name)
    # Forged from the viewer's own browser with a valid CSRF token of the session: refused.
    csrf = page.locator("form[action='/ui/logout'] input[name=csrf]").get_attribute("value")
    assert csrf
    base = live_api.base_url
    forged = {
        f"/ui/approvals/{approval['approval_id']}/decision": {
            "decision": "approve",
            "arguments_digest": approval["arguments_digest"],
        },
        f"/ui/drafts/{draft['draft_id']}/approve": {"definition_hash": draft["definition_hash"]},
        f"/ui/drafts/{draft['draft_id']}/reject": {},
        "/ui/drafts": {"prompt": "a workflow", "model": "mock"},
    }
    for path, fields in forged.items():
        assert page.request.post(base + path, form=fields | {"csrf": csrf}).status == 403, path
    assert approval_of(live_api, approval["approval_id"])["status"] == "pending"
    drafts = live_api.viewer.get(f"{V1}/drafts").json()["items"]
    assert [(d["draft_id"], d["status"]) for d in drafts] == [(draft["draft_id"], "ready")]
    assert live_api.viewer.get(f"{V1}/workflows/nightly-report").status_code == 404


def test_an_operator_approves_on_the_inbox_itself_by_keyboard(
    live_api: LiveApi, browser: OpenPage, shots: Path
) -> None:
    create(live_api, deployer())
    run_id = start(live_api, "deployer")
    approval = pending_approval(live_api, run_id)
    page = browser("operator")
    sign_in(page, live_api, OPERATOR_TOKEN)
    page.goto(f"{live_api.base_url}/ui/approvals")
    row = page.locator(f"#approvals tr[data-approval='{approval['approval_id']}']")
    expect(
        row.get_by_role("button", name=f"Reject deploy ({approval['approval_id']})")
    ).to_be_visible()
    shoot(page, shots, "approvals-inbox-decide")
    tab_to(page, "Approve")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{live_api.base_url}/ui/approvals")
    expect(page.get_by_text("No pending approvals.")).to_be_visible()
    assert approval_of(live_api, approval["approval_id"])["status"] == "approved"
    assert live_api.wait_for_run(run_id)["status"] == "succeeded"
