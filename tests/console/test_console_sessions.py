"""Console sessions kept on the server (ADR 0022; issue 33, findings S1 and S2).

S1: a cookie and CSRF token captured before sign-out are refused afterwards. S2: a cookie made
by whoever reads the database (the stored signing key), or with a far expiry, or signed with a
replaced key, is refused; the configured max age caps every session.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable

import anyio
import pytest
from pydantic import SecretStr

from tests.console.helpers import SLEEPY, V1, create, csrf_of, sign_in
from tests.console.test_console_http import call
from tests.plugins.live_api import OPERATOR_TOKEN, LiveApi
from workload_api.auth import Authenticator, Principal
from workload_api.console import Sessions
from workload_api.console._sessions import key_id
from workload_api.service_key import ServiceKey
from workload_engine.clock import FakeClock
from workload_engine.memory import InMemoryStore

START = "/ui/workflows/sleepy/versions/1/runs"
KEY = SecretStr("k" * 32)


def _mac(key: bytes, purpose: str, value: str) -> str:
    digest = hmac.new(key, f"{purpose}|{value}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _runs(api: LiveApi) -> list[object]:
    runs: list[object] = api.viewer.get(f"{V1}/runs").json()["items"]
    return runs


def _refused(api: LiveApi, cookie: str, csrf: str) -> None:
    """``cookie`` reads nothing and, with ``csrf``, starts nothing."""
    client = api.client(None)
    client.cookies.set("workload_session", cookie)
    assert client.get("/ui/runs").status_code == 303, "the cookie still reads"
    answer = client.post(START, data={"csrf": csrf, "input": "{}"})
    assert answer.status_code == 403, "the cookie and its CSRF token still write"
    assert _runs(api) == [], "a run was started"


# -- S1: sign-out revokes ----------------------------------------------------------------------


@pytest.mark.real_http
def test_a_cookie_kept_past_sign_out_is_refused(live_api: LiveApi) -> None:
    create(live_api, SLEEPY)
    browser = sign_in(live_api, OPERATOR_TOKEN)
    page = browser.get("/ui/workflows/sleepy/versions/1")
    captured, csrf = browser.cookies["workload_session"], csrf_of(page.text)
    copy = live_api.client(None)
    copy.cookies.set("workload_session", captured)
    assert copy.get("/ui/runs").status_code == 200, "the captured cookie is a session"
    assert browser.post("/ui/logout", data={"csrf": csrf}).status_code == 303
    _refused(live_api, captured, csrf)


def test_signing_in_again_makes_a_new_csrf_token(live_api: LiveApi) -> None:
    first = sign_in(live_api, OPERATOR_TOKEN).get("/ui/runs")
    second = sign_in(live_api, OPERATOR_TOKEN).get("/ui/runs")
    assert csrf_of(first.text) != csrf_of(second.text)


# -- S2: forged, far-expiring and stale-key cookies --------------------------------------------


def _old_format(key: bytes, principal: Principal) -> tuple[str, str]:
    """The cookie the stored key signed before ADR 0022, expiring in 2100, and its CSRF."""
    sid = secrets.token_urlsafe(18)
    body = {"sid": sid, "pid": principal.id, "exp": 4102444800}
    payload = base64.urlsafe_b64encode(json.dumps(body).encode()).rstrip(b"=").decode()
    return f"{payload}.{_mac(key, 'session', payload)}", _mac(key, "csrf", sid)


def _new_format(key: bytes, principal: Principal) -> tuple[str, str]:
    """A cookie of today's form signed with the stored key, naming no session row."""
    secret = secrets.token_urlsafe(32)
    signed = f"{key_id(key)}.{secret}"
    return f"{signed}.{_mac(key, 'session', signed)}", _mac(key, "csrf", secret)


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(_old_format, id="signed-exp-2100"),
        pytest.param(_new_format, id="signed-no-session-row"),
    ],
)
def test_a_cookie_made_from_the_stored_key_is_refused(
    live_api: LiveApi, forge: Callable[[bytes, Principal], tuple[str, str]]
) -> None:
    create(live_api, SLEEPY)
    key = call(live_api.container.store().secret, "console_session")
    principal = call(live_api.container.authenticator().identify, OPERATOR_TOKEN)
    assert principal is not None
    cookie, csrf = forge(key, principal)
    _refused(live_api, cookie, csrf)


def _sessions(
    store: InMemoryStore, clock: FakeClock, key: SecretStr | None = None, max_age: int = 28800
) -> Sessions:
    tokens = Authenticator(
        viewers=(), operators=(SecretStr(OPERATOR_TOKEN),), key=ServiceKey(store, key)
    )
    return Sessions(store, tokens, clock, max_age=max_age)


async def _operator(sessions: Sessions) -> Principal:
    principal = await sessions.authenticator.identify(OPERATOR_TOKEN)
    assert principal is not None
    return principal


def test_a_cookie_signed_with_a_replaced_key_is_refused() -> None:
    async def main() -> None:
        store, clock = InMemoryStore(), FakeClock()
        first = _sessions(store, clock, key=KEY)
        cookie = await first.issue(await _operator(first))
        assert await _sessions(store, clock, key=KEY).read(cookie) is not None, "same key"
        replaced = _sessions(store, clock, key=SecretStr("n" * 32))
        assert await replaced.read(cookie) is None
        kid, secret, _ = cookie.split(".")
        resigned = f"{await replaced.key_id()}.{secret}"
        assert await replaced.read(f"{resigned}.{_mac(b'k' * 32, 'session', resigned)}") is None
        stored = _sessions(store, clock)  # the key kept in the database: another key id
        assert await stored.read(cookie) is None
        assert kid != await stored.key_id()

    anyio.run(main)


def test_the_configured_max_age_caps_a_session() -> None:
    async def main() -> None:
        store, clock = InMemoryStore(), FakeClock()
        first = _sessions(store, clock, key=KEY, max_age=86400)
        cookie = await first.issue(await _operator(first))
        clock.advance(3600)
        assert await _sessions(store, clock, key=KEY, max_age=86400).read(cookie) is not None
        shorter = _sessions(store, clock, key=KEY, max_age=3600)
        assert await shorter.read(cookie) is None, "a row's later expiry is capped"
        clock.advance(86400)
        assert await _sessions(store, clock, key=KEY, max_age=604800).read(cookie) is None

    anyio.run(main)


# -- operators ---------------------------------------------------------------------------------


def test_an_operator_lists_and_revokes_sessions(live_api: LiveApi) -> None:
    browser = sign_in(live_api, OPERATOR_TOKEN)
    sessions: Sessions = live_api.container.sessions()
    live = call(sessions.live)
    assert len(live) == 1
    assert call(sessions.revoke, live[0].session_id) is True
    assert browser.get("/ui/runs").status_code == 303
    assert call(sessions.live) == []
