"""Approvals and drafts (SPEC §11) in the SDK: typed models, decisions as writes, paging, waits.

What each call sends is in ``test_client.py``'s table of operations; the async twins are here.
"""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from tests.sdk.fakes import (
    APPROVAL,
    APPROVAL_ID,
    DRAFT,
    DRAFT_ID,
    GENERATING,
    FakeApi,
    body,
    json_response,
    page,
    problem,
    responses,
)
from workload_sdk import (
    APIConnectionError,
    Approval,
    ApprovalChanged,
    AsyncClient,
    Client,
    Conflict,
    Draft,
    DraftProblem,
    DraftWaitTimeout,
    Usage,
    WaitTimeout,
)

BASE = "http://api.test"


def test_approvals_are_typed(client: Client) -> None:
    (listed,) = client.approvals.list(status="pending")
    assert isinstance(listed, Approval)
    assert (listed.tool, listed.arguments, listed.is_pending) == ("deploy", {"env": "prod"}, True)
    assert listed.expires_at == datetime(2025, 1, 3, 3, 4, 5, tzinfo=UTC)
    assert (listed.decided_by, listed.decided_at, listed.comment) == (None, None, None)
    assert client.approvals.get(APPROVAL_ID) == listed
    decided = client.approvals.approve(APPROVAL_ID, listed.arguments_digest, comment="ok")
    assert (decided.status, decided.is_pending) == ("approved", False)
    assert decided.decided_by == "operator:3f9a1c0b2d4e"
    assert decided.decided_at is not None


def test_drafts_are_typed(client: Client, api: FakeApi) -> None:
    created = client.drafts.create("fetch, then summarize")
    assert isinstance(created, Draft)
    assert (created.status, created.is_generating, created.definition) == (
        "generating",
        True,
        None,
    )
    draft = client.drafts.get(created.draft_id)
    assert (draft.status, draft.is_generating, draft.version) == ("ready", False, None)
    assert draft.definition == {"id": "wf", "tasks": [{"key": "a", "action": "mock"}]}
    assert draft.problems == [DraftProblem(answer=1, path="/tasks", message="must not be empty")]
    assert draft.usage == Usage(model_calls=2, tool_calls=0, input_tokens=300, output_tokens=80)
    assert [d.draft_id for d in client.drafts.list()] == [DRAFT_ID]
    assert draft.definition_hash is not None
    approved = client.drafts.approve(draft.draft_id, draft.definition_hash)
    assert (approved.status, approved.version) == ("approved", 3)
    assert body(api.last) == {"definition_hash": draft.definition_hash}
    assert client.drafts.reject(draft.draft_id).status == "rejected"
    assert api.last.content == b""  # no body


def test_statuses_and_fields_of_newer_servers_parse() -> None:
    newer_approval = {**APPROVAL, "status": "escalated", "escalated_to": "sre"}
    newer_draft = {**DRAFT, "status": "reviewing", "problems": [], "reviewer": "bot"}
    api = FakeApi(responses(json_response(200, newer_approval), json_response(200, newer_draft)))
    with Client(base_url=BASE, transport=api.transport) as client:
        approval = client.approvals.get(APPROVAL_ID)
        draft = client.drafts.get(DRAFT_ID)
    assert (approval.status, approval.is_pending, approval.model_extra) == (
        "escalated",
        False,
        {"escalated_to": "sre"},
    )
    assert (draft.status, draft.is_generating, draft.model_extra) == (
        "reviewing",
        False,
        {"reviewer": "bot"},
    )


def test_approvals_page_through_every_cursor_with_their_status() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        cursor = request.url.params.get("cursor")
        if cursor is None:
            return json_response(200, page([APPROVAL], "c1"))
        return json_response(200, page([{**APPROVAL, "approval_id": "ap-2"}]))

    api = FakeApi(handle)
    with Client(base_url=BASE, transport=api.transport) as client:
        ids = [a.approval_id for a in client.approvals.list(status="pending", limit=1)]
    assert ids == [APPROVAL_ID, "ap-2"]
    assert [dict(r.url.params) for r in api.requests] == [
        {"status": "pending", "limit": "1"},
        {"status": "pending", "limit": "1", "cursor": "c1"},
    ]


def test_every_decision_is_a_write_with_its_own_key(client: Client, api: FakeApi) -> None:
    client.approvals.approve(APPROVAL_ID, "sha256:ab")
    client.approvals.reject(APPROVAL_ID, "sha256:ab")
    client.drafts.approve(DRAFT_ID, "sha256:cd")
    client.drafts.reject(DRAFT_ID)
    client.drafts.create("p")
    keys = [r.headers["idempotency-key"] for r in api.requests]
    assert len(set(keys)) == 5
    client.approvals.approve(APPROVAL_ID, "sha256:ab", idempotency_key="decide-1")
    assert api.last.headers["idempotency-key"] == "decide-1"
    with pytest.raises(ValueError, match="idempotency_key"):
        client.drafts.approve(DRAFT_ID, "sha256:cd", idempotency_key="two words")
    assert len(api.requests) == 6


