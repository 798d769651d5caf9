"""Agents' remote tool calls in metrics and traces (SPEC §11, §12).

A tool call a worker executes is a ``tool`` attempt when it ends — however it ends: its worker's
``complete`` or ``fail``, its lease running out (``interrupted``, and a lease expiry), or the
cancel of its run — counted exactly once (a repeated identical report counts nothing), and it
is an ``execute_tool {name}`` span in the run's trace. The worker is this test, claiming over
HTTP with the worker token. In-process on the in-memory store, and again over real HTTP and
PostgreSQL for the metrics (``real_http``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.observability.scrape import Samples, deltas, scrape
from tests.plugins.live_api import LiveApi
from tests.waiting import wait_until
from workload_api.telemetry import traceparent_of

V1 = "/api/v1"
_keys = itertools.count()
TOOL = "search_docs"
ACTION = "search"


def idem() -> dict[str, str]:
    return {"Idempotency-Key": f"remote-tools-{next(_keys)}"}


def start_agent(api: LiveApi, workflow_id: str, *, heartbeat_timeout_seconds: float = 30) -> str:
    """An agent whose one tool is remote: it calls it once, then answers."""
    script = [
        {"tool_calls": [{"name": TOOL, "arguments": {"q": "leases"}}]},
        {"content": "done"},
    ]
    agent = {
        "key": "agent",
        "action": "agent",
        "heartbeat_timeout_seconds": heartbeat_timeout_seconds,
        "input": {
            "model": "mock",
            "prompt": "go",
            "tools": [{"name": TOOL, "action": ACTION, "description": "remote"}],
            "script": script,
        },
    }
    body = {"id": workflow_id, "tasks": [agent]}
    created = api.operator.post(f"{V1}/workflows", json=body, headers=idem())
    assert created.status_code == 201, created.text
    started = api.operator.post(f"{V1}/workflows/{workflow_id}/versions/1/runs", headers=idem())
    assert started.status_code == 202, started.text
    run_id: str = started.json()["run_id"]
    return run_id


def claim_tool_call(api: LiveApi, worker_id: str) -> dict[str, Any]:
    body = {"queues": ["default"], "actions": [ACTION], "wait_seconds": 1}

    def claimed() -> list[dict[str, Any]]:
        answer = api.worker.post(f"{V1}/workers/{worker_id}/claim", json=body, timeout=30)
        assert answer.status_code == 200, answer.text
        items: list[dict[str, Any]] = answer.json()["attempts"]
        return items

    (item,) = wait_until(claimed, message="the tool call was never queued")
    assert (item["kind"], item["tool"], item["arguments"]) == ("tool_call", TOOL, {"q": "leases"})
    return item


def report(api: LiveApi, item: dict[str, Any], kind: str, body: dict[str, Any]) -> Any:
    return api.worker.post(
        f"{V1}/attempts/{item['attempt_id']}/{kind}",
        json={"lease_token": item["lease_token"], **body},
    )


COUNTERS = ("workload_attempts_finished_total", "workload_leases_expired_total")


def counters(before: Samples, api: LiveApi) -> dict[str, float]:
    """How the attempt and lease-expiry counters moved, spelled as PromQL does."""
    found = {}
    for (name, labels), value in deltas(before, scrape(api.viewer)).items():
        if name in COUNTERS:
            inner = ",".join(f'{k}="{v}"' for k, v in labels)
            found[f"{name}{{{inner}}}" if inner else name] = value
    return found


def settle(before: Samples, api: LiveApi, expected: Mapping[str, float]) -> None:
    """Wait for the counters to move by exactly ``expected`` (the runner's commits may lag)."""
    wait_until(
        lambda: counters(before, api) == expected,
        timeout=10,
        message=lambda: f"counters moved by {counters(before, api)}",
    )


def step_of(api: LiveApi, run_id: str) -> dict[str, Any]:
    steps = api.viewer.get(f"{V1}/runs/{run_id}/tasks/agent/steps").json()["items"]
    (tool,) = [s for s in steps if s["kind"] == "tool_call"]
    found: dict[str, Any] = tool
    return found


TOOL_SUCCEEDED = 'workload_attempts_finished_total{kind="tool",status="succeeded"}'
AGENT_SUCCEEDED = 'workload_attempts_finished_total{kind="agent",status="succeeded"}'


@pytest.mark.real_http
def test_a_completed_remote_tool_call_counts_once(live_api: LiveApi) -> None:
    before = scrape(live_api.viewer)
    run_id = start_agent(live_api, "tool-completed")
    item = claim_tool_call(live_api, "w-tools")
    completed = report(live_api, item, "complete", {"output": {"hits": ["leases-1"]}})
    assert completed.status_code == 200, completed.text
    assert live_api.wait_for_run(run_id)["status"] == "succeeded"
    settle(before, live_api, {TOOL_SUCCEEDED: 1, AGENT_SUCCEEDED: 1})

    # The worker repeats its identical report: the same answer, and nothing counts again.
    again = report(live_api, item, "complete", {"output": {"hits": ["leases-1"]}})
    assert again.status_code == 200, again.text
    assert again.json() == completed.json()
    assert counters(before, live_api) == {TOOL_SUCCEEDED: 1, AGENT_SUCCEEDED: 1}
    assert step_of(live_api, run_id)["status"] == "succeeded"


@pytest.mark.real_http
def test_a_failed_remote_tool_call_counts_failed(live_api: LiveApi) -> None:
    before = scrape(live_api.viewer)
    run_id = start_agent(live_api, "tool-failed")
    item = claim_tool_call(live_api, "w-tools")
    error = {"code": "IndexMissing", "message": "no index", "retryable": False}
    failed = report(live_api, item, "fail", {"error": error})
    assert failed.status_code == 200, failed.text
    # The model hears of the failure and answers: the agent succeeds.
    assert live_api.wait_for_run(run_id)["status"] == "succeeded"
    expected = {
        'workload_attempts_finished_total{kind="tool",status="failed"}': 1,
        AGENT_SUCCEEDED: 1,
    }
    settle(before, live_api, expected)
    assert report(live_api, item, "fail", {"error": error}).status_code == 200
    assert counters(before, live_api) == expected


@pytest.mark.real_http
def test_a_remote_tool_calls_lease_expiry_counts_interrupted(live_api: LiveApi) -> None:
    before = scrape(live_api.viewer)
    run_id = start_agent(live_api, "tool-expired", heartbeat_timeout_seconds=0.3)
    item = claim_tool_call(live_api, "w-silent")  # never heartbeats: the lease runs out
    assert live_api.wait_for_run(run_id)["status"] == "succeeded"
    step = step_of(live_api, run_id)
    assert (step["status"], step["response"]["code"]) == ("failed", "lease_expired")
    expected = {
        'workload_attempts_finished_total{kind="tool",status="interrupted"}': 1,
        "workload_leases_expired_total": 1,
        AGENT_SUCCEEDED: 1,
    }
    settle(before, live_api, expected)
    # The late report is refused and counts nothing.
    late = report(live_api, item, "complete", {"output": {}})
    assert late.status_code == 409, late.text
    assert counters(before, live_api) == expected


@pytest.mark.real_http
def test_a_remote_tool_call_canceled_with_its_run_counts_canceled(live_api: LiveApi) -> None:
    before = scrape(live_api.viewer)
    run_id = start_agent(live_api, "tool-canceled")
    item = claim_tool_call(live_api, "w-tools")
    canceled = live_api.operator.post(f"{V1}/runs/{run_id}/cancel", headers=idem())
    assert canceled.status_code == 202, canceled.text
    assert live_api.wait_for_run(run_id)["status"] == "canceled"
    expected = {
        'workload_attempts_finished_total{kind="tool",status="canceled"}': 1,
        'workload_attempts_finished_total{kind="agent",status="canceled"}': 1,
    }
    settle(before, live_api, expected)
    late = report(live_api, item, "complete", {"output": {}})
    assert (late.status_code, late.json()["reason"]) == (409, "canceled")
    assert counters(before, live_api) == expected


def _finished_with(spans: InMemorySpanExporter, name: str) -> Sequence[ReadableSpan] | None:
    finished = spans.get_finished_spans()
    return finished if any(s.name == name for s in finished) else None


def _one(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, f"{len(found)} spans named {name!r}: {[s.name for s in spans]}"
    return found[0]


def test_a_remote_tool_call_is_an_execute_tool_span_in_the_runs_trace(
    traced_api: LiveApi, spans: InMemorySpanExporter
) -> None:
    run_id = start_agent(traced_api, "tool-traced")
    item = claim_tool_call(traced_api, "w-traced")
    completed = report(traced_api, item, "complete", {"output": {"hits": []}})
    assert completed.status_code == 200, completed.text
    assert traced_api.wait_for_run(run_id)["status"] == "succeeded"
    finished = wait_until(
        lambda: _finished_with(spans, "run tool-traced"), message="the run's span never ended"
    )
    run_span = _one(finished, "run tool-traced")
    attempt = _one(finished, "attempt agent")
    tool = _one(finished, f"execute_tool {TOOL}")
    assert tool.context is not None
    assert attempt.context is not None
    assert run_span.context is not None
    assert tool.context.trace_id == run_span.context.trace_id
    assert tool.parent is not None
    assert tool.parent.span_id == attempt.context.span_id
    assert tool.kind is SpanKind.INTERNAL
    attributes = dict(tool.attributes or {})
    step = step_of(traced_api, run_id)
    assert {k: attributes[k] for k in attributes if k.startswith("gen_ai.")} == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": TOOL,
        "gen_ai.tool.call.id": step["tool_call_id"],
    }
    assert attributes["workload.attempt.status"] == "succeeded"
    assert attributes["workload.worker_id"] == "w-traced"
    assert tool.status.status_code is not StatusCode.ERROR
    # The worker continues the tool call's span; it covers the call, queued to reported.
    assert item["traceparent"] == traceparent_of(tool.context)
    assert [e.name for e in tool.events] == ["claimed"]
    assert tool.start_time is not None
    assert tool.end_time is not None
    assert tool.start_time <= tool.events[0].timestamp <= tool.end_time


def test_a_remote_tool_calls_lease_expiry_marks_its_span(
    traced_api: LiveApi, spans: InMemorySpanExporter
) -> None:
    run_id = start_agent(traced_api, "tool-traced-expired", heartbeat_timeout_seconds=0.3)
    claim_tool_call(traced_api, "w-silent")
    assert traced_api.wait_for_run(run_id)["status"] == "succeeded"
    finished = wait_until(
        lambda: _finished_with(spans, "run tool-traced-expired"),
        message="the run's span never ended",
    )
    tool = _one(finished, f"execute_tool {TOOL}")
    attributes = dict(tool.attributes or {})
    assert attributes["workload.attempt.status"] == "interrupted"
    assert attributes["error.type"] == "lease_expired"
    assert tool.status.status_code is StatusCode.ERROR
