"""Bearer authentication with three roles (SPEC §6, §10).

Viewers read; operators read and write; workers claim and report attempts — and nothing else,
while viewers and operators may not claim or report.

Tokens are compared in constant time against every configured token, so timing tells nothing
about which token (or which prefix) matched. A principal is identified by a keyed hash of its
token (ADR 0026): ``"hmac:"`` and 32 hex digits of HMAC-SHA256 under a key derived from the
deployment's key (:class:`~workload_api.service_key.ServiceKey`). Idempotency keys and console
sessions are scoped to it, decisions and drafts record its first 12 hex digits, and no token
value is ever kept in a log or a record. Without the key an id cannot be computed from a token,
so one seen by a viewer (``operator:5285a4d7e33e``) cannot be used to guess weak tokens offline;
every process of one database has the same key, so they agree on every id.

A bearer token that verified once is remembered (ADR 0031): its principal is found again by a
keyed BLAKE2b digest of the token under a key drawn at random when the process starts, so the
next request with it costs one digest and one lookup instead of a comparison with every
configured token and an HMAC. Only tokens that matched a configured token are remembered, so the
memory is bounded by the configured tokens (and capped besides); a token that fails is never
remembered. Tokens are read from the configuration when the process starts: a token removed
from it is refused once the process restarts without it, as before.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import SecretStr

from workload_api.problems import HttpProblem
from workload_api.service_key import ServiceKey

__all__ = ["PRINCIPAL_ID_KEY", "Authenticator", "Principal", "Role"]

_REALM = 'Bearer realm="workload"'
VERIFIED_CACHE_SIZE = 1024
"""At most this many verified tokens are remembered (the oldest forgotten first)."""
PRINCIPAL_ID_KEY = "principal id"
"""The label of the key principal ids are computed under (derived from the deployment's key)."""


class Role(enum.IntEnum):
    """What a principal may do: an operator may do what a viewer may; a worker stands apart."""

    VIEWER = 1
    OPERATOR = 2
    WORKER = 3

    def allows(self, required: Role) -> bool:
        """Whether a principal with this role may call an operation that requires ``required``."""
        if required is Role.WORKER or self is Role.WORKER:
            return self is required
        return self >= required


_FORBIDDEN = {
    Role.VIEWER: "this operation needs a viewer or operator token",
    Role.OPERATOR: "this operation needs the operator role",
    Role.WORKER: "this operation is for workers (a worker token)",
}


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller."""

    id: str
    role: Role


@dataclass(slots=True)
class _Verified:
    """A token that matched a configured token: its role, and its principal once computed."""

    presented: bytes
    role: Role
    principal: Principal | None = None


class Authenticator:
    """Resolves ``Authorization`` headers (and console sign-ins) to principals.

    Args:
        key: the deployment's key; principal ids are computed under a key derived from it.
    """

    def __init__(
        self,
        viewers: Iterable[SecretStr],
        operators: Iterable[SecretStr],
        workers: Iterable[SecretStr] = (),
        *,
        key: ServiceKey,
    ) -> None:
        self._tokens: list[tuple[bytes, Role]] = [
            (t.get_secret_value().encode("utf-8"), role)
            for tokens, role in ((viewers, Role.VIEWER), (operators, Role.OPERATOR))
            for t in tokens
        ] + [(t.get_secret_value().encode("utf-8"), Role.WORKER) for t in workers]
        self.key = key
        self._roles: dict[str, Role] | None = None
        self._digest_key = secrets.token_bytes(32)
        self._verified: dict[bytes, _Verified] = {}

    def _digest(self, presented: bytes) -> bytes:
        """The cache key of a presented token: keyed (per process), never the token itself."""
        return hashlib.blake2b(presented, key=self._digest_key, digest_size=32).digest()

    async def principal_id(self, token: bytes) -> str:
        """The id of the principal a token names (a keyed hash: never the token)."""
        key = await self.key.derived(PRINCIPAL_ID_KEY)
        return "hmac:" + hmac.new(key, token, hashlib.sha256).hexdigest()[:32]

    async def identify(self, token: str) -> Principal | None:
        """The principal of a token (the web console's sign-in), or None: not a token of ours.

        Compared in constant time against every configured token, like a bearer token.
        """
        presented = token.strip().encode("utf-8", "surrogateescape")
        role: Role | None = None
        for known, known_role in self._tokens:
            if hmac.compare_digest(presented, known):
                role = known_role if role is None else max(role, known_role)
        return None if role is None else Principal(await self.principal_id(presented), role)

    async def principal(self, principal_id: str) -> Principal | None:
        """The principal with this id while one of its tokens is configured (else None).

        A console session names its principal by id; removing the token ends the session.
        """
        if self._roles is None:
            roles: dict[str, Role] = {}
            for known, known_role in self._tokens:
                pid = await self.principal_id(known)
                roles[pid] = max(roles.get(pid, known_role), known_role)
            self._roles = roles
        role = self._roles.get(principal_id)
        return None if role is None else Principal(principal_id, role)

    async def authenticate(self, authorization: str | None, required: Role) -> Principal:
        """Return the principal, or raise 401 (no or bad token) / 403 (role too low)."""
        verified = self._verified_of(authorization, required)
        if verified.principal is None:
            verified.principal = Principal(
                await self.principal_id(verified.presented), verified.role
            )
        return verified.principal

    def authorize(self, authorization: str | None, required: Role) -> Role:
        """The role of a request's token, or raise 401 / 403 (who it is is not needed)."""
        return self._verified_of(authorization, required).role

    def _verified_of(self, authorization: str | None, required: Role) -> _Verified:
        if not authorization:
            raise HttpProblem(
                401,
                "unauthenticated",
                "this operation needs a bearer token",
                headers={"WWW-Authenticate": _REALM},
            )
        scheme, _, token = authorization.partition(" ")
        presented = token.strip().encode("utf-8", "surrogateescape")
        digest = self._digest(presented)
        verified = self._verified.get(digest) if scheme.lower() == "bearer" else None
        if verified is None:
            verified = self._verify(scheme, presented)
            if len(self._verified) >= VERIFIED_CACHE_SIZE:
                del self._verified[next(iter(self._verified))]
            self._verified[digest] = verified
        if not verified.role.allows(required):
            raise HttpProblem(403, "forbidden", _FORBIDDEN[required])
        return verified

    def _verify(self, scheme: str, presented: bytes) -> _Verified:
        role: Role | None = None
        # No early exit: every configured token is compared, matched or not.
        for known, known_role in self._tokens:
            if hmac.compare_digest(presented, known) and scheme.lower() == "bearer":
                role = known_role if role is None else max(role, known_role)
        if role is None:
            raise HttpProblem(
                401,
                "unauthenticated",
                "the bearer token is not valid",
                headers={"WWW-Authenticate": f'{_REALM}, error="invalid_token"'},
            )
        return _Verified(presented, role)

    @staticmethod
    def check(principal: Principal, required: Role) -> Principal:
        """The principal, if its role allows ``required`` (else 403)."""
        if not principal.role.allows(required):
            raise HttpProblem(403, "forbidden", _FORBIDDEN[required])
        return principal
