"""The web console over HTTP (SPEC §13): sign-in, sessions, CSRF, roles, headers, no token leaks.

In-process by default (the container's app, the in-memory store); the cases marked
``real_http`` run again over uvicorn and PostgreSQL. The browser tests (``test_browser.py``)
drive the same pages in Chromium.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from email.utils import parsedate_to_datetime
from http.cookies import SimpleCookie
from typing import Any, TypeVar

import anyio
import httpx
import pytest

from tests.console.helpers import (
    QUICK,
    SLEEPY,
    V1,
    assert_safe_page,
    create,
    csrf_of,
    sign_in,
    start,
)
from tests.plugins.live_api import OPERATOR_TOKEN, VIEWER_TOKEN, WORKER_TOKEN, LiveApi
from workload_api.auth import Principal, Role
from workload_api.console import Sessions
from workload_api.console.signin import SIGN_IN_BODY_BYTES

T = TypeVar("T")

PAGES = {
    "runs": "/ui/runs",
    "run": "/ui/runs/{run_id}",
    "run-live": "/ui/runs/{run_id}/live",
    "run-events": "/ui/runs/{run_id}/events",
    "runs-rows": "/ui/runs/rows",
    "workflows": "/ui/workflows",
    "workflow": "/ui/workflows/sleepy",
    "version": "/ui/workflows/sleepy/versions/1",
    "workers": "/ui/workers",
    "approvals": "/ui/approvals",
    "drafts": "/ui/drafts",
    "cluster": "/ui/cluster",
    "runs-window": "/ui/runs?since=24h&created_after=2026-12-01T09:30"
    "&created_before=2999-01-01T00:00",
}


@pytest.fixture
def running(live_api: LiveApi) -> str:
    create(live_api, SLEEPY)
    return start(live_api, "sleepy")


@pytest.fixture
def operator_browser(live_api: LiveApi) -> httpx.Client:
    return sign_in(live_api, OPERATOR_TOKEN)


@pytest.fixture
def viewer_browser(live_api: LiveApi) -> httpx.Client:
    return sign_in(live_api, VIEWER_TOKEN)


def call(function: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Run a coroutine function of the in-process service (in-memory store) from a test."""
    return anyio.run(functools.partial(function, *args, **kwargs))


def session_cookie(response: httpx.Response) -> SimpleCookie:
    for header in response.headers.get_list("set-cookie"):
        if header.startswith("workload_session="):
            cookie: SimpleCookie = SimpleCookie()
            cookie.load(header)
            return cookie
    raise AssertionError(f"no session cookie in {response.headers.get_list('set-cookie')}")


def assert_expires_after(expires: str, seconds: int, before: float, after: float) -> None:
    """An ``Expires`` attribute says the moment ``Max-Age`` does (``seconds`` after the answer,
    sent between ``before`` and ``after``; the date has whole seconds)."""
    assert expires, "no Expires attribute"
    moment = parsedate_to_datetime(expires).timestamp()
    assert int(before) + seconds <= moment <= after + seconds, (expires, before, after)


# -- sign-in -----------------------------------------------------------------------------------


@pytest.mark.real_http
def test_sign_in_sets_a_signed_httponly_strict_expiring_cookie(live_api: LiveApi) -> None:
    client = live_api.client(None)
    form = client.get("/ui/login")
    before = time.time()
    answer = client.post(
        "/ui/login", data={"csrf": csrf_of(form.text), "token": OPERATOR_TOKEN, "next": "/ui/runs"}
    )
    after = time.time()
    assert answer.status_code == 303
    morsel = session_cookie(answer)["workload_session"]
    assert morsel["httponly"] is True
    assert morsel["samesite"].lower() == "strict"
    assert morsel["max-age"] == "28800"
    assert_expires_after(morsel["expires"], 28800, before, after)
    assert morsel["path"] == "/"
    assert not morsel["secure"], "plain HTTP: a Secure cookie would never come back"
    assert OPERATOR_TOKEN not in answer.headers.get("set-cookie", "")
    assert OPERATOR_TOKEN not in answer.headers["location"]
    page = client.get("/ui/runs")
    assert page.status_code == 200
    assert OPERATOR_TOKEN not in page.text
    assert "operator" in page.text


def test_cookies_are_secure_when_configured(live_api: LiveApi) -> None:
    sessions: Sessions = live_api.container.sessions()
    assert sessions.secure("https") is True
    assert sessions.secure("http") is False


