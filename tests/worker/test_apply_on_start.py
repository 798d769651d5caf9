"""``Worker(workflows=[...], apply_on_start=True)`` (SPEC §17): only an operator token writes."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import httpx
import pytest

from tests.worker.conftest import MakeWorker, eventually, serving
from tests.worker.fake_server import (
    BASE_URL,
    OPERATOR_TOKEN,
    WORKER_TOKEN,
    FakeControlPlane,
    problem,
)
from workload_sdk import TOKEN_ENV, AsyncClient, Forbidden, InvalidRequest, Unauthenticated
from workload_worker import Context, Worker, WorkerConfigError, Workflow, WorkflowApplyError
from workload_worker import _apply as apply_module

pytestmark = pytest.mark.anyio


def client(fake: FakeControlPlane, token: str) -> AsyncClient:
    return AsyncClient(base_url=BASE_URL, token=token, transport=fake.transport, max_retries=0)


def pipeline(description: str = "") -> Workflow:
    workflow = Workflow("etl", description=description)
    first = workflow.task("fetch", "fetch", input={"url": "u"})
    workflow.task("summarize", "mock", depends_on=[first])
    return workflow


def serve_fetch(worker: Worker) -> None:
    @worker.action("fetch")
    async def fetch(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        return {}


def puts(fake: FakeControlPlane) -> list[httpx.Request]:
    return [r for r in fake.requests if r.method == "PUT"]


async def test_an_operator_token_applies_created_then_unchanged(
    fake: FakeControlPlane, make_worker: MakeWorker, caplog: pytest.LogCaptureFixture
) -> None:
    etl, other = pipeline(), Workflow("other")
    other.task("only", "mock")
    for start in (1, 2):
        worker = make_worker(
            workflows=[etl, other],
            apply_on_start=True,
            operator_client=client(fake, OPERATOR_TOKEN),
        )
        serve_fetch(worker)
        with caplog.at_level(logging.INFO, logger="workload.worker"):
            async with serving(worker):
                await eventually(lambda: fake.claims, message="it claims after applying")
        assert worker.workflows == (etl, other)
        assert len(puts(fake)) == 2 * start
    assert fake.versions == {"etl": [etl.definition()], "other": [other.definition()]}
    assert [r.url.path for r in puts(fake)] == [
        "/api/v1/workflows/etl",
        "/api/v1/workflows/other",
    ] * 2
    assert all(r.headers["authorization"] == f"Bearer {OPERATOR_TOKEN}" for r in puts(fake))
    applied = [r.getMessage() for r in caplog.records if r.getMessage().startswith("workflow ")]
    assert applied == [
        "workflow etl: version 1 created",
        "workflow other: version 1 created",
        "workflow etl: version 1 unchanged",
        "workflow other: version 1 unchanged",
    ]
    # A changed definition is a new version.
    worker = make_worker(
        workflows=[pipeline("now described")],
        apply_on_start=True,
        operator_client=client(fake, OPERATOR_TOKEN),
    )
    serve_fetch(worker)
    async with serving(worker):
        await eventually(lambda: len(fake.versions["etl"]) == 2, message="version 2")


async def test_a_worker_token_alone_writes_nothing_and_the_worker_serves(
    fake: FakeControlPlane,
    make_worker: MakeWorker,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    worker = make_worker(workflows=[pipeline()], apply_on_start=True)
    serve_fetch(worker)
    attempt = fake.add("fetch")
    with caplog.at_level(logging.WARNING, logger="workload.worker"):
        async with serving(worker):
            await eventually(lambda: fake.recorded(attempt.attempt_id))
    assert puts(fake) == []
    assert fake.versions == {}
    assert "apply_on_start: no operator token" in caplog.text
    assert "workflow(s) etl not applied; a worker token never writes definitions" in caplog.text


async def test_without_apply_on_start_nothing_is_written(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker(workflows=[pipeline()], operator_client=client(fake, OPERATOR_TOKEN))
    serve_fetch(worker)
    async with serving(worker):
        await eventually(lambda: fake.claims)
    assert puts(fake) == []


REFUSALS = [
    ("worker-token", WORKER_TOKEN, None, Forbidden),
    ("unknown-token", "nobody", None, Unauthenticated),
    (
        "invalid-definition",
        OPERATOR_TOKEN,
        problem(400, "invalid_definition", errors=[{"path": "/tasks/0/key", "message": "bad"}]),
        InvalidRequest,
    ),
]


@pytest.mark.parametrize(
    ("token", "answer", "cause"),
    [(t, a, c) for _, t, a, c in REFUSALS],
    ids=[i for i, _, _, _ in REFUSALS],
)
async def test_a_refused_apply_stops_the_worker_before_it_claims(
    fake: FakeControlPlane,
    make_worker: MakeWorker,
    token: str,
    answer: httpx.Response | None,
    cause: type[Exception],
) -> None:
    if answer is not None:
        fake.script("workflows", answer)
    worker = make_worker(
        workflows=[pipeline()], apply_on_start=True, operator_client=client(fake, token)
    )
    serve_fetch(worker)
    with anyio.fail_after(10), pytest.raises(WorkflowApplyError) as raised:
        await worker.serve()
    assert isinstance(raised.value, WorkerConfigError)  # `workload worker` exits 2 with it
    assert raised.value.workflow_id == "etl"
    assert isinstance(raised.value.cause, cause)
    assert str(raised.value).startswith("workflow 'etl' not applied: ")
    assert fake.claims == []
    assert fake.versions == {}
    assert not worker.is_serving


async def test_an_unreachable_server_is_tried_again_until_it_answers(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    fake.script("workflows", httpx.ConnectError("refused"), problem(503, "unavailable"))
    worker = make_worker(
        workflows=[pipeline()],
        apply_on_start=True,
        operator_client=client(fake, OPERATOR_TOKEN),
    )
    serve_fetch(worker)
    async with serving(worker):
        await eventually(lambda: fake.claims, message="it claims once applied")
    assert len(puts(fake)) == 3
    assert len(fake.versions["etl"]) == 1
    # One write, tried three times: the same idempotency key each time.
    assert len({r.headers.get("idempotency-key") for r in puts(fake)}) == 1


async def test_a_stop_while_applying_ends_the_worker(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    fake.script("workflows", *[problem(503, "unavailable") for _ in range(1000)])
    worker = make_worker(
        workflows=[pipeline()],
        apply_on_start=True,
        operator_client=client(fake, OPERATOR_TOKEN),
    )
    serve_fetch(worker)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(worker.serve)
        await eventually(lambda: len(puts(fake)) >= 2, message="it tries again")
        worker.stop()
        await eventually(lambda: not worker.is_serving, message="it stopped")
    assert fake.claims == []


def test_workflows_must_be_workflows() -> None:
    with pytest.raises(WorkerConfigError, match="takes Workflow objects"):
        Worker(workflows=[{"id": "etl"}])  # type: ignore[list-item]
    with pytest.raises(WorkerConfigError, match="etl given twice"):
        Worker(workflows=[pipeline(), pipeline()])


async def test_a_worker_given_a_client_applies_to_that_clients_server(
    fake: FakeControlPlane, make_worker: MakeWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No url= but client=: the operator token's writes go where the worker's client goes, not
    # to WORKLOAD_URL or 127.0.0.1:8080.
    monkeypatch.setenv(TOKEN_ENV, OPERATOR_TOKEN)
    monkeypatch.setenv("WORKLOAD_URL", "http://elsewhere.invalid:1")
    made: list[str | None] = []

    def operator_client(*, base_url: str | None, token: str, max_retries: int) -> AsyncClient:
        made.append(base_url)
        return AsyncClient(
            base_url=base_url, token=token, transport=fake.transport, max_retries=max_retries
        )

    monkeypatch.setattr(apply_module, "AsyncClient", operator_client)
    worker = make_worker(workflows=[pipeline()], apply_on_start=True)
    assert worker.url is None
    serve_fetch(worker)
    async with serving(worker):
        await eventually(lambda: fake.claims, message="it claims after applying")
    assert made == [BASE_URL]
    assert [r.url.host for r in puts(fake)] == [httpx.URL(BASE_URL).host]
