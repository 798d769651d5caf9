"""Named model endpoints, model settings and native structured output (SPEC §11, ADR 0027).

One service with two OpenAI-compatible endpoints — two fake servers started here — and a
workflow whose two agent tasks use one each; what each server received is asserted on its
recorded requests. In-process and again over real HTTP and PostgreSQL (``real_http``). The
``alpha`` endpoint's key is a recognizable string that no answer, step, problem, metric or log
line may contain.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes.openai_server import FakeOpenAI, Status, running_fake_openai
from tests.plugins.live_api import LiveApi, settings
from workload_api.settings import Settings

pytestmark = pytest.mark.real_http

V1 = "/api/v1"
KEY = "sk-alpha-Rk93vRecognizableKey-7Qx2"
KEY_VARIABLE = "WORKLOAD_TEST_ALPHA_KEY"
_keys = itertools.count()
NOTE = {"name": "note", "action": "mock", "parameters": {"type": "object"}}
VERDICT = {
    "type": "object",
    "properties": {"verdict": {"type": "string"}},
    "required": ["verdict"],
    "additionalProperties": False,
}
SETTINGS = {"temperature": 0.2, "top_p": 0.9, "max_output_tokens": 128}


@pytest.fixture
def alpha() -> Iterator[FakeOpenAI]:
    with running_fake_openai() as fake:
        yield fake


@pytest.fixture
def beta() -> Iterator[FakeOpenAI]:
    with running_fake_openai() as fake:
        yield fake


@pytest.fixture
def api_settings(alpha: FakeOpenAI, beta: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Settings:
    # The key is read from its variable when the service is wired (after this fixture).
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    endpoints = {
        "alpha": {"provider": "openai", "base_url": alpha.base_url, "api_key_env": KEY_VARIABLE},
        "beta": {"provider": "openai", "base_url": beta.base_url},
    }
    return settings(model_endpoints=json.dumps(endpoints))


def idem() -> dict[str, str]:
    return {"Idempotency-Key": f"endpoints-{next(_keys)}"}


def agent(key: str, model: str, **spec: Any) -> dict[str, Any]:
    return {
        "key": key,
        "action": "agent",
        "retry": {"max_attempts": 1},
        "input": {"model": model, "prompt": f"do {key}", "tools": [NOTE], **spec},
    }


def create(api: LiveApi, workflow_id: str, *tasks: dict[str, Any]) -> Any:
    body = {"id": workflow_id, "tasks": list(tasks)}
    return api.operator.post(f"{V1}/workflows", json=body, headers=idem())


def run(api: LiveApi, workflow_id: str) -> dict[str, Any]:
    created = create(api, workflow_id, *_tasks[workflow_id])
    assert created.status_code == 201, created.text
    started = api.operator.post(f"{V1}/workflows/{workflow_id}/versions/1/runs", headers=idem())
    assert started.status_code == 202, started.text
    return api.wait_for_run(started.json()["run_id"], timeout=60)


_tasks: dict[str, list[dict[str, Any]]] = {
    "two-endpoints": [
        agent("first", "alpha:model-a", model_settings=SETTINGS),
        agent("second", "beta:model-b", output_schema=VERDICT),
    ],
    "nonconforming": [agent("second", "beta:model-b", output_schema=VERDICT)],
    "refused-key": [agent("first", "alpha:model-a")],
}


def tool_turn(tokens: tuple[int, int]) -> dict[str, Any]:
    return {
        "tool_calls": [{"name": "note", "arguments": {"output": {"seen": True}}}],
        "usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]},
    }


def answer(content: str, tokens: tuple[int, int]) -> dict[str, Any]:
    usage = {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]}
    return {"content": content, "usage": usage}


def everything_shown(api: LiveApi, run: dict[str, Any]) -> str:
    """Every resource of the run a viewer can read, and the metrics, as one text."""
    run_id = run["run_id"]
    texts = [json.dumps(run)]
    for task in api.viewer.get(f"{V1}/runs/{run_id}/tasks").json()["items"]:
        key = task["task_key"]
        texts.append(json.dumps(task))
        for part in ("attempts", "steps"):
            texts.append(api.viewer.get(f"{V1}/runs/{run_id}/tasks/{key}/{part}").text)
    texts.append(api.viewer.get(f"{V1}/runs/{run_id}/events").text)
    texts.append(api.viewer.get("/metrics").text)
    return "\n".join(texts)


def model_calls(api: LiveApi) -> dict[tuple[str, str], float]:
    """``workload_model_calls_total`` by (provider, outcome)."""
    return {
        (sample.labels["provider"], sample.labels["outcome"]): sample.value
        for family in text_string_to_metric_families(api.viewer.get("/metrics").text)
        for sample in family.samples
        if sample.name == "workload_model_calls_total"
    }


def test_two_endpoints_serve_one_workflow_with_settings_and_native_structured_output(
    live_api: LiveApi, alpha: FakeOpenAI, beta: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    alpha.queue(tool_turn((10, 2)), answer("done", (20, 3)))
    beta.queue(tool_turn((30, 4)), answer('{"verdict": "ok"}', (40, 5)))

    finished = run(live_api, "two-endpoints")

    assert finished["status"] == "succeeded", finished
    assert finished["usage"] == {
        "model_calls": 4,
        "tool_calls": 2,
        "input_tokens": 100,
        "output_tokens": 14,
    }
    run_id = finished["run_id"]
    second = live_api.viewer.get(f"{V1}/runs/{run_id}/tasks/second").json()
    assert second["output"]["structured"] == {"verdict": "ok"}
    for key in ("first", "second"):
        steps = live_api.viewer.get(f"{V1}/runs/{run_id}/tasks/{key}/steps").json()["items"]
        assert [(s["kind"], s["status"]) for s in steps] == [
            ("model_call", "succeeded"),
            ("tool_call", "succeeded"),
            ("model_call", "succeeded"),
        ]
    first_steps = live_api.viewer.get(f"{V1}/runs/{run_id}/tasks/first/steps").json()["items"]
    assert first_steps[0]["request"]["model"] == "alpha:model-a"
    assert first_steps[0]["request"]["settings"] == SETTINGS

    # Each endpoint got its own task's calls, with its settings and its key.
    assert alpha.calls == 2
    assert beta.calls == 2
    for request in alpha.chat_requests:
        body = request.json()
        assert body["model"] == "model-a"
        assert (body["temperature"], body["top_p"], body["max_tokens"]) == (
            0.2,
            0.9,
            128,
        )
        assert "response_format" not in body
        assert request.headers["authorization"] == f"Bearer {KEY}"
    for request in beta.chat_requests:
        body = request.json()
        assert body["model"] == "model-b"
        assert not {"temperature", "top_p", "max_tokens", "max_completion_tokens"} & set(body)
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": VERDICT, "strict": True},
        }
        assert request.headers["authorization"] != f"Bearer {KEY}"

    assert model_calls(live_api) == {("alpha", "ok"): 2, ("beta", "ok"): 2}
    shown = everything_shown(live_api, finished)
    assert KEY not in shown
    assert KEY not in caplog.text


def test_a_nonconforming_answer_still_fails_invalid_model_output(
    live_api: LiveApi, beta: FakeOpenAI
) -> None:
    beta.queue(answer('{"verdict": 3}', (5, 5)))

    finished = run(live_api, "nonconforming")

    assert finished["status"] == "failed"
    attempts = live_api.viewer.get(f"{V1}/runs/{finished['run_id']}/tasks/second/attempts")
    [attempt] = attempts.json()["items"]
    assert attempt["error"]["code"] == "invalid_model_output"
    assert "does not satisfy output_schema" in attempt["error"]["message"]
    assert beta.chat_requests[0].json()["response_format"]["type"] == "json_schema"


def test_a_key_the_server_echoes_reaches_no_step_problem_metric_or_log(
    live_api: LiveApi, alpha: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    alpha.queue(Status(401, f"Incorrect API key provided: {KEY}. Check {KEY.upper()}"))

    finished = run(live_api, "refused-key")

    assert finished["status"] == "failed"
    attempts = live_api.viewer.get(f"{V1}/runs/{finished['run_id']}/tasks/first/attempts")
    [attempt] = attempts.json()["items"]
    assert attempt["error"]["code"] == "model_error"
    assert "HTTP 401" in attempt["error"]["message"]
    assert model_calls(live_api) == {("alpha", "error"): 1}
    shown = everything_shown(live_api, finished)
    assert KEY not in shown
    assert KEY.upper() not in shown
    assert KEY not in caplog.text


def test_an_unknown_endpoint_is_refused_at_definition_time(live_api: LiveApi) -> None:
    response = create(
        live_api,
        "unknown-endpoint",
        agent("ok", "alpha:m"),
        agent("bad", "gamma:m"),
        agent("was-default", "openai:gpt-4o"),
    )
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["code"] == "invalid_definition"
    assert [(e["path"], e["message"]) for e in body["errors"]] == [
        (
            "/tasks/1/input/model",
            "no model endpoint named 'gamma' is configured on this server "
            "(configured: alpha, beta)",
        ),
        (
            "/tasks/2/input/model",
            "no model endpoint named 'openai' is configured on this server "
            "(configured: alpha, beta)",
        ),
    ]
    # A new version, and PUT, compile the same way.
    applied = live_api.operator.put(
        f"{V1}/workflows/unknown-endpoint",
        json={"tasks": [agent("bad", "gamma:m")]},
        headers=idem(),
    )
    assert applied.status_code == 400, applied.text
    assert [e["path"] for e in applied.json()["errors"]] == ["/tasks/0/input/model"]


def test_drafts_refuse_an_unknown_endpoint(live_api: LiveApi) -> None:
    refused = live_api.operator.post(
        f"{V1}/drafts", json={"prompt": "a workflow", "model": "gamma:m"}, headers=idem()
    )
    assert refused.status_code == 400, refused.text
    assert [e["path"] for e in refused.json()["errors"]] == ["/model"]
    accepted = live_api.operator.post(
        f"{V1}/drafts", json={"prompt": "a workflow", "model": "beta:m"}, headers=idem()
    )
    assert accepted.status_code == 202, accepted.text
