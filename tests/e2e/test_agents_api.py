"""Agent tasks through the API (SPEC §11): definitions checked at creation, steps, usage.

In-process on the in-memory store (the mock model), and again over real HTTP and PostgreSQL for
the tests marked ``real_http``.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.observability.test_remote_tools import claim_tool_call, report, start_agent, step_of
from tests.plugins.live_api import LiveApi
from tests.waiting import wait_until

V1 = "/api/v1"
_keys = itertools.count()
TERMINAL = {"succeeded", "failed", "canceled"}


def idem() -> dict[str, str]:
    return {"Idempotency-Key": f"agents-{next(_keys)}"}


def agent_task(**spec: Any) -> dict[str, Any]:
    return {
        "key": "agent",
        "action": "agent",
        "input": {"model": "mock", "prompt": "go", **spec},
    }


def create(api: LiveApi, workflow_id: str, *tasks: dict[str, Any]) -> Any:
    body = {"id": workflow_id, "tasks": list(tasks)}
    return api.operator.post(f"{V1}/workflows", json=body, headers=idem())


def run(api: LiveApi, workflow_id: str) -> dict[str, Any]:
    started = api.operator.post(f"{V1}/workflows/{workflow_id}/versions/1/runs", headers=idem())
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]

    def done() -> dict[str, Any] | None:
        body: dict[str, Any] = api.viewer.get(f"{V1}/runs/{run_id}").json()
        return body if body["status"] in TERMINAL else None

    return wait_until(done, message=f"run {run_id} did not finish")


@pytest.mark.parametrize(
    ("spec", "paths"),
    [
        pytest.param({"bogus": 1}, ["/tasks/0/input/bogus"], id="unknown-field"),
        pytest.param({"model": "gpt-4"}, ["/tasks/0/input/model"], id="unknown-model"),
        pytest.param({"prompt": 3}, ["/tasks/0/input/prompt"], id="prompt-type"),
        pytest.param({"tools": {}}, ["/tasks/0/input/tools"], id="tools-object"),
        pytest.param(
            {"tools": [{"name": "has space", "action": "x"}]},
            ["/tasks/0/input/tools/0/name"],
            id="tool-name",
        ),
        pytest.param({"tools": [{"name": "t"}]}, ["/tasks/0/input/tools/0/action"], id="no-action"),
        pytest.param(
            {"tools": [{"name": "t", "action": "x"}, {"name": "t", "action": "y"}]},
            ["/tasks/0/input/tools/1/name"],
            id="duplicate-tool",
        ),
        pytest.param(
            {"tools": [{"name": "t", "action": "x", "parameters": {"type": "objekt"}}]},
            ["/tasks/0/input/tools/0/parameters"],
            id="bad-schema",
        ),
        pytest.param(
            {"output_schema": {"$ref": "http://169.254.169.254/latest"}},
            ["/tasks/0/input/output_schema"],
            id="remote-ref-never-fetched",
        ),
        pytest.param(
            {"tools": [{"name": "t", "action": "agent"}]},
            ["/tasks/0/input/tools/0/action"],
            id="agent-as-tool",
        ),
        pytest.param(
            {"budget": {"max_model_calls": -1, "max_seconds": 0}},
            ["/tasks/0/input/budget/max_model_calls", "/tasks/0/input/budget/max_seconds"],
            id="budget-bounds",
        ),
        pytest.param(
            {"model": "openai:m", "script": [{"content": "x"}]},
            # No endpoint is configured here: openai is not one either (SPEC §11).
            ["/tasks/0/input/model", "/tasks/0/input/script"],
            id="script-not-mock",
        ),
        pytest.param(
            {"model": "openai:m\u0017\u009f"},
            ["/tasks/0/input/model"],
            id="model-control-characters",
        ),
        pytest.param(
            {"model_settings": {"temperature": 3, "top_p": 0, "seed": 1}},
            [
                "/tasks/0/input/model_settings/seed",
                "/tasks/0/input/model_settings/temperature",
                "/tasks/0/input/model_settings/top_p",
            ],
            id="model-settings",
        ),
        pytest.param(
            {"tools": [{"name": "t", "action": "x", "approval_timeout_seconds": 604801}]},
            ["/tasks/0/input/tools/0/approval_timeout_seconds"],
            id="approval-timeout",
        ),
    ],
)
def test_malformed_agent_input_is_an_invalid_definition(
    live_api: LiveApi, spec: dict[str, Any], paths: list[str]
) -> None:
    response = create(live_api, "bad-agent", agent_task(**spec))
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["code"] == "invalid_definition"
    assert sorted(e["path"] for e in body["errors"]) == sorted(paths)


def test_tools_may_name_actions_no_worker_declared(live_api: LiveApi) -> None:
    tools = [{"name": "search", "action": "search-the-web", "description": "remote"}]
    response = create(live_api, "remote-tools", agent_task(tools=tools))
    assert response.status_code == 201, response.text
    stored = response.json()["definition"]["tasks"][0]["input"]
    assert stored == {"model": "mock", "prompt": "go", "tools": tools}  # stored as written


@pytest.mark.real_http
def test_steps_and_usage_are_readable(live_api: LiveApi) -> None:
    script = [
        {"tool_calls": [{"name": "calc", "arguments": {"output": {"n": 1}}}]},
        {"content": '{"n": 1}'},
    ]
    tools = [{"name": "calc", "action": "mock"}]
    spec = {"tools": tools, "script": script, "output_schema": {"type": "object"}}
    assert create(live_api, "with-steps", agent_task(**spec)).status_code == 201
    finished = run(live_api, "with-steps")
    assert finished["status"] == "succeeded"
    run_id = finished["run_id"]
    usage = finished["usage"]
    assert (usage["model_calls"], usage["tool_calls"]) == (2, 1)
    assert usage["input_tokens"] > 0
    assert usage["output_tokens"] > 0
    task = live_api.viewer.get(f"{V1}/runs/{run_id}/tasks/agent").json()
    assert task["usage"] == usage
    assert task["output"]["structured"] == {"n": 1}
    page = live_api.viewer.get(f"{V1}/runs/{run_id}/tasks/agent/steps", params={"limit": 2})
    assert page.status_code == 200
    first = page.json()
    assert [(s["attempt"], s["sequence"], s["kind"]) for s in first["items"]] == [
        (1, 1, "model_call"),
        (1, 2, "tool_call"),
    ]
    rest = live_api.viewer.get(
        f"{V1}/runs/{run_id}/tasks/agent/steps",
        params={"limit": 2, "cursor": first["next_cursor"]},
    ).json()
    assert [s["sequence"] for s in rest["items"]] == [3]
    assert rest["next_cursor"] is None
    step = first["items"][1]
    assert (step["status"], step["tool_call_id"], step["response"]) == (
        "succeeded",
        "call_1_1",
        {"output": {"n": 1}},
    )
    missing = live_api.viewer.get(f"{V1}/runs/{run_id}/tasks/nope/steps")
    assert (missing.status_code, missing.json()["code"]) == (404, "task_not_found")
    odd = live_api.viewer.get(f"{V1}/runs/{run_id}/tasks/bad%20key/steps")
    assert odd.status_code == 404
    bad = live_api.viewer.get(f"{V1}/runs/{run_id}/tasks/agent/steps", params={"limit": 0})
    assert bad.status_code == 400


def test_a_plain_run_has_zero_usage(live_api: LiveApi) -> None:
    assert create(live_api, "plain", {"key": "a", "action": "mock"}).status_code == 201
    finished = run(live_api, "plain")
    assert finished["usage"] == {
        "model_calls": 0,
        "tool_calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
    }


@pytest.mark.parametrize(
    ("reported", "answered"),
    [
        ({"code": "Boom", "message": "bad"}, {"code": "Boom", "message": "bad", "retryable": True}),
        (
            {"code": "Boom", "message": "<b>bad</b>", "retryable": False},
            {"code": "Boom", "message": "<b>bad</b>", "retryable": False},
        ),
    ],
    ids=["retryable-by-default", "as-given"],
)
def test_a_remote_tool_calls_failure_is_answered_as_reported(
    live_api: LiveApi, reported: dict[str, Any], answered: dict[str, Any]
) -> None:
    """SPEC §10: fail's ``error`` is ``{code, message, retryable (default true)}``, and the
    answer is the attempt: a tool call's too (the model is told ``code: message``)."""
    run_id = start_agent(live_api, "tool-fails")
    item = claim_tool_call(live_api, "w-fails")
    failed = report(live_api, item, "fail", {"error": reported})
    assert failed.status_code == 200, failed.text
    assert (failed.json()["status"], failed.json()["error"]) == ("failed", answered)
    again = report(live_api, item, "fail", {"error": reported})
    assert (again.status_code, again.json()) == (200, failed.json())
    assert live_api.wait_for_run(run_id)["status"] == "succeeded"
    told = step_of(live_api, run_id)["response"]["error"]
    assert told == f"Boom: {reported['message']}"
