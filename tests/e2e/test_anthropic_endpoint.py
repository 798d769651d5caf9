"""An OpenAI-compatible endpoint and an Anthropic one in one service (SPEC §11, issue 29).

Two fake servers started here — the fake OpenAI server and the fake Anthropic Messages server —
are the endpoints ``local`` and ``claude``; one workflow's two agent tasks use one each, both
with a tool, and the second with an output schema (asked for as Anthropic's forced answer tool).
In-process and again over real HTTP and PostgreSQL (``real_http``): the service's own wiring
builds the Anthropic adapter from ``WORKLOAD_MODEL_ENDPOINTS``. The ``claude`` key is a
recognizable string that no answer, step, event or metric may contain.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.anthropic_server import FakeAnthropic, Reply, ToolUse, running_fake_anthropic
from tests.fakes.openai_server import FakeOpenAI, running_fake_openai
from tests.plugins.live_api import LiveApi, settings
from workload_api.settings import Settings

pytestmark = pytest.mark.real_http

V1 = "/api/v1"
KEY = "sk-ant-Zq81RecognizableClaudeKey-4Lw"
KEY_VARIABLE = "WORKLOAD_TEST_CLAUDE_KEY"
_keys = itertools.count()
NOTE = {"name": "note", "action": "mock", "parameters": {"type": "object"}}
VERDICT = {
    "type": "object",
    "properties": {"verdict": {"type": "string"}},
    "required": ["verdict"],
}
CLAUDE_SETTINGS = {"max_output_tokens": 300}


@pytest.fixture
def local() -> Iterator[FakeOpenAI]:
    with running_fake_openai() as fake:
        yield fake


@pytest.fixture
def claude() -> Iterator[FakeAnthropic]:
    with running_fake_anthropic() as fake:
        yield fake


@pytest.fixture
def api_settings(
    local: FakeOpenAI, claude: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    endpoints = {
        "local": {"provider": "openai", "base_url": local.base_url},
        "claude": {
            "provider": "anthropic",
            "base_url": claude.base_url,
            "api_key_env": KEY_VARIABLE,
        },
    }
    return settings(model_endpoints=json.dumps(endpoints))


def idem() -> dict[str, str]:
    return {"Idempotency-Key": f"anthropic-endpoint-{next(_keys)}"}


def agent(key: str, model: str, **spec: Any) -> dict[str, Any]:
    return {
        "key": key,
        "action": "agent",
        "retry": {"max_attempts": 1},
        "input": {"model": model, "prompt": f"do {key}", "tools": [NOTE], **spec},
    }


def test_an_openai_and_an_anthropic_endpoint_serve_one_workflow(
    live_api: LiveApi, local: FakeOpenAI, claude: FakeAnthropic
) -> None:
    local.queue(
        {
            "tool_calls": [{"name": "note", "arguments": {"output": {"seen": 1}}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2},
        },
        {"content": "drafted", "usage": {"prompt_tokens": 20, "completion_tokens": 3}},
    )
    claude.queue(
        Reply(
            tool_uses=[ToolUse("note", {"output": {"seen": 2}})],
            usage={"input_tokens": 30, "output_tokens": 4},
        ),
        Reply(
            tool_uses=[ToolUse("final_answer", {"verdict": "ok"})],
            usage={"input_tokens": 40, "output_tokens": 5},
        ),
    )
    tasks = [
        agent("draft", "local:small"),
        agent(
            "check",
            "claude:claude-sonnet-4-5",
            model_settings=CLAUDE_SETTINGS,
            output_schema=VERDICT,
        ),
    ]
    created = live_api.operator.post(
        f"{V1}/workflows", json={"id": "two-providers", "tasks": tasks}, headers=idem()
    )
    assert created.status_code == 201, created.text
    started = live_api.operator.post(
        f"{V1}/workflows/two-providers/versions/1/runs", headers=idem()
    )
    assert started.status_code == 202, started.text
    finished = live_api.wait_for_run(started.json()["run_id"], timeout=60)

    assert finished["status"] == "succeeded", finished
    assert finished["usage"] == {
        "model_calls": 4,
        "tool_calls": 2,
        "input_tokens": 100,
        "output_tokens": 14,
    }
    run_id = finished["run_id"]
    check = live_api.viewer.get(f"{V1}/runs/{run_id}/tasks/check").json()
    assert check["output"]["structured"] == {"verdict": "ok"}
    texts = [json.dumps(finished)]
    for key in ("draft", "check"):
        steps = live_api.viewer.get(f"{V1}/runs/{run_id}/tasks/{key}/steps").json()["items"]
        assert [(s["kind"], s["status"]) for s in steps] == [
            ("model_call", "succeeded"),
            ("tool_call", "succeeded"),
            ("model_call", "succeeded"),
        ]
        texts.append(json.dumps(steps))
    texts.append(live_api.viewer.get(f"{V1}/runs/{run_id}/events").text)
    texts.append(live_api.viewer.get("/metrics").text)
    assert KEY not in "\n".join(texts)

    # Each endpoint got its own task's calls; Anthropic's with the key, the settings, the
    # tool, and the output schema as the forced answer tool beside it.
    assert (local.calls, claude.calls) == (2, 2)
    for request in claude.message_requests:
        body = request.json()
        assert body["model"] == "claude-sonnet-4-5"
        assert body["max_tokens"] == 300
        assert request.headers["authorization"] == f"Bearer {KEY}"
        tools = {t["name"]: t for t in body["tools"]}
        assert set(tools) == {"note", "final_answer"}
        assert tools["final_answer"]["input_schema"] == VERDICT
        assert body["tool_choice"] == {"type": "any"}
    # The tool's result went back to Claude as a tool_result answering its call.
    last = claude.message_requests[-1].json()["messages"]
    assert any(
        block.get("type") == "tool_result"
        for message in last
        if isinstance(message.get("content"), list)
        for block in message["content"]
    )
    for request in local.chat_requests:
        assert request.json()["model"] == "small"