@pytest.mark.parametrize(
    ("token", "status", "text"),
    [
        pytest.param("wrong-token-0000", 401, "not valid", id="wrong-token"),
        pytest.param(WORKER_TOKEN, 403, "Worker tokens cannot sign in", id="worker-token"),
        pytest.param("", 401, "not valid", id="empty"),
    ],
)
def test_a_bad_token_does_not_sign_in(
    live_api: LiveApi, token: str, status: int, text: str
) -> None:
    client = live_api.client(None)
    form = client.get("/ui/login")
    answer = client.post("/ui/login", data={"csrf": csrf_of(form.text), "token": token})
    assert answer.status_code == status
    assert text in answer.text
    assert "workload_session" not in answer.headers.get("set-cookie", "")
    if token:
        assert token not in answer.text, "the page never echoes a token"
    assert client.get("/ui/runs").status_code == 303


@pytest.mark.parametrize(
    ("next_value", "target"),
    [
        pytest.param("/ui/workers", "/ui/workers", id="console-page"),
        pytest.param("https://evil.example/", "/ui/runs", id="other-site"),
        pytest.param("//evil.example/ui/", "/ui/runs", id="scheme-relative"),
        pytest.param("/api/v1/runs", "/ui/runs", id="not-the-console"),
        pytest.param("/ui/../api/v1/runs", "/ui/runs", id="dot-dot"),
        pytest.param("/ui/runs\r\nX: y", "/ui/runs", id="header-injection"),
    ],
)
def test_sign_in_goes_back_only_to_the_console(
    live_api: LiveApi, next_value: str, target: str
) -> None:
    client = live_api.client(None)
    form = client.get("/ui/login")
    answer = client.post(
        "/ui/login",
        data={"csrf": csrf_of(form.text), "token": VIEWER_TOKEN, "next": next_value},
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == target


def test_pages_send_a_signed_out_browser_to_sign_in(live_api: LiveApi) -> None:
    answer = live_api.anonymous.get("/ui/runs?status=running")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui/login?next=%2Fui%2Fruns%3Fstatus%3Drunning"
    assert live_api.anonymous.get("/ui/").headers["location"] == "/ui/runs"


def test_a_bearer_token_is_no_console_session(live_api: LiveApi) -> None:
    assert live_api.operator.get("/ui/runs").status_code == 303


def test_sign_out_ends_the_session(live_api: LiveApi, operator_browser: httpx.Client) -> None:
    page = operator_browser.get("/ui/runs")
    answer = operator_browser.post("/ui/logout", data={"csrf": csrf_of(page.text)})
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui/login"
    assert 'workload_session=""' in answer.headers["set-cookie"]
    assert operator_browser.get("/ui/runs").status_code == 303


# -- sessions ----------------------------------------------------------------------------------


def test_an_expired_session_is_signed_out(live_api: LiveApi) -> None:
    sessions: Sessions = live_api.container.sessions()
    principal = call(live_api.container.authenticator().identify, OPERATOR_TOKEN)
    assert principal is not None
    now = int(live_api.container.clock().now().timestamp())
    expired = call(sessions.issue, principal, now=now - sessions.max_age - 1)
    fresh = call(sessions.issue, principal, now=now)
    client = live_api.client(None)
    client.cookies.set("workload_session", expired)
    assert client.get("/ui/runs").status_code == 303
    client.cookies.set("workload_session", fresh)
    assert client.get("/ui/runs").status_code == 200


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda c: c[:-2] + ("AA" if c[-2:] != "AA" else "BB"), id="signature"),
        pytest.param(lambda c: "e30" + c[3:], id="payload"),
        pytest.param(lambda c: c.split(".")[0], id="unsigned"),
        pytest.param(lambda c: c + "." + c, id="doubled"),
        pytest.param(lambda c: "x" * 5000, id="huge"),
    ],
)
def test_a_forged_session_is_refused(
    live_api: LiveApi, operator_browser: httpx.Client, forge: Callable[[str], str]
) -> None:
    cookie = operator_browser.cookies["workload_session"]
    client = live_api.client(None)
    client.cookies.set("workload_session", forge(cookie))
    assert client.get("/ui/runs").status_code == 303


def test_a_removed_token_ends_its_sessions(live_api: LiveApi) -> None:
    sessions: Sessions = live_api.container.sessions()
    gone = Principal("sha256:" + "0" * 32, Role.OPERATOR)  # no configured token has this id
    cookie = call(sessions.issue, gone)
    client = live_api.client(None)
    client.cookies.set("workload_session", cookie)
    assert client.get("/ui/runs").status_code == 303


# -- CSRF and roles ----------------------------------------------------------------------------

