"""Console sessions and CSRF tokens: signed, expiring cookies; no token is ever kept.

A session cookie holds ``{"sid", "pid", "exp"}`` — a random session id, the principal's id (a
hash of its token, as in the API's idempotency records) and its expiry — and an HMAC-SHA256 of
it under a key the service keeps in its database (``service_secrets``, so a restart does not
sign anyone out). Each request re-derives the role from the principal id and the *configured*
tokens, so removing a token ends its sessions at once.

CSRF: every state-changing form carries ``HMAC(key, "csrf" | sid)``; without a session (the
sign-in form) the token is bound to a random nonce in a short-lived cookie instead. Both cookies
are ``HttpOnly`` and ``SameSite=Strict``; ``Secure`` when the console is served over HTTPS (or
when configured so).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

from workload_api.auth import Authenticator, Principal
from workload_domain.ports import Clock, SecretStore

__all__ = ["LOGIN_COOKIE", "SESSION_COOKIE", "Session", "Sessions"]

SESSION_COOKIE = "workload_session"
LOGIN_COOKIE = "workload_login"
LOGIN_MAX_AGE = 3600
"""Seconds a sign-in form stays valid."""
_KEY_NAME = "console_session"
_MAX_COOKIE = 1024
_MAX_NONCE = 64


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in browser: who, until when, and the id its CSRF tokens are bound to."""

    sid: str
    principal: Principal
    expires_at: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _same(presented: str, expected: str) -> bool:
    """Whether a MAC a client sent is the expected one, in constant time.

    Compared as bytes: ``hmac.compare_digest`` refuses ``str`` values outside ASCII (a cookie
    or form field may hold any character), and such a value is simply not the MAC.
    """
    return hmac.compare_digest(
        presented.encode("utf-8", "surrogateescape"), expected.encode("ascii")
    )


class Sessions:
    """Issues and reads session cookies; makes and checks CSRF tokens."""

    def __init__(
        self,
        store: SecretStore,
        authenticator: Authenticator,
        clock: Clock,
        *,
        max_age: int = 28800,
        secure: bool | None = None,
    ) -> None:
        self._store = store
        self.authenticator = authenticator
        self._clock = clock
        self.max_age = max_age
        self._secure = secure
        self._key: bytes | None = None

    def secure(self, scheme: str) -> bool:
        """Whether cookies get the ``Secure`` attribute for a request made over ``scheme``."""
        return scheme == "https" if self._secure is None else self._secure

    async def _signing_key(self) -> bytes:
        if self._key is None:
            self._key = await self._store.secret(_KEY_NAME)
        return self._key

    async def _mac(self, purpose: str, value: str) -> str:
        key = await self._signing_key()
        message = f"{purpose}|{value}".encode("utf-8", "surrogateescape")
        return _b64(hmac.new(key, message, hashlib.sha256).digest())

    def _now(self) -> int:
        return int(self._clock.now().timestamp())

    async def issue(self, principal: Principal, *, now: int | None = None) -> str:
        """A new session's cookie value, valid for ``max_age`` seconds from ``now``."""
        issued = self._now() if now is None else now
        body = {"sid": secrets.token_urlsafe(18), "pid": principal.id, "exp": issued + self.max_age}
        payload = _b64(json.dumps(body, separators=(",", ":")).encode())
        return f"{payload}.{await self._mac('session', payload)}"

    async def read(self, cookie: str | None) -> Session | None:
        """The session of a cookie, or None: absent, forged, expired, or its token removed."""
        if not cookie or len(cookie) > _MAX_COOKIE or cookie.count(".") != 1:
            return None
        payload, mac = cookie.split(".")
        if not _same(mac, await self._mac("session", payload)):
            return None
        try:
            body = json.loads(_unb64(payload))
            sid, pid, expires = str(body["sid"]), str(body["pid"]), int(body["exp"])
        except (ValueError, KeyError, TypeError):
            return None
        if expires <= self._now():
            return None
        principal = self.authenticator.principal(pid)
        if principal is None:
            return None
        return Session(sid, principal, expires)

    async def csrf_token(self, session: Session) -> str:
        """The CSRF token of a session's forms."""
        return await self._mac("csrf", session.sid)

    async def check_csrf(self, session: Session, token: str | None) -> bool:
        """Whether ``token`` is the session's CSRF token."""
        return bool(token) and _same(str(token), await self.csrf_token(session))

    async def login_token(self, nonce: str) -> str:
        """The CSRF token of a sign-in form, bound to the nonce of its cookie."""
        return await self._mac("login", nonce)

    @staticmethod
    def may_sign_in(nonce: str | None) -> bool:
        """Whether a sign-in cookie's nonce could belong to one of our forms (checked unread)."""
        return bool(nonce) and len(nonce or "") <= _MAX_NONCE

    async def check_login(self, nonce: str | None, token: str | None) -> bool:
        """Whether a sign-in form's token fits its cookie's nonce."""
        if not token or not self.may_sign_in(nonce):
            return False
        assert nonce is not None
        return _same(str(token), await self.login_token(nonce))
