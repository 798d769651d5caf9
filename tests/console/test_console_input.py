"""Whatever a client sends, the console answers it without a 500 (SPEC §6, §13).

Cookies and form fields with characters outside ASCII are simply not valid (a cookie that is
not ours: signed out; a CSRF token that is not the form's: 403); a body that is not a form
carries no CSRF token (403); a path naming something that cannot exist is not found (404, as
the API answers). Raw header bytes go out as they are (httpx sends ``bytes`` unchanged), over
uvicorn too (``real_http``).
"""

from __future__ import annotations

import httpx
import pytest

from tests.console.helpers import QUICK, V1, create, csrf_of, sign_in, start
from tests.plugins.live_api import OPERATOR_TOKEN, VIEWER_TOKEN, LiveApi

pytestmark = pytest.mark.real_http

_REFUSED = "did not come from this console"
_FORM = "application/x-www-form-urlencoded"

POSTS = [
    "/ui/logout",
    "/ui/runs/{run_id}/cancel",
    "/ui/workflows/quick/versions/1/runs",
    "/ui/approvals/some-approval/decision",
    "/ui/drafts",
    "/ui/drafts/some-draft/approve",
    "/ui/drafts/some-draft/reject",
]
"""Every state-changing console route but the sign-in (paths of things that may not exist:
the CSRF token is checked before anything else)."""


@pytest.fixture
def run_id(live_api: LiveApi) -> str:
    create(live_api, QUICK)
    return start(live_api, "quick")


@pytest.fixture
def operator_browser(live_api: LiveApi) -> httpx.Client:
    return sign_in(live_api, OPERATOR_TOKEN)


def _runs(live_api: LiveApi) -> list[str]:
    return [r["run_id"] for r in live_api.viewer.get(f"{V1}/runs").json()["items"]]


# -- cookies and CSRF tokens outside ASCII ------------------------------------------------------


@pytest.mark.parametrize(
    "cookie",
    [
        pytest.param(b"workload_session=abc.\xe9", id="latin-1-mac"),
        pytest.param(b"workload_session=\xe9\xe9.abc", id="latin-1-payload"),
        pytest.param("workload_session=abc.\u00e9\u20ac".encode(), id="utf-8-mac"),
    ],
)
def test_a_non_ascii_session_cookie_is_no_session(
    live_api: LiveApi, run_id: str, cookie: bytes
) -> None:
    client = live_api.client(None)
    headers = {b"Cookie": cookie}
    page = client.get("/ui/runs", headers=headers)
    assert page.status_code == 303, page.text
    assert page.headers["location"].startswith("/ui/login")
    stream = client.get(f"{V1}/runs/{run_id}/events/stream", headers=headers)
    assert stream.status_code == 401, stream.text
    unknown = client.get(f"{V1}/runs/x/events/stream", headers=headers)
    assert unknown.status_code == 401, unknown.text
    answer = client.post(f"/ui/runs/{run_id}/cancel", headers=headers, data={"csrf": "x"})
    assert answer.status_code == 403, answer.text
    assert _REFUSED in answer.text


@pytest.mark.parametrize(
    ("cookie", "csrf"),
    [
        pytest.param(b"workload_login=abc", "\u00e9", id="csrf"),
        pytest.param(b"workload_login=abc", "x\u20ac" * 30, id="csrf-utf-8"),
        pytest.param(b"workload_login=\xe9", "abc", id="nonce"),
        pytest.param(b"workload_login=\xe9", "\u00e9", id="both"),
    ],
)
def test_a_non_ascii_sign_in_csrf_token_is_403(live_api: LiveApi, cookie: bytes, csrf: str) -> None:
    client = live_api.client(None)
    answer = client.post(
        "/ui/login",
        headers={b"Cookie": cookie},
        data={"csrf": csrf, "token": OPERATOR_TOKEN},
    )
    assert answer.status_code == 403, answer.text
    assert "workload_session" not in answer.headers.get("set-cookie", "")


@pytest.mark.parametrize("path", POSTS)
@pytest.mark.parametrize("csrf", ["\u00e9", "\u20ac" * 43, "x\x00"], ids=["e", "euros", "nul"])
def test_a_non_ascii_csrf_token_is_403(
    live_api: LiveApi, operator_browser: httpx.Client, run_id: str, path: str, csrf: str
) -> None:
    answer = operator_browser.post(
        path.format(run_id=run_id), data={"csrf": csrf, "input": "{}", "prompt": "p"}
    )
    assert answer.status_code == 403, answer.text
    assert _REFUSED in answer.text
    assert _runs(live_api) == [run_id], "nothing was done"
    assert operator_browser.get("/ui/runs").status_code == 200, "still signed in"


# -- a body that is not a form ---------------------------------------------------------------