FORMS = {
    "cancel": ("/ui/runs/{run_id}/cancel", {}),
    "start": ("/ui/workflows/sleepy/versions/1/runs", {"input": "{}"}),
    "logout": ("/ui/logout", {}),
}


@pytest.mark.real_http
@pytest.mark.parametrize(
    ("form", "csrf"),
    [
        pytest.param(form, csrf, id=f"{form}-{name}")
        for form in FORMS
        for name, csrf in (("missing", None), ("wrong", "not-the-token"), ("empty", ""))
    ],
)
def test_a_form_without_its_csrf_token_is_403(
    live_api: LiveApi, operator_browser: httpx.Client, running: str, form: str, csrf: str | None
) -> None:
    path, fields = FORMS[form]
    data = dict(fields) | ({} if csrf is None else {"csrf": csrf})
    answer = operator_browser.post(path.format(run_id=running), data=data)
    assert answer.status_code == 403, answer.text
    assert "did not come from this console" in answer.text
    runs = live_api.viewer.get(f"{V1}/runs").json()["items"]
    assert [(r["run_id"], r["cancel_requested"]) for r in runs] == [(running, False)]
    assert operator_browser.get("/ui/runs").status_code == 200, "still signed in"


def test_another_sessions_csrf_token_is_403(
    live_api: LiveApi, operator_browser: httpx.Client, running: str
) -> None:
    other = sign_in(live_api, OPERATOR_TOKEN)
    token = csrf_of(other.get("/ui/runs").text)
    answer = operator_browser.post(f"/ui/runs/{running}/cancel", data={"csrf": token})
    assert answer.status_code == 403


def test_a_sign_in_without_its_csrf_token_is_403(live_api: LiveApi) -> None:
    client = live_api.client(None)
    client.get("/ui/login")
    answer = client.post("/ui/login", data={"token": OPERATOR_TOKEN, "csrf": "forged"})
    assert answer.status_code == 403
    assert "workload_session" not in answer.headers.get("set-cookie", "")


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_sign_in_body_past_8_kib_is_413(live_api: LiveApi, declared: bool) -> None:
    # Anyone may fetch the form and its cookie: a sign-in holds no more than a sign-in needs.
    client = live_api.client(None)
    client.get("/ui/login")
    body = b"token=" + b"x" * (SIGN_IN_BODY_BYTES + 1)
    headers = {"content-type": "application/x-www-form-urlencoded"}

    def chunks() -> Iterator[bytes]:
        yield body

    answer = client.post("/ui/login", content=body if declared else chunks(), headers=headers)
    assert answer.status_code == 413
    assert answer.headers["content-type"].startswith("text/html")
    assert "workload_session" not in answer.headers.get("set-cookie", "")
    page = client.get("/ui/login")  # a sign-in within the bound still works
    answer = client.post(
        "/ui/login",
        data={"token": OPERATOR_TOKEN, "csrf": csrf_of(page.text), "next": "/ui/runs"},
    )
    assert answer.status_code == 303


@pytest.mark.real_http
@pytest.mark.parametrize("form", ["cancel", "start"])
def test_viewers_see_no_write_controls_and_their_writes_are_refused(
    live_api: LiveApi, viewer_browser: httpx.Client, running: str, form: str
) -> None:
    for path in (f"/ui/runs/{running}", "/ui/workflows/sleepy/versions/1"):
        page = viewer_browser.get(path)
        assert page.status_code == 200
        assert "Cancel run" not in page.text
        assert "Start run" not in page.text
        assert re.findall(r'<form method="post" action="([^"]+)"', page.text) == ["/ui/logout"]
    token = csrf_of(viewer_browser.get("/ui/runs").text)  # a valid token of this session
    path, fields = FORMS[form]
    answer = viewer_browser.post(path.format(run_id=running), data={**fields, "csrf": token})
    assert answer.status_code == 403
    runs = live_api.viewer.get(f"{V1}/runs").json()["items"]
    assert [(r["run_id"], r["cancel_requested"]) for r in runs] == [(running, False)]


