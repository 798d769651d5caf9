"""The console's pages of issue 30 in a real browser (SPEC §13, amended 2026-12-01): the runs
page newest first with its time filter, a run started from its workflow's own page with an
input, the run's output on its page, and the cluster page beside the API's JSON.

The service runs over real HTTP and PostgreSQL (``real_http_only``); each test signs in through
the form. Select these tests with ``-m browser``. The filter's hostile values and the viewer's
refused writes are checked over HTTP in ``test_runs_window_pages.py``.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from playwright.sync_api import Page, expect

from tests.console.browsing import shoot, sign_in, tab_to
from tests.console.conftest import OpenPage
from tests.console.helpers import QUICK, V1, create, idem, start
from tests.plugins.live_api import OPERATOR_TOKEN, VIEWER_TOKEN, LiveApi

pytestmark = [pytest.mark.browser, pytest.mark.real_http_only]

REPORT: list[dict[str, Any]] = [
    {"id": "report", "description": "one step", "tasks": [{"key": "fetch", "action": "mock"}]},
    {
        "id": "report",
        "description": "fetch, then summarize",
        "tasks": [
            {"key": "fetch", "action": "mock", "input": {"output": {"rows": 3}}},
            {
                "key": "summarize",
                "action": "mock",
                "depends_on": ["fetch"],
                "input": {"output": {"summary": "three rows"}},
            },
        ],
    },
]


def rows(page: Page) -> list[str]:
    found: list[str] = page.locator("#run-rows tr[data-run]").evaluate_all(
        "rows => rows.map(r => r.dataset.run)"
    )
    return found


def created_at(api: LiveApi, run_id: str) -> datetime:
    text = api.viewer.get(f"{V1}/runs/{run_id}").json()["created_at"]
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_the_runs_page_lists_the_newest_first_and_its_time_filter_narrows_it(
    live_api: LiveApi, browser: OpenPage, shots: Path, database_url: str
) -> None:
    create(live_api, QUICK)
    old, middle, newest = (start(live_api, "quick") for _ in range(3))
    with psycopg.connect(database_url) as conn:  # the oldest run was created two hours ago
        conn.execute(
            "UPDATE workflow_runs SET created_at = created_at - interval '2 hours' "
            "WHERE run_id = %s",
            [old],
        )
    listed = [r["run_id"] for r in live_api.viewer.get(f"{V1}/runs").json()["items"]]
    assert listed == [newest, middle, old]

    page = browser("viewer")
    sign_in(page, live_api, VIEWER_TOKEN)
    expect(page.locator("#run-rows tr[data-run]")).to_have_count(3)
    assert rows(page) == listed, "newest first, as the API lists them"
    expect(page.locator("#run-rows tr[data-run]").first).to_have_attribute("data-run", newest)

    # The last hour, chosen with the keyboard and submitted with Enter on the Filter button.
    page.get_by_label("Created within").focus()
    page.keyboard.press("ArrowDown")
    expect(page.get_by_label("Created within")).to_have_value("1h")
    page.get_by_role("button", name="Filter").focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"since=1h"))
    expect(page.locator("#run-rows tr[data-run]")).to_have_count(2)
    assert rows(page) == [newest, middle]
    expect(page.locator("#runs-table caption")).to_contain_text("created within the last hour")
    shoot(page, shots, "runs-last-hour")

    # To: a minute after the old run (the field reads UTC): only the old one.
    page.get_by_label("Created within").select_option(label="any time")
    until = (created_at(live_api, old) + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M")
    page.get_by_label("To (UTC)").fill(until)
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"created_before="))
    expect(page.locator("#run-rows tr[data-run]")).to_have_count(1)
    assert rows(page) == [old]
    expect(page.get_by_label("To (UTC)")).to_have_value(until)  # shown again, as given
    shoot(page, shots, "runs-until")

    # A run started now is outside that window: what the live refresh reads keeps to it.
    later = start(live_api, "quick")
    live_api.wait_for_run(later)
    refresh = page.locator("#runs-live").get_attribute("data-url")
    assert refresh is not None
    assert "created_before=" in refresh
    fragment = page.request.get(live_api.base_url + refresh)
    assert fragment.status == 200
    assert re.findall(r'<tr data-run="([^"]+)">', fragment.text()) == [old]
    assert rows(page) == [old]

    # The last 24 hours: every run (the old one too), the newest first.
    page.get_by_label("To (UTC)").fill("")
    page.get_by_label("Created within").select_option(label="the last 24 hours")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#run-rows tr[data-run]")).to_have_count(4)
    assert rows(page) == [later, newest, middle, old]

    # A time the page cannot read: a clear error, not a crash.
    page.goto(f"{live_api.base_url}/ui/runs?created_after=yesterday")
    expect(page.get_by_role("alert")).to_contain_text("From is not a time")
    expect(page.locator("main h1")).to_have_text("400")
    shoot(page, shots, "runs-bad-time")


def test_a_run_is_started_from_its_workflows_page_and_shows_its_output(
    live_api: LiveApi, browser: OpenPage, shots: Path
) -> None:
    for definition in REPORT:
        answer = live_api.operator.put(f"{V1}/workflows/report", json=definition, headers=idem())
        assert answer.status_code in (200, 201), answer.text
    page = browser("operator")
    sign_in(page, live_api, OPERATOR_TOKEN)
    tab_to(page, "Workflows")
    page.keyboard.press("Enter")
    page.get_by_role("link", name="report", exact=True).click()
    expect(page.get_by_role("heading", name="Workflow report")).to_be_visible()
    # The latest version: its DAG and definition, its form; every version one click away.
    expect(page.locator("#latest-version")).to_contain_text("version 2")
    expect(page.locator("svg.dag g.node")).to_have_count(2)
    expect(page.locator("#definition pre")).to_contain_text('"summarize"')
    expect(page.locator("#versions").get_by_role("link", name="version 1")).to_be_visible()
    shoot(page, shots, "workflow")

    field = page.get_by_label("Run input (a JSON object)")
    field.fill('{"who": "the workflow page"}')
    field.focus()
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Start run")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/ui/runs/[0-9a-f-]{36}$"))
    run_id = page.url.rsplit("/", 1)[1]
    expect(page.locator("#run-status")).to_have_text("succeeded", timeout=30_000)
    run = live_api.viewer.get(f"{V1}/runs/{run_id}").json()
    assert (run["version"], run["input"]) == (2, {"who": "the workflow page"})

    # The run's output, as the API holds it.
    output = page.locator("#run-output")
    expect(output).to_be_visible()
    expect(output.locator("summary")).to_have_text("Run output")
    shown = json.loads(output.locator("pre").inner_text())
    assert shown == run["output"] == {"summarize": {"summary": "three rows"}}
    shoot(page, shots, "run-output")

    # An input the run cannot take is shown back on the workflow's page, with the form.
    page.goto(f"{live_api.base_url}/ui/workflows/report")
    page.get_by_label("Run input (a JSON object)").fill("[1, 2]")
    page.get_by_role("button", name="Start run").click()
    expect(page.get_by_role("alert")).to_contain_text("The input is not used")
    expect(page.get_by_role("heading", name="Workflow report")).to_be_visible()
    expect(page.get_by_label("Run input (a JSON object)")).to_have_value("[1, 2]")
    assert len(live_api.viewer.get(f"{V1}/runs").json()["items"]) == 1


def test_the_cluster_page_shows_what_the_api_says(
    live_api: LiveApi, browser: OpenPage, shots: Path
) -> None:
    page = browser("viewer")
    sign_in(page, live_api, VIEWER_TOKEN)
    tab_to(page, "Cluster")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{live_api.base_url}/ui/cluster")
    expect(page.get_by_role("heading", name="Cluster", exact=True)).to_be_visible()
    cluster = live_api.viewer.get(f"{V1}/cluster").json()
    status = live_api.viewer.get(f"{V1}/status").json()
    shown = page.locator("#replicas tbody tr[data-replica]").evaluate_all(
        "rows => rows.map(r => [r.dataset.replica, r.dataset.shards,"
        " r.cells[1].textContent.trim()])"
    )
    assert shown == [
        [m["replica_id"], ",".join(map(str, m["shards"])), str(len(m["shards"]))]
        for m in cluster["replicas"]
    ]
    assert len(shown) == 1, "one coordinator leads alone"
    expect(page.locator("#shards-total")).to_contain_text(f"{cluster['shards_total']} shards")
    expect(page.locator("#replicas tbody tr").first).to_contain_text(
        f"0–{cluster['shards_total'] - 1}"
    )
    expect(page.locator("#this-process [data-field=role]")).to_have_text(status["role"])
    expect(page.locator("#this-process [data-field=epoch]")).to_have_text(str(status["epoch"]))
    assert status["role"] == "leader"
    shoot(page, shots, "cluster")
