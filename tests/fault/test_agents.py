"""Agents through real processes (SPEC §11): `workload serve`, a worker, a fake model server.

The agent's remote tool is served by ``python -m tests.fault.worker_app`` (the worker SDK over
real HTTP); its ``openai:`` model is the fake OpenAI-compatible server of ``tests/fakes``, which
counts every call. The service is SIGKILLed after a model step and after a tool step: on
restart the journal shows no repeated model call (counted at the fake server) and no re-executed
tool (counted at the worker).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.anthropic_server import Reply as AnthropicReply
from tests.fakes.anthropic_server import ToolUse, running_fake_anthropic
from tests.fakes.openai_server import Call, FakeOpenAI, Hang, Reply, Status, running_fake_openai
from tests.fault.conftest import (
    FAST_REAPER,
    VIEWER_TOKEN,
    Service,
    Services,
    Workers,
    create_workflow,
    get_run,
    wait_for_run,
)
from tests.waiting import wait_until

SEARCH = {
    "name": "search",
    "action": "search",
    "description": "Search the docs",
    "parameters": {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    },
}
CALC = {"name": "calc", "action": "mock", "parameters": {"type": "object"}}
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "sources": {"type": "integer"}},
    "required": ["answer", "sources"],
}


@pytest.fixture
def fake_model() -> Iterator[FakeOpenAI]:
    with running_fake_openai() as fake:
        yield fake


def agent_workflow(workflow_id: str, model: str, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "model": model,
        "instructions": "Answer from the docs.",
        "prompt": "What is {{input.topic}}?",
        "tools": [SEARCH, CALC],
        "output_schema": ANSWER_SCHEMA,
        **extra,
    }
    return {"id": workflow_id, "tasks": [{"key": "agent", "action": "agent", "input": spec}]}


def start(service: Service, workflow_id: str, topic: str = "leases") -> str:
    response = service.operator.post(
        f"/api/v1/workflows/{workflow_id}/versions/1/runs",
        json={"input": {"topic": topic}},
        headers={"Idempotency-Key": f"start-{workflow_id}"},
    )
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id


def steps(service: Service, run_id: str) -> list[dict[str, Any]]:
    response = service.client(VIEWER_TOKEN).get(
        f"/api/v1/runs/{run_id}/tasks/agent/steps", params={"limit": 200}
    )
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def serve(services: Services, database_url: str, fake: FakeOpenAI | None = None) -> Service:
    env = dict(FAST_REAPER)
    if fake is not None:
        env["WORKLOAD_OPENAI_BASE_URL"] = fake.base_url
        env["WORKLOAD_OPENAI_API_KEY"] = "sk-test-secret-key-0123456789"
        env["WORKLOAD_MODEL_TIMEOUT_SECONDS"] = "5"
    service = services.start(database_url, env=env)
    service.wait_ready()
    return service


def test_an_agent_uses_a_mock_tool_and_a_worker_and_answers_structured(
    services: Services, database_url: str, workers: Workers
) -> None:
    service = serve(services, database_url)
    worker = workers.start(service, "tools")
    script = [
        {
            "tool_calls": [
                {"name": "calc", "arguments": {"output": {"sum": 3}}},
                {"name": "search", "arguments": {"q": "leases"}},
            ]
        },
        {"content": '{"answer": "leases fence workers", "sources": 2}'},
    ]
    create_workflow(service, agent_workflow("agent-mock", "mock", script=script))
    run_id = start(service, "agent-mock")
    run = wait_for_run(service, run_id)
    assert run["status"] == "succeeded", steps(service, run_id)
    task = service.client(VIEWER_TOKEN).get(f"/api/v1/runs/{run_id}/tasks/agent").json()
    assert task["output"]["structured"] == {"answer": "leases fence workers", "sources": 2}
    assert task["usage"]["model_calls"] == 2
    assert task["usage"]["tool_calls"] == 2
    assert run["usage"] == task["usage"]
    journal = steps(service, run_id)
    assert [(s["sequence"], s["kind"], s["status"]) for s in journal] == [
        (1, "model_call", "succeeded"),
        (2, "tool_call", "succeeded"),
        (3, "tool_call", "succeeded"),
        (4, "model_call", "succeeded"),
    ]
    assert journal[1]["response"] == {"output": {"sum": 3}}  # in-process
    assert journal[2]["worker_id"] == "tools"  # claimed by the worker process
    assert journal[2]["response"]["output"] == {
        "hits": ["leases-1", "leases-2"],
        "query": "leases",
        "kind": "tool_call",
    }
    (item,) = [c for c in worker.claimed() if c["kind"] == "tool_call"]
    assert (item["tool"], item["arguments"], item["input"], item["upstream"]) == (
        "search",
        {"q": "leases"},
        {"q": "leases"},
        {},
    )
    assert (item["task_key"], item["attempt"], item["action"]) == ("agent", 1, "search")
    assert item["attempt_id"] == journal[2]["step_id"]
    assert worker.marked("finished", item["attempt_id"])


def test_a_killed_service_resumes_the_agent_without_repeating_a_step(
    services: Services, database_url: str, workers: Workers, fake_model: FakeOpenAI
) -> None:
    fake_model.queue(
        Reply(tool_calls=[Call("search", {"q": "leases"}, id="call_a")], usage=(11, 4)),
        Hang(),  # the second model call is in flight when the service is killed
        Reply('{"answer": "fenced", "sources": 2}', usage=(30, 9)),
    )
    first = serve(services, database_url, fake_model)
    create_workflow(first, agent_workflow("agent-crash", "openai:test-model"))
    run_id = start(first, "agent-crash")

    # 1. After the model step: its answer is journaled, the tool call waits for a worker.
    wait_until(
        lambda: [s["status"] for s in steps(first, run_id)] == ["succeeded", "running"],
        message=lambda: f"{steps(first, run_id)}\n{first.stderr_tail()}",
    )
    assert fake_model.calls == 1
    first.signal(signal.SIGKILL)
    first.wait_exit(10)

    second = serve(services, database_url, fake_model)
    worker = workers.start(second, "tools")
    # 2. After the tool step: the worker ran it, and the next model call is in flight.
    wait_until(
        lambda: fake_model.calls == 2,
        message=lambda: f"{steps(second, run_id)}\n{second.stderr_tail()}",
    )
    journal = steps(second, run_id)
    assert [s["status"] for s in journal] == ["succeeded", "succeeded", "running"]
    second.signal(signal.SIGKILL)
    second.wait_exit(10)

    third = serve(services, database_url, fake_model)
    run = wait_for_run(third, run_id)
    assert run["status"] == "succeeded", f"{steps(third, run_id)}\n{third.stderr_tail()}"
    journal = steps(third, run_id)
    assert [(s["kind"], s["status"]) for s in journal] == [
        ("model_call", "succeeded"),
        ("tool_call", "succeeded"),
        ("model_call", "succeeded"),
    ]
    # The completed model call was never repeated: the one in flight was issued again, once.
    requests = [r.json() for r in fake_model.chat_requests]
    assert len(requests) == 3
    assert [len(r["messages"]) for r in requests] == [2, 4, 4]
    assert requests[1] == requests[2]
    # The completed tool call was never executed again.
    executed = [c for c in worker.claimed() if c["kind"] == "tool_call"]
    assert len(executed) == 1
    assert worker.marked("finished", executed[0]["attempt_id"])
    assert requests[1]["messages"][3] == {
        "role": "tool",
        "tool_call_id": "call_a",
        "content": '{"hits":["leases-1","leases-2"],"kind":"tool_call","query":"leases"}',
    }
    attempts = third.client(VIEWER_TOKEN).get(f"/api/v1/runs/{run_id}/tasks/agent/attempts")
    assert [a["status"] for a in attempts.json()["items"]] == ["succeeded"]  # resumed
    events = third.client(VIEWER_TOKEN).get(f"/api/v1/runs/{run_id}/events", params={"limit": 200})
    recovered = [e["data"] for e in events.json()["items"] if e["type"] == "run.recovered"]
    assert recovered == [
        {"interrupted_attempts": 0, "resumed_attempts": 1},
        {"interrupted_attempts": 0, "resumed_attempts": 1},
    ]
    usage = get_run(third, run_id)["usage"]
    assert usage == {"model_calls": 2, "tool_calls": 1, "input_tokens": 41, "output_tokens": 13}
    # The provider key never appears in what the service wrote or serves.
    for service in (first, second, third):
        assert "sk-test-secret-key" not in service.stderr()
    assert "sk-test-secret-key" not in str(journal)


def test_model_unavailable_follows_the_retry_rule(
    services: Services, database_url: str, fake_model: FakeOpenAI
) -> None:
    fake_model.queue(Status(429), Reply('{"answer": "x", "sources": 0}'))
    service = serve(services, database_url, fake_model)
    definition = agent_workflow("agent-retry", "openai:test-model")
    definition["tasks"][0]["retry"] = {"max_attempts": 2, "initial_backoff_seconds": 0}
    create_workflow(service, definition)
    run_id = start(service, "agent-retry")
    assert wait_for_run(service, run_id)["status"] == "succeeded"
    attempts = service.client(VIEWER_TOKEN).get(f"/api/v1/runs/{run_id}/tasks/agent/attempts")
    first, second = attempts.json()["items"]
    assert first["status"] == "failed"
    assert (first["error"]["code"], first["error"]["retryable"]) == ("model_unavailable", True)
    assert second["status"] == "succeeded"
    assert fake_model.calls == 2

    fake_model.queue(Status(400))
    create_workflow(service, agent_workflow("agent-rejected", "openai:test-model"))
    run_id = start(service, "agent-rejected")
    run = wait_for_run(service, run_id)
    assert run["status"] == "failed"
    task = service.client(VIEWER_TOKEN).get(f"/api/v1/runs/{run_id}/tasks/agent").json()
    assert (task["error"]["code"], task["error"]["retryable"]) == ("model_error", False)


def test_two_endpoints_resume_each_agent_from_its_journal_after_a_kill(
    services: Services, database_url: str, fake_model: FakeOpenAI
) -> None:
    """An OpenAI-compatible endpoint and an Anthropic one (SPEC §11, named endpoints): two
    agent tasks, one on each, are killed with their second model call in flight; the next
    service resumes both from their journals, repeating neither first call."""
    fake_model.queue(
        Reply(tool_calls=[Call("calc", {"output": {"sum": 1}}, id="call_o")], usage=(11, 4)),
        Hang(),
        Reply('{"answer": "from openai", "sources": 1}', usage=(30, 9)),
    )
    with running_fake_anthropic() as claude:
        claude.queue(
            AnthropicReply(
                tool_uses=[ToolUse("calc", {"output": {"sum": 2}}, id="toolu_a")],
                usage={"input_tokens": 12, "output_tokens": 5},
            ),
            Hang(),
            AnthropicReply(
                tool_uses=[ToolUse("final_answer", {"answer": "from claude", "sources": 2})],
                usage={"input_tokens": 31, "output_tokens": 8},
            ),
        )
        endpoints = {
            "local": {"provider": "openai", "base_url": fake_model.base_url},
            "claude": {
                "provider": "anthropic",
                "base_url": claude.base_url,
                "api_key_env": "WORKLOAD_TEST_CLAUDE_KEY",
            },
        }
        env = {
            **FAST_REAPER,
            "WORKLOAD_MODEL_ENDPOINTS": json.dumps(endpoints),
            "WORKLOAD_TEST_CLAUDE_KEY": "sk-ant-test-secret-key-0123456789",
            # Both second calls must still be in flight when the service is killed (the first
            # Anthropic call imports its package, seconds on a busy machine).
            "WORKLOAD_MODEL_TIMEOUT_SECONDS": "120",
        }
        first = services.start(database_url, env=env)
        first.wait_ready()
        tasks: list[dict[str, Any]] = []
        for key, model in (("local", "local:small"), ("claude", "claude:claude-sonnet-4-5")):
            (task,) = agent_workflow(key, model)["tasks"]
            tasks.append({**task, "key": key})
        create_workflow(first, {"id": "two-endpoints", "tasks": tasks})
        run_id = start(first, "two-endpoints")

        def journals(service: Service) -> dict[str, list[str]]:
            return {
                key: [s["status"] for s in task_steps(service, run_id, key)]
                for key in ("local", "claude")
            }

        in_flight = ["succeeded", "succeeded", "running"]
        # A step is journaled running before its call is sent (commit, then execute): both
        # second calls must also have reached their endpoints before the kill.
        wait_until(
            lambda: (
                journals(first) == {"local": in_flight, "claude": in_flight}
                and (fake_model.calls, claude.calls) == (2, 2)
            ),
            timeout=60,
            message=lambda: (
                f"{journals(first)} calls {(fake_model.calls, claude.calls)}\n{first.stderr_tail()}"
            ),
        )
        first.signal(signal.SIGKILL)
        first.wait_exit(10)

        second = services.start(database_url, env=env)
        second.wait_ready()
        run = wait_for_run(second, run_id)
        assert run["status"] == "succeeded", f"{journals(second)}\n{second.stderr_tail()}"
        # Each first call was answered once; each call in flight was issued again, once.
        assert (fake_model.calls, claude.calls) == (3, 3)
        for requests in (fake_model.chat_requests, claude.message_requests):
            bodies = [r.json() for r in requests]
            assert bodies[1] == bodies[2]
            assert bodies[0] != bodies[1]
        for key, answer in (("local", "from openai"), ("claude", "from claude")):
            task = second.client(VIEWER_TOKEN).get(f"/api/v1/runs/{run_id}/tasks/{key}").json()
            assert task["output"]["structured"]["answer"] == answer
            assert task["usage"]["model_calls"] == 2
            attempts = second.client(VIEWER_TOKEN).get(
                f"/api/v1/runs/{run_id}/tasks/{key}/attempts"
            )
            assert [a["status"] for a in attempts.json()["items"]] == ["succeeded"]  # resumed
        assert get_run(second, run_id)["usage"] == {
            "model_calls": 4,
            "tool_calls": 2,
            "input_tokens": 11 + 30 + 12 + 31,
            "output_tokens": 4 + 9 + 5 + 8,
        }
        for service in (first, second):
            assert "sk-ant-test-secret-key" not in service.stderr()


def task_steps(service: Service, run_id: str, task_key: str) -> list[dict[str, Any]]:
    response = service.client(VIEWER_TOKEN).get(
        f"/api/v1/runs/{run_id}/tasks/{task_key}/steps", params={"limit": 200}
    )
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items
