"""Large values on a run's page (ADR 0026; issue 33, finding D3).

Forty task outputs of about 1 MiB made a 40 MiB run page (and a 40 MiB live part, re-read after
every event). A page now shows each value's first 16 KiB and at most 256 KiB of values in all,
says where it cut, and links each whole value as JSON; and it is rendered on a worker thread,
not on the event loop. In-process; the page size case again over uvicorn and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx
import jinja2
import pytest

from tests.console.helpers import V1, create, idem, sign_in, start, steps
from tests.plugins.live_api import VIEWER_TOKEN, LiveApi
from tests.waiting import wait_until
from workload_api.console._values import PAGE_BYTES, VALUE_BYTES, Previews, bounded_json

TASKS = 40
BIG = 1_000_000
"""Characters of each output's text: with its JSON, about the 1 MiB a worker may report."""
PAGE_BOUND = 512 * 1024
"""What a run's page (or its live part) may weigh with any outputs: 256 KiB of values, the rest."""
CUT = "Truncated: this page shows at most its first 16 KiB."
HIDDEN = "Not shown: this page shows at most 256 KiB of values."


def big_workflow(workflow_id: str = "big", tasks: int = TASKS) -> dict[str, Any]:
    """``tasks`` independent remote tasks (action ``resize``), for a worker to complete."""
    return {
        "id": workflow_id,
        "tasks": [{"key": f"t{n:02d}", "action": "resize"} for n in range(tasks)],
    }


def output_of(key: str) -> dict[str, Any]:
    return {"task": key, "rows": [{"n": n, "text": "é" * 3} for n in range(3)], "blob": "x" * BIG}


def complete_all(api: LiveApi, count: int = TASKS) -> None:
    """Claim ``count`` attempts as a worker and complete each with a ~1 MiB output."""
    done = 0
    while done < count:
        body = {"queues": ["default"], "actions": ["resize"], "max_attempts": 10, "wait_seconds": 5}
        answer = api.worker.post(f"{V1}/workers/big-1/claim", json=body, timeout=30)
        assert answer.status_code == 200, answer.text
        for item in answer.json()["attempts"]:
            report = {"lease_token": item["lease_token"], "output": output_of(item["task_key"])}
            sent = api.worker.post(f"{V1}/attempts/{item['attempt_id']}/complete", json=report)
            assert sent.status_code == 200, sent.text[:300]
            done += 1


def big_run(api: LiveApi) -> str:
    create(api, big_workflow())
    run_id = start(api, "big")
    complete_all(api)
    assert api.wait_for_run(run_id)["status"] == "succeeded"
    return run_id


@pytest.fixture
def viewer_browser(live_api: LiveApi) -> httpx.Client:
    return sign_in(live_api, VIEWER_TOKEN)


@pytest.mark.real_http
def test_a_run_page_with_forty_large_outputs_is_bounded_and_links_them_whole(
    live_api: LiveApi, viewer_browser: httpx.Client
) -> None:
    run_id = big_run(live_api)
    page = viewer_browser.get(f"/ui/runs/{run_id}")
    assert page.status_code == 200
    assert len(page.content) < PAGE_BOUND, f"a run page of {len(page.content)} bytes"
    live = viewer_browser.get(f"/ui/runs/{run_id}/live")
    assert len(live.content) < PAGE_BOUND, f"a live part of {len(live.content)} bytes"

    html = page.text
    links = re.findall(rf'href="(/ui/runs/{run_id}/tasks/(t\d\d)/raw/output)"', html)
    assert [key for _, key in links] == [f"t{n:02d}" for n in range(TASKS)], "each links its own"
    shown = PAGE_BYTES // VALUE_BYTES
    assert html.count(CUT) >= shown - 1, "the first outputs are shown cut, and say so"
    assert html.count(HIDDEN) >= TASKS - shown - 1, "past the page's bound, not shown"
    # Each task's output, and the run's (its 40 sink tasks' outputs: first, and cut too).
    assert html.count(CUT) + html.count(HIDDEN) == TASKS + 1
    assert f'href="/ui/runs/{run_id}/raw/output"' in html
    assert "&#34;blob&#34;: &#34;xxxx" in html, "the start of a value, escaped"
    for link, key in (links[0], links[-1]):
        whole = viewer_browser.get(link)
        assert whole.status_code == 200
        assert whole.headers["content-type"] == "application/json"
        assert whole.headers["x-content-type-options"] == "nosniff"
        assert whole.json() == output_of(key), "the link gives the whole value"