def test_operators_cancel_and_start_through_forms(
    live_api: LiveApi, operator_browser: httpx.Client, running: str
) -> None:
    page = operator_browser.get(f"/ui/runs/{running}")
    assert "Cancel run" in page.text
    answer = operator_browser.post(f"/ui/runs/{running}/cancel", data={"csrf": csrf_of(page.text)})
    assert (answer.status_code, answer.headers["location"]) == (303, f"/ui/runs/{running}")
    assert live_api.wait_for_run(running)["status"] == "canceled"
    version = operator_browser.get("/ui/workflows/sleepy/versions/1")
    key = re.search(r'name="idempotency_key" value="([^"]+)"', version.text)
    assert key is not None
    form = {"csrf": csrf_of(version.text), "input": '{"n": 1}', "idempotency_key": key[1]}
    first = operator_browser.post("/ui/workflows/sleepy/versions/1/runs", data=form)
    again = operator_browser.post("/ui/workflows/sleepy/versions/1/runs", data=form)
    assert first.status_code == again.status_code == 303
    assert first.headers["location"] == again.headers["location"], "a double submit replays"
    run_id = first.headers["location"].rsplit("/", 1)[1]
    assert live_api.viewer.get(f"{V1}/runs/{run_id}").json()["input"] == {"n": 1}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{", "not valid JSON", id="not-json"),
        pytest.param("[1]", "one JSON object", id="not-an-object"),
        pytest.param('{"a": 1, "a": 2}', "duplicate", id="duplicate-key"),
        pytest.param('{"s": "\\u0000"}', "cannot be stored", id="nul"),
    ],
)
def test_a_bad_run_input_is_shown_back(
    live_api: LiveApi, operator_browser: httpx.Client, text: str, message: str
) -> None:
    create(live_api, QUICK)
    page = operator_browser.get("/ui/workflows/quick/versions/1")
    answer = operator_browser.post(
        "/ui/workflows/quick/versions/1/runs", data={"csrf": csrf_of(page.text), "input": text}
    )
    assert answer.status_code == 400
    assert message in answer.text
    assert live_api.viewer.get(f"{V1}/runs").json()["items"] == []


# -- headers and page source -------------------------------------------------------------------


@pytest.mark.real_http
@pytest.mark.parametrize("page", PAGES)
def test_every_page_sends_security_headers_and_no_inline_script(
    live_api: LiveApi, operator_browser: httpx.Client, running: str, page: str
) -> None:
    answer = operator_browser.get(PAGES[page].format(run_id=running))
    assert answer.status_code == 200, answer.text
    assert OPERATOR_TOKEN not in assert_safe_page(answer)


@pytest.mark.parametrize("name", ["console.js", "console.css", "favicon.png"])
def test_static_files_are_served_from_the_package(live_api: LiveApi, name: str) -> None:
    answer = live_api.anonymous.get(f"/ui/static/{name}")
    assert answer.status_code == 200
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert "content-security-policy" in answer.headers
    assert live_api.anonymous.get("/ui/static/../app.py").status_code == 404


def test_login_page_sends_the_headers_too(live_api: LiveApi) -> None:
    before = time.time()
    answer = live_api.anonymous.get("/ui/login")
    after = time.time()
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert answer.headers["x-frame-options"] == "DENY"
    login = SimpleCookie()
    login.load(answer.headers["set-cookie"])
    assert login["workload_login"]["httponly"] is True
    assert login["workload_login"]["samesite"].lower() == "strict"
    assert login["workload_login"]["max-age"] == "3600"
    assert_expires_after(login["workload_login"]["expires"], 3600, before, after)


# -- the event stream with the session cookie --------------------------------------------------


@pytest.mark.parametrize("token", [OPERATOR_TOKEN, VIEWER_TOKEN], ids=["operator", "viewer"])
def test_the_event_stream_accepts_the_session_cookie(live_api: LiveApi, token: str) -> None:
    create(live_api, QUICK)
    run_id = start(live_api, "quick")
    live_api.wait_for_run(run_id)
    browser = sign_in(live_api, token)
    answer = browser.get(f"{V1}/runs/{run_id}/events/stream")
    assert answer.status_code == 200
    assert "event: end" in answer.text
    # Only the stream: other API operations still need a bearer token.
    assert browser.get(f"{V1}/runs/{run_id}").status_code == 401
    assert live_api.anonymous.get(f"{V1}/runs/{run_id}/events/stream").status_code == 401


# -- no token in any log -----------------------------------------------------------------------


@pytest.fixture
def every_log_line(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.DEBUG):
        yield caplog


@pytest.mark.real_http
@pytest.mark.parametrize(
    "token",
    [OPERATOR_TOKEN, "wrong-token-pasted-0000", WORKER_TOKEN],
    ids=["ok", "wrong", "worker"],
)
def test_a_pasted_token_never_reaches_the_log(
    live_api: LiveApi, every_log_line: pytest.LogCaptureFixture, token: str
) -> None:
    client = live_api.client(None)
    form = client.get("/ui/login")
    client.post("/ui/login", data={"csrf": csrf_of(form.text), "token": token})
    client.get("/ui/runs")
    lines = [r.getMessage() + repr(getattr(r, "fields", {})) for r in every_log_line.records]
    assert any("/ui/login" in line for line in lines), "the requests were logged"
    leaked = [line for line in lines if token in line]
    assert not leaked, leaked


