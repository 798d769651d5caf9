"""A verified bearer token is remembered per process (ADR 0031), and nothing else changes.

The second request with a token compares it with no configured token (it is found by a keyed
digest); a token that fails is never remembered, so every wrong token is compared with every
configured one; the role, the scheme and the principal id are what they were; and a token
removed from the configuration is refused once the process restarts without it.
"""

from __future__ import annotations

import hmac

import anyio
import httpx
import pytest
from pydantic import SecretStr

from tests.plugins.live_api import (
    OPERATOR_TOKEN,
    ROTATED_OPERATOR_TOKEN,
    VIEWER_TOKEN,
    WORKER_TOKEN,
    over_http,
    settings,
)
from workload_api.auth import VERIFIED_CACHE_SIZE, Authenticator, Principal, Role
from workload_api.container import Container
from workload_api.problems import HttpProblem
from workload_api.service_key import ServiceKey
from workload_engine.memory import InMemoryStore

V1 = "/api/v1"


def _authenticator() -> Authenticator:
    return Authenticator(
        viewers=(SecretStr(VIEWER_TOKEN),),
        operators=(SecretStr(OPERATOR_TOKEN), SecretStr(ROTATED_OPERATOR_TOKEN)),
        workers=(SecretStr(WORKER_TOKEN),),
        key=ServiceKey(InMemoryStore(), SecretStr("k" * 32)),
    )


@pytest.fixture
def comparisons(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the constant-time comparisons of the authenticator (one slot, incremented)."""
    counted = [0]
    compare = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        counted[0] += 1
        return compare(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    return counted


def _authenticate(authenticator: Authenticator, authorization: str, role: Role) -> Principal:
    async def call() -> Principal:
        return await authenticator.authenticate(authorization, role)

    return anyio.run(call)


def test_a_verified_token_is_not_compared_again(comparisons: list[int]) -> None:
    authenticator = _authenticator()
    first = _authenticate(authenticator, f"Bearer {OPERATOR_TOKEN}", Role.OPERATOR)
    assert comparisons[0] == 4, "the first request compares with every configured token"
    second = _authenticate(authenticator, f"bearer  {OPERATOR_TOKEN} ", Role.VIEWER)
    assert comparisons[0] == 4, "the second is found by its digest"
    assert second == first
    identified = anyio.run(authenticator.identify, OPERATOR_TOKEN)
    assert identified == first, "the same id as the console's sign-in computes"


@pytest.mark.parametrize(
    "authorization",
    [
        pytest.param("Bearer wrong-token", id="wrong"),
        pytest.param(f"Bearer {OPERATOR_TOKEN}x", id="longer"),
        pytest.param(f"Bearer {OPERATOR_TOKEN[:-1]}", id="prefix"),
        pytest.param("Bearer \udcff\udcfe", id="undecodable"),
        pytest.param("Bearer " + "t" * 100_000, id="huge"),
        pytest.param("Bearer ", id="empty"),
    ],
)
def test_a_failed_token_is_never_remembered(comparisons: list[int], authorization: str) -> None:
    authenticator = _authenticator()
    _authenticate(authenticator, f"Bearer {OPERATOR_TOKEN}", Role.OPERATOR)
    for attempt in range(1, 4):
        with pytest.raises(HttpProblem) as refused:
            _authenticate(authenticator, authorization, Role.VIEWER)
        assert (refused.value.status, refused.value.code) == (401, "unauthenticated")
        assert comparisons[0] == 4 + 4 * attempt, "compared with every configured token again"


def test_another_scheme_with_a_remembered_token_is_refused() -> None:
    authenticator = _authenticator()
    _authenticate(authenticator, f"Bearer {OPERATOR_TOKEN}", Role.OPERATOR)
    for scheme in ("Basic", "Token", ""):
        with pytest.raises(HttpProblem) as refused:
            _authenticate(authenticator, f"{scheme} {OPERATOR_TOKEN}", Role.VIEWER)
        assert refused.value.status == 401, scheme


@pytest.mark.parametrize(
    ("token", "required"),
    [
        pytest.param(VIEWER_TOKEN, Role.OPERATOR, id="viewer-writes"),
        pytest.param(VIEWER_TOKEN, Role.WORKER, id="viewer-claims"),
        pytest.param(OPERATOR_TOKEN, Role.WORKER, id="operator-claims"),
        pytest.param(WORKER_TOKEN, Role.VIEWER, id="worker-reads"),
    ],
)
def test_a_remembered_token_keeps_its_role(token: str, required: Role) -> None:
    authenticator = _authenticator()
    own = Role.WORKER if token == WORKER_TOKEN else Role.VIEWER
    _authenticate(authenticator, f"Bearer {token}", own)
    for _ in range(2):
        with pytest.raises(HttpProblem) as refused:
            _authenticate(authenticator, f"Bearer {token}", required)
        assert (refused.value.status, refused.value.code) == (403, "forbidden")
        with pytest.raises(HttpProblem):
            authenticator.authorize(f"Bearer {token}", required)


def test_the_memory_is_capped(comparisons: list[int]) -> None:
    """More distinct tokens than the cap (many configured): the oldest is verified again."""
    tokens = [f"operator-{n:05d}" for n in range(VERIFIED_CACHE_SIZE + 1)]
    authenticator = Authenticator(
        viewers=(),
        operators=tuple(SecretStr(t) for t in tokens),
        key=ServiceKey(InMemoryStore(), SecretStr("k" * 32)),
    )
    for token in tokens:
        authenticator.authorize(f"Bearer {token}", Role.OPERATOR)
    per_verification = len(tokens)
    assert comparisons[0] == per_verification * len(tokens)
    authenticator.authorize(f"Bearer {tokens[-1]}", Role.OPERATOR)
    assert comparisons[0] == per_verification * len(tokens), "the newest is remembered"
    authenticator.authorize(f"Bearer {tokens[0]}", Role.OPERATOR)
    assert comparisons[0] == per_verification * (len(tokens) + 1), "the oldest was forgotten"


def _status(url: str, token: str) -> int:
    response = httpx.get(
        f"{url}{V1}/workflows", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    return response.status_code


def test_a_removed_token_is_refused_after_the_restart(database_url: str) -> None:
    """Over HTTP: remembered in one process, removed from the configuration, restarted."""
    both = settings(database_url=database_url)
    with over_http(Container(settings=both)) as api:
        assert [_status(api.base_url, ROTATED_OPERATOR_TOKEN) for _ in range(3)] == [200] * 3
    removed = settings(database_url=database_url, operator_tokens=OPERATOR_TOKEN)
    with over_http(Container(settings=removed)) as api:
        assert [_status(api.base_url, ROTATED_OPERATOR_TOKEN) for _ in range(3)] == [401] * 3
        assert _status(api.base_url, OPERATOR_TOKEN) == 200
