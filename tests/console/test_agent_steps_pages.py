"""Agent tasks on a run's page (SPEC §11, §13): usage, the steps table, a pending approval.

In-process by default; the case marked ``real_http`` runs again over uvicorn and PostgreSQL.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.console.helpers import (
    QUICK,
    V1,
    assert_safe_page,
    create,
    deployer,
    pending_approval,
    sign_in,
    start,
    steps,
)
from tests.plugins.live_api import VIEWER_TOKEN, LiveApi


@pytest.fixture
def viewer_browser(live_api: LiveApi) -> httpx.Client:
    return sign_in(live_api, VIEWER_TOKEN)


def rows(page: str, task_key: str = "agent") -> list[tuple[str, str, str]]:
    """The steps table of a task: (attempt#sequence, kind, status) per row."""
    table = page.split(f'id="steps-{task_key}"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<tr data-step="([^"]+)" data-kind="([^"]+)" data-status="([^"]+)">', table)


@pytest.mark.real_http
def test_a_waiting_agent_links_its_approval_then_shows_its_steps_and_usage(
    live_api: LiveApi, viewer_browser: httpx.Client
) -> None:
    create(live_api, deployer())
    run_id = start(live_api, "deployer")
    approval = pending_approval(live_api, run_id)
    link = f'href="/ui/approvals/{approval["approval_id"]}"'

    page = assert_safe_page(viewer_browser.get(f"/ui/runs/{run_id}"))
    assert (
        'id="run-status" class="badge s-waiting_approval" role="status">waiting_approval<' in page
    )
    assert '<g class="node s-waiting_approval" data-task="agent"' in page
    assert 'data-task="agent" data-status="waiting_approval" id="task-agent"' in page
    assert f'<a {link} class="pending-approval">pending approval of deploy</a>' in page
    assert f"Task agent waits for a person: <a {link}>approval of deploy for agent</a>" in page
    assert rows(page) == [("1#1", "model_call", "succeeded")]
    assert "Agents used 1 model call · 0 tool calls" in page

    answer = live_api.operator.post(
        f"{V1}/approvals/{approval['approval_id']}/decision",
        json={"decision": "approve", "arguments_digest": approval["arguments_digest"]},
        headers={"Idempotency-Key": "steps-1"},
    )
    assert answer.status_code == 200, answer.text
    run = live_api.wait_for_run(run_id)
    page = assert_safe_page(viewer_browser.get(f"/ui/runs/{run_id}"))
    assert link not in page, "nothing waits any more"
    assert rows(page) == [
        ("1#1", "model_call", "succeeded"),
        ("1#2", "tool_call", "succeeded"),
        ("1#3", "model_call", "succeeded"),
    ]
    usage = run["usage"]
    assert (usage["model_calls"], usage["tool_calls"]) == (2, 1)
    total = (
        f"Agents used 2 model calls · 1 tool call · {usage['input_tokens']} input tokens"
        f" · {usage['output_tokens']} output tokens."
    )
    assert total in page
    journal = steps(live_api, run_id)
    first = journal[0]["usage"]
    assert f"<td>{first['input_tokens']} / {first['output_tokens']}</td>" in page
    assert '<td class="mono">deploy (mock)</td>' in page
    assert '<td class="mono">mock</td>' in page
    assert "<summary>Step 2 of attempt 1</summary>" in page
    assert "&#34;env&#34;: &#34;prod&#34;" in page, "the tool call's request and response"
    live = viewer_browser.get(f"/ui/runs/{run_id}/live").text
    assert rows(live) == rows(page), "the live part is the same"


def test_a_long_agent_shows_its_first_steps_and_pages_the_rest(
    live_api: LiveApi, viewer_browser: httpx.Client
) -> None:
    tool = {"name": "lookup", "action": "mock", "parameters": {"type": "object"}}
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "lookup", "arguments": {"output": {"n": n}}}]} for n in range(55)
    ]
    budget = {"max_model_calls": 100, "max_tool_calls": 100}
    spec = {
        "model": "mock",
        "prompt": "look things up",
        "tools": [tool],
        "budget": budget,
        "script": [*turns, {"content": "done"}],
    }
    create(live_api, {"id": "long", "tasks": [{"key": "agent", "action": "agent", "input": spec}]})
    run_id = start(live_api, "long")
    assert live_api.wait_for_run(run_id)["status"] == "succeeded"
    assert len(steps(live_api, run_id)) == 111

    page = viewer_browser.get(f"/ui/runs/{run_id}").text
    shown = rows(page)
    assert len(shown) == 100
    assert shown[0] == ("1#1", "model_call", "succeeded")
    every = f'<a href="/ui/runs/{run_id}/tasks/agent/steps">Every step of agent</a>'
    assert every in page
    first = assert_safe_page(viewer_browser.get(f"/ui/runs/{run_id}/tasks/agent/steps"))
    assert rows(first) == shown
    assert "used 56 model calls · 55 tool calls" in first
    following = re.search(r'href="([^"]+)" rel="next"', first)
    assert following is not None
    assert "First page" not in first
    second = viewer_browser.get(following[1].replace("&amp;", "&")).text
    assert [r[0] for r in rows(second)] == [f"1#{n}" for n in range(101, 112)]
    assert re.search(r'rel="next"', second) is None
    assert f'<a href="/ui/runs/{run_id}/tasks/agent/steps">First page</a>' in second


def test_a_run_without_agents_shows_no_agent_steps(
    live_api: LiveApi, viewer_browser: httpx.Client
) -> None:
    create(live_api, QUICK)
    run_id = start(live_api, "quick")
    live_api.wait_for_run(run_id)
    page = viewer_browser.get(f"/ui/runs/{run_id}").text
    assert "Agent steps" not in page
    assert "Agents used" not in page
    steps_page = viewer_browser.get(f"/ui/runs/{run_id}/tasks/a/steps").text
    assert "No step yet." in steps_page
