"""Bearer authentication with three roles (SPEC §6, §10).

Viewers read; operators read and write; workers claim and report attempts — and nothing else,
while viewers and operators may not claim or report.

Tokens are compared in constant time against every configured token, so timing tells nothing
about which token (or which prefix) matched. A principal is identified by a hash of its token:
idempotency keys are scoped to it, and no token value is ever kept in a log or a record.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import SecretStr

from workload_api.problems import HttpProblem

__all__ = ["Authenticator", "Principal", "Role"]

_REALM = 'Bearer realm="workload"'


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


class Authenticator:
    """Resolves ``Authorization`` headers to principals."""

    def __init__(
        self,
        viewers: Iterable[SecretStr],
        operators: Iterable[SecretStr],
        workers: Iterable[SecretStr] = (),
    ) -> None:
        self._tokens: list[tuple[bytes, Role]] = [
            (t.get_secret_value().encode("utf-8"), role)
            for tokens, role in ((viewers, Role.VIEWER), (operators, Role.OPERATOR))
            for t in tokens
        ] + [(t.get_secret_value().encode("utf-8"), Role.WORKER) for t in workers]
        self._roles: dict[str, Role] = {}
        for known, known_role in self._tokens:
            pid = _principal_id(known)
            self._roles[pid] = max(self._roles.get(pid, known_role), known_role)

    def identify(self, token: str) -> Principal | None:
        """The principal of a token (the web console's sign-in), or None: not a token of ours.

        Compared in constant time against every configured token, like a bearer token.
        """
        presented = token.strip().encode("utf-8", "surrogateescape")
        role: Role | None = None
        for known, known_role in self._tokens:
            if hmac.compare_digest(presented, known):
                role = known_role if role is None else max(role, known_role)
        return None if role is None else Principal(_principal_id(presented), role)

    def principal(self, principal_id: str) -> Principal | None:
        """The principal with this id while one of its tokens is configured (else None).

        A console session names its principal by id; removing the token ends the session.
        """
        role = self._roles.get(principal_id)
        return None if role is None else Principal(principal_id, role)

    def authenticate(self, authorization: str | None, required: Role) -> Principal:
        """Return the principal, or raise 401 (no or bad token) / 403 (role too low)."""
        if not authorization:
            raise HttpProblem(
                401,
                "unauthenticated",
                "this operation needs a bearer token",
                headers={"WWW-Authenticate": _REALM},
            )
        scheme, _, token = authorization.partition(" ")
        presented = token.strip().encode("utf-8", "surrogateescape")
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
        if not role.allows(required):
            raise HttpProblem(403, "forbidden", _FORBIDDEN[required])
        return Principal(_principal_id(presented), role)

    @staticmethod
    def check(principal: Principal, required: Role) -> Principal:
        """The principal, if its role allows ``required`` (else 403)."""
        if not principal.role.allows(required):
            raise HttpProblem(403, "forbidden", _FORBIDDEN[required])
        return principal


def _principal_id(token: bytes) -> str:
    return "sha256:" + hashlib.sha256(token).hexdigest()[:32]
