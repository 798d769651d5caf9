"""Every form of approvals and drafts (SPEC §13): CSRF first, operators only, errors as pages.

In-process by default; the cases marked ``real_http`` run again over uvicorn and PostgreSQL.
Each refused write is checked to have changed nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.console.helpers import (
    NIGHTLY,
    V1,
    assert_safe_page,
    create,
    create_draft,
    csrf_of,
    deployer,
    form_field,
    generated,
    pending_approval,
    post_forms,
    script,
    sign_in,
    start,
)
from tests.plugins.live_api import OPERATOR_TOKEN, VIEWER_TOKEN, LiveApi


@dataclass(frozen=True)
class Subjects:
    """A pending approval and a ready draft, to decide on."""

    approval: dict[str, Any]
    draft: dict[str, Any]

    def state(self, api: LiveApi) -> tuple[str, str, int, int]:
        """What a refused write must leave as it was."""
        approval = api.viewer.get(f"{V1}/approvals/{self.approval['approval_id']}").json()
        draft = api.viewer.get(f"{V1}/drafts/{self.draft['draft_id']}").json()
        drafts = api.viewer.get(f"{V1}/drafts").json()["items"]
        workflows = api.viewer.get(f"{V1}/workflows").json()["items"]
        return approval["status"], draft["status"], len(drafts), len(workflows)


@pytest.fixture
def subjects(live_api: LiveApi) -> Subjects:
    create(live_api, deployer())
    approval = pending_approval(live_api, start(live_api, "deployer"))
    draft = generated(live_api, create_draft(live_api, script(NIGHTLY)))
    assert draft["status"] == "ready"
    return Subjects(approval, draft)


def forms(subjects: Subjects) -> dict[str, tuple[str, dict[str, str]]]:
    """Each new form: where it goes and its fields (except the CSRF token)."""
    approval, draft = subjects.approval, subjects.draft
    return {
        "decide": (
            f"/ui/approvals/{approval['approval_id']}/decision",
            {"decision": "approve", "arguments_digest": approval["arguments_digest"]},
        ),
        "new-draft": (
            "/ui/drafts",
            {"prompt": "a workflow", "model": "mock", "script": '[{"content": "{}"}]'},
        ),
        "approve-draft": (
            f"/ui/drafts/{draft['draft_id']}/approve",
            {"definition_hash": draft["definition_hash"]},
        ),
        "reject-draft": (f"/ui/drafts/{draft['draft_id']}/reject", {}),
    }


FORMS = ["decide", "new-draft", "approve-draft", "reject-draft"]


@pytest.mark.real_http
@pytest.mark.parametrize(
    ("form", "csrf"),
    [
        pytest.param(form, csrf, id=f"{form}-{name}")
        for form in FORMS
        for name, csrf in (("missing", None), ("wrong", "not-the-token"), ("empty", ""))
    ],
)
def test_a_form_without_its_csrf_token_is_403_and_changes_nothing(
    live_api: LiveApi, subjects: Subjects, form: str, csrf: str | None
) -> None:
    browser = sign_in(live_api, OPERATOR_TOKEN)
    before = subjects.state(live_api)
    path, fields = forms(subjects)[form]
    answer = browser.post(path, data=fields | ({} if csrf is None else {"csrf": csrf}))
    assert answer.status_code == 403, answer.text
    assert "did not come from this console" in assert_safe_page(answer)
    assert subjects.state(live_api) == before


@pytest.mark.parametrize("form", FORMS)
def test_another_sessions_csrf_token_is_403(
    live_api: LiveApi, subjects: Subjects, form: str
) -> None:
    browser = sign_in(live_api, OPERATOR_TOKEN)
    other = sign_in(live_api, OPERATOR_TOKEN)
    before = subjects.state(live_api)
    path, fields = forms(subjects)[form]
    token = csrf_of(other.get("/ui/drafts").text)
    assert browser.post(path, data=fields | {"csrf": token}).status_code == 403
    assert subjects.state(live_api) == before


@pytest.mark.real_http
@pytest.mark.parametrize("form", FORMS)
def test_a_viewer_sees_no_decision_controls_and_their_forged_post_is_403(
    live_api: LiveApi, subjects: Subjects, form: str
) -> None:
    viewer = sign_in(live_api, VIEWER_TOKEN)
    approval, draft = subjects.approval, subjects.draft
    for path in (
        "/ui/approvals",
        f"/ui/approvals/{approval['approval_id']}",
        "/ui/drafts",
        f"/ui/drafts/{draft['draft_id']}",
        f"/ui/runs/{approval['run_id']}",
    ):
        page = assert_safe_page(viewer.get(path))
        assert post_forms(page) == ["/ui/logout"], path
        for control in ("Approve", "Reject", "Write the draft", 'name="definition_hash"'):
            assert control not in page, (path, control)
    assert "Waiting for an operator" in viewer.get(f"/ui/approvals/{approval['approval_id']}").text
    before = subjects.state(live_api)
    token = csrf_of(viewer.get("/ui/drafts").text)  # a valid token of the viewer's session
    path, fields = forms(subjects)[form]
    answer = viewer.post(path, data=fields | {"csrf": token})
    assert answer.status_code == 403
    assert "operators only" in answer.text
    assert subjects.state(live_api) == before


def test_operators_see_the_decision_controls(live_api: LiveApi, subjects: Subjects) -> None:
    operator = sign_in(live_api, OPERATOR_TOKEN)
    approval_page = operator.get(f"/ui/approvals/{subjects.approval['approval_id']}").text
    assert form_field(approval_page, "arguments_digest") == subjects.approval["arguments_digest"]
    draft_page = operator.get(f"/ui/drafts/{subjects.draft['draft_id']}").text
    assert form_field(draft_page, "definition_hash") == subjects.draft["definition_hash"]
    assert "/ui/drafts" in post_forms(operator.get("/ui/drafts").text)


UNKNOWN = "00000000-0000-7000-8000-000000000000"


@pytest.mark.parametrize(
    ("path", "status", "text"),
    [
        pytest.param(f"/ui/approvals/{UNKNOWN}", 404, "does not exist", id="unknown-approval"),
        pytest.param("/ui/approvals/not-an-id", 404, "does not exist", id="malformed-approval"),
        pytest.param("/ui/approvals?status=bogus", 400, "unknown status", id="bad-status"),
        pytest.param("/ui/approvals?cursor=junk", 400, "cursor", id="bad-approvals-cursor"),
        pytest.param(f"/ui/drafts/{UNKNOWN}", 404, "does not exist", id="unknown-draft"),
        pytest.param(f"/ui/drafts/{UNKNOWN}/live", 404, "does not exist", id="unknown-live"),
        pytest.param("/ui/drafts?cursor=junk", 400, "cursor", id="bad-drafts-cursor"),
        pytest.param("/ui/runs/{run_id}/tasks/nope/steps", 404, "nope", id="unknown-task"),
        pytest.param("/ui/runs/{run_id}/tasks/a%20b/steps", 404, "a b", id="malformed-task"),
        pytest.param(f"/ui/runs/{UNKNOWN}/tasks/agent/steps", 404, UNKNOWN, id="unknown-run"),
        pytest.param(
            "/ui/runs/{run_id}/tasks/agent/steps?cursor=junk", 400, "cursor", id="bad-cursor"
        ),
    ],
)
def test_errors_are_pages_with_the_apis_statuses(
    live_api: LiveApi, path: str, status: int, text: str
) -> None:
    create(live_api, deployer())
    run_id = start(live_api, "deployer")
    viewer = sign_in(live_api, VIEWER_TOKEN)
    answer = viewer.get(path.format(run_id=run_id))
    assert answer.status_code == status, answer.text
    assert text in assert_safe_page(answer)
    assert 'role="alert"' in answer.text


@pytest.mark.parametrize(
    ("path", "fields"),
    [
        pytest.param(
            f"/ui/approvals/{UNKNOWN}/decision",
            {"decision": "approve", "arguments_digest": "sha256:" + "0" * 64},
            id="decide",
        ),
        pytest.param(
            f"/ui/drafts/{UNKNOWN}/approve", {"definition_hash": "sha256:" + "0" * 64}, id="approve"
        ),
        pytest.param(f"/ui/drafts/{UNKNOWN}/reject", {}, id="reject"),
    ],
)
def test_deciding_on_nothing_is_404(live_api: LiveApi, path: str, fields: dict[str, str]) -> None:
    operator = sign_in(live_api, OPERATOR_TOKEN)
    token = csrf_of(operator.get("/ui/drafts").text)
    answer = operator.post(path, data=fields | {"csrf": token})
    assert answer.status_code == 404
    assert "does not exist" in assert_safe_page(answer)


def test_pages_of_approvals_and_drafts_need_a_session(live_api: LiveApi) -> None:
    client: httpx.Client = live_api.anonymous
    for path in ("/ui/approvals", "/ui/drafts", f"/ui/drafts/{UNKNOWN}"):
        answer = client.get(path)
        assert answer.status_code == 303
        assert answer.headers["location"].startswith("/ui/login?next=")
