"""Console sessions and CSRF tokens: a session row per sign-in, revoked at sign-out (ADR 0022).

A sign-in keeps a :class:`~workload_domain.console_sessions.ConsoleSession` row in the store:
a random public id, the principal's id (a keyed hash of its token, as in the API's idempotency
records), when it was made, when it expires — and the SHA-256 digest of a random secret that
only the browser's cookie holds. The cookie is ``<key id>.<secret>.<MAC>``, the MAC an
HMAC-SHA256 under the deployment's key (the authenticator's
:class:`~workload_api.service_key.ServiceKey`): ``WORKLOAD_CONSOLE_SESSION_KEY`` when
configured, else a random key the service keeps in its database (``service_secrets``). A
cookie is a session only while its key id is the current key's, its MAC fits, and a row with
its digest is neither revoked nor expired — expired at ``expires_at`` or at ``created_at`` plus
the *configured* max age, whichever is sooner. So a cookie kept after sign-out is refused (its
row is revoked), one forged by whoever reads the database is refused (no live row has its
digest: the secret is not stored), and one signed with a replaced key is refused (its key
id). Each request re-derives the role from the principal id and the configured tokens, so
removing a token ends its sessions at once.

CSRF: every state-changing form carries ``HMAC(key, "csrf" | secret)``, new for each session;
without a session (the sign-in form) the token is bound to a random nonce in a short-lived
cookie instead. Both cookies are ``HttpOnly`` and ``SameSite=Strict``; ``Secure`` when the
console is served over HTTPS (or when configured so).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from workload_api.auth import Authenticator, Principal
from workload_domain.console_sessions import ConsoleSession, ConsoleSessionStore
from workload_domain.ports import Clock, SecretStore

__all__ = ["LOGIN_COOKIE", "SESSION_COOKIE", "Session", "SessionBacking", "Sessions", "key_id"]

SESSION_COOKIE = "workload_session"
LOGIN_COOKIE = "workload_login"
LOGIN_MAX_AGE = 3600
"""Seconds a sign-in form stays valid."""
_MAX_COOKIE = 1024
_MAX_NONCE = 64


class SessionBacking(SecretStore, ConsoleSessionStore, Protocol):
    """What sessions need from the store: the stored key and the session rows."""


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in browser: which session, who, until when, and its CSRF secret."""

    session_id: str
    principal: Principal
    expires_at: datetime
    secret: str = field(repr=False)
    """The cookie's secret (never stored): CSRF tokens are bound to it."""


def key_id(key: bytes) -> str:
    """The id of a signing key, carried by its cookies (a digest: it tells nothing of the key)."""
    return hashlib.sha256(b"workload console key id|" + key).hexdigest()[:12]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()


def _same(presented: str, expected: str) -> bool:
    """Whether a MAC a client sent is the expected one, in constant time.

    Compared as bytes: ``hmac.compare_digest`` refuses ``str`` values outside ASCII (a cookie
    or form field may hold any character), and such a value is simply not the MAC.
    """
    return hmac.compare_digest(
        presented.encode("utf-8", "surrogateescape"), expected.encode("ascii")
    )


class Sessions:
    """Issues, reads and revokes sessions; makes and checks CSRF tokens.

    The signing key is the authenticator's :class:`~workload_api.service_key.ServiceKey`, so
    cookies and principal ids are made under one deployment's key.
    """

    def __init__(
        self,
        store: SessionBacking,
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

    def secure(self, scheme: str) -> bool:
        """Whether cookies get the ``Secure`` attribute for a request made over ``scheme``."""
        return scheme == "https" if self._secure is None else self._secure

    async def _signing_key(self) -> bytes:
        return await self.authenticator.key.key()

    async def key_id(self) -> str:
        """The id of the current signing key."""
        return key_id(await self._signing_key())

    async def _mac(self, purpose: str, value: str) -> str:
        key = await self._signing_key()
        message = f"{purpose}|{value}".encode("utf-8", "surrogateescape")
        return _b64(hmac.new(key, message, hashlib.sha256).digest())

    async def issue(self, principal: Principal, *, now: int | None = None) -> str:
        """A new session's cookie value, valid for ``max_age`` seconds from ``now``."""
        issued = self._clock.now() if now is None else datetime.fromtimestamp(now, UTC)
        secret = secrets.token_urlsafe(32)
        row = ConsoleSession(
            session_id=secrets.token_hex(8),
            digest=_digest(secret),
            principal_id=principal.id,
            created_at=issued,
            expires_at=issued + timedelta(seconds=self.max_age),
        )
        await self._store.create_console_session(row)
        signed = f"{await self.key_id()}.{secret}"
        return f"{signed}.{await self._mac('session', signed)}"

    async def read(self, cookie: str | None) -> Session | None:
        """The session of a cookie, or None.

        None: absent, forged, signed with another key, revoked, expired, or its token removed.
        """
        if not cookie or len(cookie) > _MAX_COOKIE or cookie.count(".") != 2:
            return None
        kid, secret, mac = cookie.split(".")
        if kid != await self.key_id() or not _same(
            mac, await self._mac("session", kid + "." + secret)
        ):
            return None
        row = await self._store.find_console_session(_digest(secret))
        now = self._clock.now()
        if row is None or not row.live(now):
            return None
        # The configured max age caps every session, even one whose row says otherwise.
        expires = min(row.expires_at, row.created_at + timedelta(seconds=self.max_age))
        if now >= expires:
            return None
        principal = await self.authenticator.principal(row.principal_id)
        if principal is None:
            return None
        return Session(row.session_id, principal, expires, secret)

    async def revoke(self, session_id: str) -> bool:
        """End a session now (sign-out, or an operator's revocation); whether it was live."""
        return await self._store.revoke_console_session(session_id, self._clock.now())

    async def live(self) -> Sequence[ConsoleSession]:
        """The live sessions, newest first (for operators)."""
        return await self._store.list_console_sessions(self._clock.now())

    async def csrf_token(self, session: Session) -> str:
        """The CSRF token of a session's forms."""
        return await self._mac("csrf", session.secret)

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