def test_every_value_a_run_page_links_is_served_whole(
    live_api: LiveApi, viewer_browser: httpx.Client
) -> None:
    create(live_api, {"id": "one", "tasks": [{"key": "r", "action": "resize"}]})
    answer = live_api.operator.post(
        f"{V1}/workflows/one/versions/1/runs",
        json={"input": {"payload": "y" * 40_000}},
        headers=idem(),
    )
    run_id = answer.json()["run_id"]
    base = f"/ui/runs/{run_id}"
    run_input = viewer_browser.get(f"{base}/raw/input")
    assert run_input.json() == {"payload": "y" * 40_000}
    assert f'href="{base}/raw/input"' in viewer_browser.get(base).text, "cut: linked"
    assert viewer_browser.get(f"{base}/tasks/r/raw/output").json() is None, "no output yet"

    body = {"queues": ["default"], "actions": ["resize"], "wait_seconds": 5}
    (item,) = wait_until(
        lambda: live_api.worker.post(f"{V1}/workers/w/claim", json=body).json()["attempts"],
        message="nothing to claim",
    )
    error = {"code": "too_big", "message": "m" * 4096, "retryable": False}
    failed = live_api.worker.post(
        f"{V1}/attempts/{item['attempt_id']}/fail",
        json={"lease_token": item["lease_token"], "error": error},
    )
    assert failed.status_code == 200, failed.text
    assert live_api.wait_for_run(run_id)["status"] == "failed"
    assert viewer_browser.get(f"{base}/tasks/r/raw/error").json()["code"] == "too_big"
    attempt_error = viewer_browser.get(f"{base}/tasks/r/attempts/1/raw/error").json()
    assert attempt_error["message"] == error["message"]


def test_an_agent_step_links_its_whole_request_and_response(
    live_api: LiveApi, viewer_browser: httpx.Client
) -> None:
    tool = {"name": "lookup", "action": "mock", "parameters": {"type": "object"}}
    spec = {
        "model": "mock",
        "prompt": "look it up",
        "tools": [tool],
        "script": [
            {"tool_calls": [{"name": "lookup", "arguments": {"output": {"z": "z" * 20_000}}}]},
            {"content": "done"},
        ],
    }
    create(
        live_api, {"id": "agentic", "tasks": [{"key": "agent", "action": "agent", "input": spec}]}
    )
    run_id = start(live_api, "agentic")
    assert live_api.wait_for_run(run_id)["status"] == "succeeded"
    for step in steps(live_api, run_id):
        link = f"/ui/runs/{run_id}/tasks/agent/steps/{step['attempt']}/{step['sequence']}/raw/"
        assert viewer_browser.get(link + "request").json() == step["request"]
        assert viewer_browser.get(link + "response").json() == step["response"]
    page = viewer_browser.get(f"/ui/runs/{run_id}").text
    assert "/ui/runs/" + run_id + "/tasks/agent/steps/1/2/raw/request" in page, "cut: linked"


@pytest.mark.parametrize(
    "path",
    [
        "/raw/outputs",
        "/raw/INPUT",
        "/raw/input%00",
        "/raw/" + "i" * 5000,
        "/tasks/nope/raw/output",
        "/tasks/" + "k" * 300 + "/raw/output",
        "/tasks/r/raw/input",
        "/tasks/r/raw/..%2foutput",
        "/tasks/r/attempts/0/raw/error",
        "/tasks/r/attempts/-1/raw/error",
        "/tasks/r/attempts/01/raw/error",
        "/tasks/r/attempts/1e3/raw/error",
        "/tasks/r/attempts/99999999999999999999/raw/error",
        "/tasks/r/attempts/2/raw/error",
        "/tasks/r/attempts/1/raw/output",
        "/tasks/r/steps/1/1/raw/request",
        "/tasks/r/steps/1/x/raw/request",
        "/tasks/r/steps/1/1/raw/error",
    ],
)
def test_a_raw_path_naming_no_value_is_not_found(
    live_api: LiveApi, viewer_browser: httpx.Client, path: str
) -> None:
    create(live_api, {"id": "one", "tasks": [{"key": "r", "action": "mock"}]})
    run_id = start(live_api, "one")
    live_api.wait_for_run(run_id)
    answer = viewer_browser.get(f"/ui/runs/{run_id}{path}")
    assert answer.status_code == 404, (path, answer.status_code)