def test_a_long_history_is_shown_by_its_latest_events_and_paged(
    live_api: LiveApi, operator_browser: httpx.Client
) -> None:
    """A run with hundreds of events: its page starts with the latest 100, the history pages."""
    wide = {"id": "wide", "tasks": [{"key": f"t{n:03}", "action": "mock"} for n in range(120)]}
    create(live_api, wide)
    run_id = start(live_api, "wide")
    live_api.wait_for_run(run_id)
    every = []
    cursor = None
    while True:
        params = {"limit": 200} | ({"cursor": cursor} if cursor else {})
        page = live_api.viewer.get(f"{V1}/runs/{run_id}/events", params=params).json()
        every += [e["sequence"] for e in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(every) > 300
    shown = re.findall(
        r'<tr data-sequence="(\d+)">', operator_browser.get(f"/ui/runs/{run_id}").text
    )
    assert [int(s) for s in shown] == every[-100:]
    history = operator_browser.get(f"/ui/runs/{run_id}/events")
    assert history.text.count("<tr><td>") == 200
    following = re.search(r'href="([^"]+)" rel="next"', history.text)
    assert following is not None
    second = operator_browser.get(following[1].replace("&amp;", "&"))
    assert second.status_code == 200
    assert f"<tr><td>{every[200]}</td>" in second.text
    first_page = f'<a href="/ui/runs/{run_id}/events">First page</a>'
    assert first_page in history.text
    assert first_page in second.text


@pytest.mark.parametrize(
    ("path", "status", "text"),
    [
        pytest.param("/ui/runs?status=bogus", 400, "unknown status", id="unknown-status"),
        pytest.param("/ui/runs?workflow_id=Not%20One", 400, "not a valid", id="bad-workflow-id"),
        pytest.param("/ui/runs?cursor=junk", 400, "cursor", id="bad-cursor"),
        pytest.param("/ui/runs/not-a-run", 404, "not-a-run", id="unknown-run"),
        pytest.param("/ui/runs/not-a-run/events", 404, "not-a-run", id="unknown-run-events"),
        pytest.param("/ui/workflows/nope", 404, "nope", id="unknown-workflow"),
        pytest.param("/ui/workflows/quick/versions/01", 404, "version", id="odd-version"),
        pytest.param("/ui/workflows/quick/versions/9", 404, "version", id="unknown-version"),
    ],
)
def test_errors_are_pages_with_the_apis_statuses(
    live_api: LiveApi, viewer_browser: httpx.Client, path: str, status: int, text: str
) -> None:
    create(live_api, QUICK)
    answer = viewer_browser.get(path)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("text/html")
    assert text in answer.text
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]


@pytest.mark.parametrize("path", ["/ui/nowhere", "/ui/runs/x/nowhere", "/ui/static"])
@pytest.mark.parametrize("signed_in", [True, False], ids=["signed-in", "signed-out"])
def test_an_unknown_console_address_is_a_404_page(
    live_api: LiveApi, path: str, signed_in: bool
) -> None:
    client = sign_in(live_api, VIEWER_TOKEN) if signed_in else live_api.anonymous
    answer = client.get(path)
    assert answer.status_code == 404, answer.text
    html = assert_safe_page(answer)
    assert "There is no such page in the console." in html
    assert ('id="role"' in html) is signed_in
    # The API's unknown addresses stay problem+json.
    api = live_api.anonymous.get("/api/v1/nowhere")
    assert api.status_code == 404
    assert api.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/ui/logout"), ("PUT", "/ui/runs"), ("DELETE", "/ui/workflows")],
)
def test_a_method_a_console_address_does_not_take_is_a_405_page(
    live_api: LiveApi, method: str, path: str
) -> None:
    client = sign_in(live_api, OPERATOR_TOKEN)
    answer = client.request(method, path)
    assert answer.status_code == 405, answer.text
    assert answer.headers["allow"], "the methods it takes"
    html = assert_safe_page(answer)
    assert "does not take that request" in html
    # The API's stay problem+json.
    api = live_api.operator.delete(f"{V1}/runs")
    assert api.status_code == 405
    assert api.headers["content-type"].startswith("application/problem+json")