@pytest.mark.parametrize("path", POSTS)
@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        pytest.param("application/json", b'{"csrf": "%s", "input": "{}"}', id="json"),
        pytest.param("text/plain", b"csrf=%s", id="text"),
        pytest.param("multipart/form-data; boundary=x", b"--x--", id="multipart"),
        pytest.param(_FORM, b"csrf=%s&input=\xff", id="form-not-utf-8"),
        pytest.param(
            _FORM, b"csrf=%s&" + b"&".join(b"f%d=1" % n for n in range(60)), id="form-of-61-fields"
        ),
    ],
)
def test_a_body_that_is_not_a_form_is_403(
    live_api: LiveApi,
    operator_browser: httpx.Client,
    run_id: str,
    path: str,
    content_type: str,
    body: bytes,
) -> None:
    """Even with the session's own CSRF token inside: only a form (one a browser sends) carries
    one."""
    token = csrf_of(operator_browser.get("/ui/runs").text).encode()
    answer = operator_browser.post(
        path.format(run_id=run_id),
        content=body.replace(b"%s", token),
        headers={"Content-Type": content_type},
    )
    assert answer.status_code == 403, answer.text
    assert _REFUSED in answer.text
    assert _runs(live_api) == [run_id], "nothing was done"


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        pytest.param("application/json", b'{"csrf": "%s", "token": "%t"}', id="json"),
        pytest.param(_FORM, b"csrf=%s&token=%t&next=\xff", id="form-not-utf-8"),
    ],
)
def test_a_sign_in_that_is_not_a_form_is_403(
    live_api: LiveApi, content_type: str, body: bytes
) -> None:
    client = live_api.client(None)
    form = client.get("/ui/login")
    content = body.replace(b"%s", csrf_of(form.text).encode())
    content = content.replace(b"%t", OPERATOR_TOKEN.encode())
    answer = client.post("/ui/login", content=content, headers={"Content-Type": content_type})
    assert answer.status_code == 403, answer.text
    assert "workload_session" not in answer.headers.get("set-cookie", "")


# -- path parameters that cannot name anything ------------------------------------------------

_BAD_IDS = ["%00", "wf1%00", "%00wf1", "%FF", "%C3%A9", "a%0Ab", "UPPER", "x" * 200]

GET_PAGES = [
    "/ui/workflows/{bad}",
    "/ui/workflows/{bad}/versions/1",
    "/ui/workflows/quick/versions/{bad}",
    "/ui/runs/{bad}",
    "/ui/runs/{bad}/live",
    "/ui/runs/{bad}/events",
    "/ui/runs/{bad}/tasks/a/steps",
    "/ui/runs/{run_id}/tasks/{bad}/steps",
    "/ui/approvals/{bad}",
    "/ui/drafts/{bad}",
    "/ui/drafts/{bad}/live",
]
POST_PAGES = [
    "/ui/workflows/{bad}/versions/1/runs",
    "/ui/workflows/quick/versions/{bad}/runs",
    "/ui/runs/{bad}/cancel",
    "/ui/approvals/{bad}/decision",
    "/ui/drafts/{bad}/approve",
    "/ui/drafts/{bad}/reject",
]


@pytest.mark.parametrize("bad", ["%C2%B2", "%D9%A1"], ids=["superscript-two", "arabic-one"])
def test_a_version_spelled_with_other_digits_is_404(
    live_api: LiveApi, operator_browser: httpx.Client, run_id: str, bad: str
) -> None:
    # Digits to str.isdigit ("²", Arabic-Indic one), never a version: int("²") raised (a 500),
    # and "١" showed version 1 under a path the API answers 404.
    page = f"/ui/workflows/quick/versions/{bad}"
    shown = operator_browser.get(page)
    assert shown.status_code == 404, shown.text
    assert shown.headers["content-type"].startswith("text/html")
    token = csrf_of(operator_browser.get("/ui/runs").text)
    started = operator_browser.post(f"{page}/runs", data={"csrf": token, "input": "{}"})
    assert started.status_code == 404, started.text
    assert started.headers["content-type"].startswith("text/html")
    assert _runs(live_api) == [run_id], "nothing was started"


@pytest.mark.parametrize("bad", _BAD_IDS)
@pytest.mark.parametrize("page", GET_PAGES)
def test_a_page_of_something_that_cannot_exist_is_404(
    live_api: LiveApi, run_id: str, page: str, bad: str
) -> None:
    viewer = sign_in(live_api, VIEWER_TOKEN)
    answer = viewer.get(page.format(bad=bad, run_id=run_id))
    assert answer.status_code == 404, answer.text
    assert answer.headers["content-type"].startswith("text/html")
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]


@pytest.mark.parametrize("bad", _BAD_IDS)
@pytest.mark.parametrize("page", POST_PAGES)
def test_a_write_to_something_that_cannot_exist_is_404(
    live_api: LiveApi, operator_browser: httpx.Client, run_id: str, page: str, bad: str
) -> None:
    token = csrf_of(operator_browser.get("/ui/runs").text)
    form = {
        "csrf": token,
        "input": "{}",
        "decision": "approve",
        "arguments_digest": "sha256:" + "0" * 64,
        "definition_hash": "sha256:" + "0" * 64,
    }
    answer = operator_browser.post(page.format(bad=bad, run_id=run_id), data=form)
    assert answer.status_code == 404, answer.text
    assert answer.headers["content-type"].startswith("text/html")
    assert _runs(live_api) == [run_id], "nothing was done"
