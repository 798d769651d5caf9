"""A workflow built in Python runs on the real service (in-process) with a typed worker.

The builder's definition is accepted as it is (the server answers the same definition and
hash), an agent calls a typed handler as a tool with the arguments its script sends (checked
by the server against the schema taken from the handler's model), its structured output parses
into the ``output_type``, and input that is not the handler's model fails ``invalid_input``
once, whatever the retry policy. ``apply_on_start`` writes through the real ``PUT``: created,
then unchanged, and never with a worker token.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import pytest
from pydantic import BaseModel, Field

from tests.plugins.live_api import OPERATOR_TOKEN, WORKER_TOKEN, LiveApi
from tests.waiting import wait_until
from workload_sdk import Forbidden
from workload_worker import Context, Worker, Workflow, WorkflowApplyError


class FetchIn(BaseModel):
    url: str
    depth: int = Field(default=1, ge=1, le=5)


class Page(BaseModel):
    url: str
    depth: int
    words: int


class Verdict(BaseModel):
    ok: bool
    reasons: list[str]


@contextmanager
def running(worker: Worker) -> Iterator[None]:
    thread = threading.Thread(target=worker.run, name="authoring-worker")
    thread.start()
    try:
        wait_until(lambda: worker.is_serving, message="the worker serves")  # else stop() is early
        yield
    finally:
        worker.stop()
        thread.join(15)
        assert not thread.is_alive()


def test_a_built_workflow_runs_typed_tasks_and_an_agent_with_typed_tools(
    live_api: LiveApi,
) -> None:
    worker = Worker(
        client=live_api.async_sdk(WORKER_TOKEN), worker_id="w-authoring", wait_seconds=1
    )
    received: list[FetchIn] = []

    @worker.action("fetch")
    async def fetch(ctx: Context, input: FetchIn) -> Page:
        """Fetch a page and count its words."""
        received.append(input)
        return Page(url=input.url, depth=input.depth, words=3 * input.depth)

    verdict = Verdict(ok=True, reasons=["three words a level"])
    workflow = Workflow("authoring", description="typed")
    first = workflow.task("fetch", fetch, input={"url": "https://example.org"}, max_attempts=3)
    review = workflow.agent(
        "review",
        model="mock",
        prompt="Review {{upstream.fetch}}",
        tools=[fetch],
        output_type=Verdict,
        script=[
            # depth "2" is no integer for the schema: the server answers the model, not the tool
            {"tool_calls": [{"name": "fetch", "arguments": {"url": "u", "depth": "2"}}]},
            {
                "tool_calls": [
                    {"name": "fetch", "arguments": {"url": "https://a.example", "depth": 2}}
                ]
            },
            {"content": verdict.model_dump_json()},
        ],
        depends_on=[first],
    )
    # Not the handler's model, given by action name (the builder checks handlers' inputs).
    workflow.task("bad", "fetch", input={"url": 3}, max_attempts=3)

    with live_api.sdk() as client, running(worker):
        version = client.workflows.create(workflow.definition())
        assert version.definition == workflow.definition()
        assert version.definition_hash == workflow.definition_hash()
        run = client.runs.start("authoring", version=1)
        finished = client.wait_for_run(run.run_id, timeout=30)
        tasks = {t.task_key: t for t in client.runs.tasks(run.run_id)}
        steps = list(client.runs.steps(run.run_id, "review"))

    assert finished.status == "failed"  # "bad" failed; the other branch ran to the end
    assert tasks["fetch"].output == {"url": "https://example.org", "depth": 1, "words": 3}
    agent = tasks["review"]
    assert agent.status == "succeeded"
    assert agent.output is not None
    assert review.output_type is Verdict
    assert review.output_type.model_validate(agent.output["structured"]) == verdict
    tool_steps = [s for s in steps if s.kind == "tool_call"]
    assert len(tool_steps) == 2
    # Refused by the schema taken from FetchIn: it never reached the worker.
    assert tool_steps[0].response == {
        "error": 'invalid arguments: /depth: "2" is not of type "integer"'
    }
    assert tool_steps[1].response == {
        "output": {"url": "https://a.example", "depth": 2, "words": 6}
    }
    assert received == [
        FetchIn(url="https://example.org", depth=1),
        FetchIn(url="https://a.example", depth=2),
    ]

    bad = tasks["bad"]
    assert bad.status == "failed"
    assert bad.error is not None
    assert (bad.error.code, bad.error.retryable) == ("invalid_input", False)
    assert bad.attempt_count == 1  # not retried, though max_attempts is 3


def test_apply_on_start_creates_then_finds_unchanged_and_a_worker_token_writes_nothing(
    live_api: LiveApi, caplog: pytest.LogCaptureFixture
) -> None:
    workflow = Workflow("applied", description="applied at start")
    workflow.task("prep", "mock", input={"sleep_ms": 0})
    workflow.task("resize", "resize", depends_on=["prep"], timeout_seconds=30.0)

    def start(token: str) -> Worker:
        worker = Worker(
            client=live_api.async_sdk(WORKER_TOKEN),
            worker_id="w-apply",
            wait_seconds=1,
            workflows=[workflow],
            apply_on_start=True,
            operator_client=live_api.async_sdk(token),
        )
        worker.action("resize")(lambda ctx, input: {})
        return worker

    def applied() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.getMessage().startswith("workflow ")]

    with caplog.at_level(logging.INFO, logger="workload.worker"):
        with running(start(OPERATOR_TOKEN)):
            wait_until(lambda: len(applied()) == 1, message="it applied")
        with running(start(OPERATOR_TOKEN)):  # a second start, the same definition
            wait_until(lambda: len(applied()) == 2, message="it applied again")
    lines = applied()
    assert lines == ["workflow applied: version 1 created", "workflow applied: version 1 unchanged"]
    with live_api.sdk() as client:
        version = client.versions.get("applied", 1)
        assert version.definition == workflow.definition()
        assert version.definition_hash == workflow.definition_hash()
        assert [v.version for v in client.versions.list("applied")] == [1]

    workflow.task("more", "mock")  # changed: a worker token would have to write it
    refused = start(WORKER_TOKEN)
    with pytest.raises(WorkflowApplyError) as raised:
        anyio.run(refused.serve, backend="asyncio")
    assert isinstance(raised.value.cause, Forbidden)
    with live_api.sdk() as client:
        assert [v.version for v in client.versions.list("applied")] == [1]