def test_a_decision_without_an_answer_is_sent_once_and_can_be_repeated() -> None:
    api = FakeApi(responses(httpx.ConnectError("refused"), json_response(200, APPROVAL)))
    with Client(base_url=BASE, max_retries=5, transport=api.transport) as client:
        with pytest.raises(APIConnectionError) as caught:
            client.approvals.approve(APPROVAL_ID, "sha256:ab")
        assert len(api.requests) == 1
        key = caught.value.idempotency_key
        assert key is not None
        client.approvals.approve(APPROVAL_ID, "sha256:ab", idempotency_key=key)
    assert [r.headers["idempotency-key"] for r in api.requests] == [key, key]


def test_a_stale_digest_raises_approval_changed_a_conflict() -> None:
    detail = "arguments_digest does not match the arguments of approval 'ap-1'"
    api = FakeApi(responses(problem(409, "approval_changed", detail)))
    with (
        Client(base_url=BASE, transport=api.transport) as client,
        pytest.raises(Conflict) as caught,
    ):
        client.approvals.approve("ap-1", "sha256:stale", idempotency_key="k-1")
    assert type(caught.value) is ApprovalChanged
    assert (caught.value.detail, caught.value.idempotency_key) == (detail, "k-1")


# -- drafts.wait -------------------------------------------------------------------------------


def test_wait_polls_until_the_draft_is_no_longer_generating() -> None:
    api = FakeApi(
        responses(
            json_response(200, GENERATING),
            json_response(200, GENERATING),
            json_response(200, {**DRAFT, "status": "invalid", "definition": None}),
        )
    )
    with Client(base_url=BASE, transport=api.transport) as client:
        draft = client.drafts.wait(DRAFT_ID, timeout=10, poll_interval=0.01)
    assert (draft.status, draft.definition) == ("invalid", None)
    assert len(api.requests) == 3


def test_wait_times_out_with_the_last_state() -> None:
    api = FakeApi(responses(json_response(200, GENERATING)))
    with (
        Client(base_url=BASE, transport=api.transport) as client,
        pytest.raises(DraftWaitTimeout) as caught,
    ):
        client.drafts.wait(DRAFT_ID, timeout=0.05, poll_interval=0.01)
    assert caught.value.draft.status == "generating"
    assert f"draft {DRAFT_ID} is still generating" in str(caught.value)
    assert isinstance(caught.value, TimeoutError)
    assert not isinstance(caught.value, WaitTimeout)  # WaitTimeout carries a run
    assert len(api.requests) >= 2


def test_wait_validates_its_arguments(client: Client) -> None:
    with pytest.raises(ValueError, match="poll_interval"):
        client.drafts.wait(DRAFT_ID, poll_interval=0)
    with pytest.raises(ValueError, match="timeout"):
        client.drafts.wait(DRAFT_ID, timeout=-1)


# -- the async twins ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_approvals_and_drafts() -> None:
    api = FakeApi()
    async with AsyncClient(base_url=BASE, token="tok", transport=api.transport) as client:
        assert [a.tool async for a in client.approvals.list(status="pending")] == ["deploy"]
        assert dict(api.last.url.params) == {"status": "pending"}
        page_ = await client.approvals.list_page(limit=2, cursor="c")
        assert dict(api.last.url.params) == {"limit": "2", "cursor": "c"}
        approval = page_.items[0]
        assert (await client.approvals.get(approval.approval_id)).is_pending
        decided = await client.approvals.approve(
            approval.approval_id, approval.arguments_digest, comment="ok", idempotency_key="k1"
        )
        assert decided.status == "approved"
        assert body(api.last) == {
            "decision": "approve",
            "arguments_digest": approval.arguments_digest,
            "comment": "ok",
        }
        assert api.last.headers["idempotency-key"] == "k1"
        await client.approvals.reject(approval.approval_id, approval.arguments_digest)
        assert body(api.last)["decision"] == "reject"

        created = await client.drafts.create("p", workflow_id="wf", script=[{"content": "{}"}])
        assert created.is_generating
        assert body(api.last) == {
            "prompt": "p",
            "model": "mock",
            "workflow_id": "wf",
            "script": [{"content": "{}"}],
        }
        assert [d.draft_id async for d in client.drafts.list()] == [DRAFT_ID]
        assert (await client.drafts.list_page(limit=1)).next_cursor is None
        draft = await client.drafts.wait(created.draft_id, timeout=5, poll_interval=0.01)
        assert draft.status == "ready"
        assert draft.definition_hash is not None
        approved = await client.drafts.approve(draft.draft_id, draft.definition_hash)
        assert approved.version == 3
        assert (await client.drafts.reject(draft.draft_id)).status == "rejected"
        assert (await client.drafts.get(DRAFT_ID)).problems[0].answer == 1
    writes = [r for r in api.requests if r.method == "POST"]
    assert len(writes) == 5
    assert all(r.headers["idempotency-key"] for r in writes)


@pytest.mark.anyio
async def test_async_wait_times_out_with_the_last_state() -> None:
    api = FakeApi(responses(json_response(200, GENERATING)))
    async with AsyncClient(base_url=BASE, transport=api.transport) as client:
        with pytest.raises(DraftWaitTimeout) as caught:
            await client.drafts.wait(DRAFT_ID, timeout=0.03, poll_interval=0.01)
    assert caught.value.draft.is_generating