@pytest.mark.parametrize(
    "run_id", ["nope", "r" * 500, "%00", "00000000-0000-0000-0000-000000000000"]
)
def test_a_raw_path_of_no_run_is_not_found(viewer_browser: httpx.Client, run_id: str) -> None:
    for path in ("/raw/input", "/tasks/a/raw/output", "/tasks/a/steps/1/1/raw/request"):
        assert viewer_browser.get(f"/ui/runs/{run_id}{path}").status_code == 404


def test_raw_values_need_a_session(live_api: LiveApi) -> None:
    create(live_api, {"id": "one", "tasks": [{"key": "r", "action": "mock"}]})
    run_id = start(live_api, "one")
    anonymous = live_api.client(None)
    answer = anonymous.get(f"/ui/runs/{run_id}/raw/input")
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/ui/login?next=")
    bearer = live_api.client(VIEWER_TOKEN).get(f"/ui/runs/{run_id}/raw/input")
    assert bearer.status_code == 303, "the console's routes take its session, not a token"


def test_pages_are_rendered_off_the_event_loop(
    live_api: LiveApi, viewer_browser: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(live_api, {"id": "one", "tasks": [{"key": "r", "action": "mock"}]})
    run_id = start(live_api, "one")
    on_loop: list[bool] = []
    render = jinja2.Template.render

    def recorded(self: jinja2.Template, *args: Any, **kwargs: Any) -> str:
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:
            on_loop.append(False)
        return render(self, *args, **kwargs)

    monkeypatch.setattr(jinja2.Template, "render", recorded)
    pages = ("", "/live", "/raw/nothing")  # a run's page, its live part, an error page
    for path in [*(f"/ui/runs/{run_id}{p}" for p in pages), "/ui/runs"]:
        viewer_browser.get(path)
    assert len(on_loop) == 4
    assert not any(on_loop), "a page was rendered on the event loop"


# -- previews ----------------------------------------------------------------------------------


VALUES: list[Any] = [
    None,
    {},
    [],
    {"b": [1, 2.5, True, None], "a": {"é": "ü\u202e", "x": []}},
    ["é" * 10, {"k": "v"}],
    "plain",
]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("exact", [False, True])
def test_a_value_within_the_bound_is_its_whole_json(value: Any, exact: bool) -> None:
    text, cut = bounded_json(value, VALUE_BYTES, ascii_only=exact)
    assert (text, cut) == (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=exact), False)


@pytest.mark.parametrize("limit", [0, 1, 2, 3, 7, 100, 1000])
def test_a_value_past_the_bound_is_its_start(limit: int) -> None:
    value = {"rows": [{"n": n, "text": "é€𝄞" * 5} for n in range(50)]}
    whole = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    text, cut = bounded_json(value, limit)
    assert cut
    assert len(text.encode()) <= limit
    assert whole.startswith(text)
    assert len(text.encode()) > limit - 4, "cut at most a character short of the bound"


def test_the_page_bound_hides_the_values_past_it() -> None:
    values = Previews(value_bytes=100, page_bytes=250)
    # Digits and commas: nothing to escape, so the HTML is as long as the JSON.
    first, second, third, fourth = (values.json(list(range(500))) for _ in range(4))
    assert [(p.cut, p.hidden, len(p.html)) for p in (first, second, third, fourth)] == [
        (True, False, 100),
        (True, False, 100),
        (True, False, 50),
        (True, True, 0),
    ]
    assert values.text("short").hidden


def test_a_preview_is_escaped_and_counted_escaped() -> None:
    values = Previews(value_bytes=1000, page_bytes=1000)
    shown = values.text('<script>"&"</script>')
    assert str(shown.html) == "&lt;script&gt;&#34;&amp;&#34;&lt;/script&gt;"
    assert not shown.cut
    long = values.text("<" * 1000)
    assert long.cut
    assert str(long.html).startswith("&lt;")
    assert values.text("x").hidden, "the escaped size counts against the page"
