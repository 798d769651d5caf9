"""Principal ids are keyed hashes of tokens (ADR 0026; issue 33, finding P1).

A principal's id was ``sha256(token)``, and viewers see its first 12 hex digits in every
decision and draft (``operator:5285a4d7e33e``): anyone could test guessed tokens against it
offline. It is now an HMAC under a key derived from the deployment's key, which every process
of one database shares (configured, or kept in ``service_secrets``): the same token has the same
id on a leader, a standby and after a restart — console sessions keep working — and another
id on another database.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
from typing import Any

import anyio
import httpx
from pydantic import SecretStr

from tests.console.helpers import sign_in
from tests.plugins.live_api import OPERATOR_TOKEN, VIEWER_TOKEN, LiveApi, over_http, settings
from workload_api.auth import Authenticator
from workload_api.container import Container
from workload_api.service_key import ServiceKey
from workload_api.usecases.approvals import decider
from workload_engine.memory import InMemoryStore

V1 = "/api/v1"
_keys = itertools.count()


def _unsalted(token: str) -> str:
    """The id as it was: a hash of the token alone."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:32]


def _ids(key: ServiceKey, token: str = OPERATOR_TOKEN) -> str:
    tokens = Authenticator(
        viewers=(SecretStr(VIEWER_TOKEN),), operators=(SecretStr(OPERATOR_TOKEN),), key=key
    )

    async def identify() -> str:
        principal = await tokens.identify(token)
        assert principal is not None
        return principal.id

    return anyio.run(identify)


def test_an_id_is_an_hmac_under_the_deployment_key_not_a_hash_of_the_token() -> None:
    configured = SecretStr("c" * 32)
    pid = _ids(ServiceKey(InMemoryStore(), configured))
    assert pid != _unsalted(OPERATOR_TOKEN)
    derived = hmac.new(b"c" * 32, b"workload derived key|principal id", hashlib.sha256).digest()
    expected = hmac.new(derived, OPERATOR_TOKEN.encode(), hashlib.sha256).hexdigest()[:32]
    assert pid == "hmac:" + expected
    shown = decider(pid, "operator")
    assert shown == "operator:" + expected[:12], "the format SPEC §11 shows: role and 12 hex"
    assert shown != "operator:" + hashlib.sha256(OPERATOR_TOKEN.encode()).hexdigest()[:12]


def test_ids_differ_between_keys_and_agree_under_one() -> None:
    store = InMemoryStore()
    stored = _ids(ServiceKey(store))
    assert _ids(ServiceKey(store)) == stored, "two processes on one store: one key"
    assert _ids(ServiceKey(InMemoryStore())) != stored, "another database: another key"
    one, other = SecretStr("a" * 32), SecretStr("b" * 32)
    assert _ids(ServiceKey(store, one)) == _ids(ServiceKey(InMemoryStore(), one))
    assert _ids(ServiceKey(store, one)) not in {_ids(ServiceKey(store, other)), stored}
    assert _ids(ServiceKey(store), VIEWER_TOKEN) != stored, "each token its own id"


def _created_by(api: LiveApi) -> str:
    """Who a new draft says made it (the operator's id, as viewers see it)."""
    response = api.operator.post(
        f"{V1}/drafts",
        json={"prompt": "a workflow", "script": [{"content": "no"}]},
        headers={"Idempotency-Key": f"principal-ids-{next(_keys)}"},
    )
    assert response.status_code == 202, response.text
    created_by: str = response.json()["created_by"]
    return created_by


def _reads_console(api: LiveApi, cookie: str) -> bool:
    with httpx.Client(base_url=api.base_url, cookies={"workload_session": cookie}) as browser:
        return browser.get("/ui/runs").status_code == 200


def _service(url: str, **overrides: Any) -> Container:
    return Container(settings=settings(database_url=url, **overrides))


def test_processes_of_one_database_agree_on_ids_and_another_database_does_not(
    database_url: str, other_database_url: str
) -> None:
    with (
        over_http(_service(database_url)) as leader,
        over_http(_service(database_url, standby=True)) as standby,
    ):
        assert standby.readiness.role == "standby"
        shown = _created_by(leader)
        assert _created_by(standby) == shown
        assert shown.startswith("operator:")
        assert shown != "operator:" + hashlib.sha256(OPERATOR_TOKEN.encode()).hexdigest()[:12]
        browser = sign_in(leader, OPERATOR_TOKEN)
        cookie = browser.cookies["workload_session"]
        assert _reads_console(standby, cookie), "a session made on the leader, on the standby"
    with over_http(_service(database_url)) as restarted:
        assert _created_by(restarted) == shown, "the id survives a restart"
        assert _reads_console(restarted, cookie), "and so does the console session"
    with over_http(_service(other_database_url)) as elsewhere:
        assert _created_by(elsewhere) != shown
