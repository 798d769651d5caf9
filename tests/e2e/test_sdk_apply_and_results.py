"""The SDK's apply, latest-version start and run results against the real service (in-process).

The wire details (headers, retries, refusals) are ``tests/sdk/test_apply_and_results.py``, on a
fake server (the SDK's own session installs no server package).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.plugins.live_api import VIEWER_TOKEN, WORKER_TOKEN, LiveApi
from workload_sdk import (
    Forbidden,
    NotFound,
    RunCanceled,
    RunFailed,
    RunStatus,
    WaitTimeout,
)

DIAMOND: dict[str, Any] = {
    "id": "sdk-etl",
    "tasks": [
        {"key": "fetch", "action": "mock", "input": {"output": {"rows": 3}}},
        {"key": "count", "action": "mock", "depends_on": ["fetch"], "input": {"output": {"n": 3}}},
        {
            "key": "summarize",
            "action": "mock",
            "depends_on": ["fetch"],
            "input": {"output": {"words": 42}},
        },
    ],
}


def test_apply_creates_then_answers_unchanged_then_the_next_version(live_api: LiveApi) -> None:
    with live_api.sdk() as client:
        first = client.workflows.apply(DIAMOND)
        # Its keys in another order, a default spelled out: the same normalized definition.
        same = [dict(reversed(task.items())) for task in DIAMOND["tasks"]]
        same[0]["depends_on"] = []
        again = client.workflows.apply({"tasks": same, "id": "sdk-etl"})
        changed = client.workflows.apply({**DIAMOND, "description": "now described"})
        assert client.workflows.get("sdk-etl").latest_version == 2
    assert (first.created, first.version) == (True, 1)
    assert (again.created, again.version) == (False, 1)  # nothing written
    assert again.definition_hash == first.definition_hash
    assert (changed.created, changed.version) == (True, 2)
    assert changed.definition["description"] == "now described"


def test_the_async_twin_applies_alike(live_api: LiveApi) -> None:
    async def main() -> tuple[bool, bool]:
        async with live_api.async_sdk() as client:
            first = await client.workflows.apply(DIAMOND, idempotency_key="apply-async-1")
            again = await client.workflows.apply(DIAMOND)
            return first.created, again.created

    assert asyncio.run(main()) == (True, False)


@pytest.mark.parametrize("token", [VIEWER_TOKEN, WORKER_TOKEN], ids=["viewer", "worker"])
def test_only_an_operator_applies(live_api: LiveApi, token: str) -> None:
    with live_api.sdk(token) as client, pytest.raises(Forbidden):
        client.workflows.apply(DIAMOND)
    with live_api.sdk() as operator, pytest.raises(NotFound):
        operator.workflows.get("sdk-etl")  # nothing written


def test_start_runs_the_latest_version_and_result_returns_the_sinks_outputs(
    live_api: LiveApi,
) -> None:
    with live_api.sdk() as client:
        client.workflows.apply(DIAMOND)
        client.workflows.apply({**DIAMOND, "description": "v2"})
        run = client.runs.start("sdk-etl", {"doc": 7})
        output = client.runs.result(run.run_id, timeout=30, poll_interval=0.05)
        pinned = client.runs.start("sdk-etl", version=1)
        assert client.runs.result(pinned.run_id, timeout=30, poll_interval=0.05) == output
        assert client.runs.get(pinned.run_id).version == 1
    assert run.version == 2
    assert run.input == {"doc": 7}
    assert output == {"count": {"n": 3}, "summarize": {"words": 42}}


def test_the_async_result_returns_the_output(live_api: LiveApi) -> None:
    async def main() -> dict[str, Any]:
        async with live_api.async_sdk() as client:
            await client.workflows.apply(DIAMOND)
            run = await client.runs.start("sdk-etl")
            return await client.runs.result(run.run_id, timeout=30, poll_interval=0.05)

    assert asyncio.run(main()) == {"count": {"n": 3}, "summarize": {"words": 42}}


def test_result_raises_run_failed_with_the_run(live_api: LiveApi) -> None:
    failing = {
        "id": "sdk-fails",
        "tasks": [{"key": "a", "action": "mock", "input": {"fail_always": True}}],
    }
    with live_api.sdk() as client:
        client.workflows.apply(failing)
        run = client.runs.start("sdk-fails")
        with pytest.raises(RunFailed) as caught:
            client.runs.result(run.run_id, timeout=30, poll_interval=0.05)
    assert caught.value.run.run_id == run.run_id
    assert caught.value.run.status is RunStatus.FAILED
    assert caught.value.run.output is None


def test_result_raises_run_canceled_and_times_out(live_api: LiveApi) -> None:
    slow = {
        "id": "sdk-slow",
        "tasks": [{"key": "a", "action": "mock", "input": {"sleep_ms": 60000}}],
    }
    with live_api.sdk() as client:
        client.workflows.apply(slow)
        run = client.runs.start("sdk-slow")
        with pytest.raises(WaitTimeout) as timed_out:
            client.runs.result(run.run_id, timeout=0.1, poll_interval=0.02)
        assert not timed_out.value.run.is_terminal
        client.runs.cancel(run.run_id)
        with pytest.raises(RunCanceled) as caught:
            client.runs.result(run.run_id, timeout=30, poll_interval=0.05)
    assert caught.value.run.status is RunStatus.CANCELED


def test_extra_headers_reach_the_service(live_api: LiveApi) -> None:
    with live_api.sdk() as client, pytest.raises(NotFound) as caught:
        client.runs.get("no-such-run", extra_headers={"X-Request-ID": "mine-0001"})
    assert caught.value.request_id == "mine-0001"  # the service took the caller's id
