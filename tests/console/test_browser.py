"""The web console in a real browser (SPEC §13): Playwright driving Debian's chromium, headless.

The service runs over real HTTP and PostgreSQL (``real_http_only``); each test signs in through
the form, as a person would, and saves a screenshot of every page it visits under its
``tmp_path/shots``. Select these tests with ``-m browser``.

Approving an approval and a draft, and what viewers see of them, are in
``test_browser_decisions.py``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.console.browsing import shoot, sign_in, tab_to
from tests.console.conftest import OpenPage
from tests.console.helpers import SLEEPY, V1, create, start
from tests.plugins.live_api import OPERATOR_TOKEN, VIEWER_TOKEN, WORKER_TOKEN, LiveApi

pytestmark = [pytest.mark.browser, pytest.mark.real_http_only]

PIPELINE: dict[str, Any] = {
    "id": "pipeline",
    "description": "fetch, a flaky step that succeeds on its second attempt, report",
    "tasks": [
        # Running long enough to be seen running after the page loads on a slow machine.
        {"key": "fetch", "action": "mock", "input": {"sleep_ms": 6000}},
        {
            "key": "flaky",
            "action": "mock",
            "depends_on": ["fetch"],
            "input": {"fail_first": 1, "sleep_ms": 200},
            "retry": {"max_attempts": 2, "initial_backoff_seconds": 0.5},
        },
        {"key": "side", "action": "mock", "depends_on": ["fetch"], "input": {"sleep_ms": 300}},
        {"key": "report", "action": "mock", "depends_on": ["flaky", "side"]},
    ],
}


def test_an_operator_starts_a_run_and_follows_it_live(
    live_api: LiveApi, browser: OpenPage, shots: Path
) -> None:
    create(live_api, PIPELINE)
    page = browser("operator")
    sign_in(page, live_api, OPERATOR_TOKEN, shots=shots)
    shoot(page, shots, "runs-empty")

    # To the version's page with the keyboard: the main navigation, then the links.
    tab_to(page, "Workflows")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{live_api.base_url}/ui/workflows")
    shoot(page, shots, "workflows")
    page.get_by_role("link", name="version 1").click()
    expect(page.get_by_role("heading", name="pipeline version 1")).to_be_visible()
    expect(page.locator("svg.dag g.node")).to_have_count(4)
    shoot(page, shots, "version")

    # The start-run form, by keyboard too: the input, then the button.
    page.get_by_label("Run input (a JSON object)").fill('{"doc": "report.txt"}')
    page.get_by_label("Run input (a JSON object)").focus()
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Start run")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/ui/runs/[0-9a-f-]{36}$"))
    run_id = page.url.rsplit("/", 1)[1]
    page.evaluate("window.__notReloaded = true")

    # Live: the status goes through running to succeeded with no reload.
    status = page.locator("#run-status")
    expect(status).to_have_text(re.compile("pending|running"))
    expect(page.locator("#tasks tr[data-task=fetch]")).to_have_attribute("data-status", "running")
    shoot(page, shots, "run-running")
    expect(status).to_have_text("succeeded", timeout=30_000)
    assert page.evaluate("window.__notReloaded") is True, "the page was reloaded"
    for key in ("fetch", "flaky", "side", "report"):
        node = page.locator(f"svg.dag g.node[data-task={key}]")
        expect(node).to_have_attribute("data-status", "succeeded")
        expect(node).to_have_class(re.compile(r"\bs-succeeded\b"))
    # The retried task's timeline: attempt 1 failed, attempt 2 succeeded.
    expect(page.locator('#attempts tr[data-attempt="flaky#1"]')).to_have_attribute(
        "data-status", "failed"
    )
    expect(page.locator('#attempts tr[data-attempt="flaky#2"]')).to_have_attribute(
        "data-status", "succeeded"
    )
    expect(page.locator('svg.timeline rect[data-attempt="flaky#1"]')).to_have_class(
        re.compile(r"\bs-failed\b")
    )
    expect(page.locator('#attempts tr[data-attempt="flaky#1"]')).to_contain_text("mock_failure")
    # The event log grew live, each event once, up to the run's end.
    log = page.locator("#event-log tbody tr")
    expect(log.last).to_contain_text("run.succeeded")
    sequences = [int(s) for s in log.evaluate_all("rows => rows.map(r => r.dataset.sequence)")]
    listed = live_api.viewer.get(f"{V1}/runs/{run_id}/events", params={"limit": 200}).json()
    assert sequences == [e["sequence"] for e in listed["items"]]
    # The input and output viewers.
    page.get_by_text("Run input").click()
    expect(page.locator("#run-input pre")).to_contain_text('"doc": "report.txt"')
    page.locator("summary", has_text="Output of fetch").click()
    expect(page.locator("#tasks tr[data-task=fetch] pre")).to_be_visible()
    expect(page.locator("#cancel-form")).to_be_hidden()
    shoot(page, shots, "run-succeeded")

    page.get_by_role("link", name="Whole history").click()
    expect(page.locator("#event-history tbody tr")).to_have_count(len(sequences))
    shoot(page, shots, "run-events")
    page.get_by_role("link", name="Runs", exact=True).click()
    expect(page.locator(f"#run-rows tr[data-run='{run_id}']")).to_contain_text("succeeded")
    shoot(page, shots, "runs")
    page.get_by_label("Status").select_option("failed")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"status=failed"))
    expect(page.locator("#run-rows")).to_contain_text("No runs.")
    page.get_by_role("link", name="Workers and queues").click()
    expect(page.get_by_role("heading", name="Workers and queues")).to_be_visible()
    shoot(page, shots, "workers")


def test_an_operator_cancels_a_running_run(
    live_api: LiveApi, browser: OpenPage, shots: Path
) -> None:
    create(live_api, SLEEPY)
    run_id = start(live_api, "sleepy")
    page = browser("operator")
    sign_in(page, live_api, OPERATOR_TOKEN)
    page.goto(f"{live_api.base_url}/ui/runs/{run_id}")
    expect(page.locator("#run-status")).to_have_text("running")
    shoot(page, shots, "run-to-cancel")
    page.get_by_role("button", name="Cancel run").click()
    expect(page).to_have_url(f"{live_api.base_url}/ui/runs/{run_id}")
    expect(page.locator("#run-status")).to_have_text("canceled")
    expect(page.locator("#tasks tr[data-task=nap]")).to_have_attribute("data-status", "canceled")
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)
    assert live_api.viewer.get(f"{V1}/runs/{run_id}").json()["status"] == "canceled"
    shoot(page, shots, "run-canceled")

    # The runs list keeps its counts live: another run starts running, then is canceled.
    other = start(live_api, "sleepy")
    page.get_by_role("link", name="Runs", exact=True).click()
    running = page.locator("#active-counts [data-status=running]")
    expect(running).to_have_text("1 running")
    page.evaluate("window.__notReloaded = true")
    canceled = live_api.operator.post(
        f"{V1}/runs/{other}/cancel", headers={"Idempotency-Key": f"cancel-{other}"}
    )
    assert canceled.status_code == 202, canceled.text
    expect(running).to_have_text("0 running")
    expect(page.locator(f"#run-rows tr[data-run='{other}']")).to_contain_text("canceled")
    assert page.evaluate("window.__notReloaded") is True
    shoot(page, shots, "runs-after-cancel")


def test_a_viewer_sees_no_write_controls_and_a_forged_post_is_refused(
    live_api: LiveApi, browser: OpenPage, shots: Path
) -> None:
    create(live_api, SLEEPY)
    run_id = start(live_api, "sleepy")
    page = browser("viewer")
    sign_in(page, live_api, VIEWER_TOKEN)
    expect(page.locator("#role")).to_have_text("viewer")
    for name, path in (
        ("viewer-runs", "/ui/runs"),
        ("viewer-run", f"/ui/runs/{run_id}"),
        ("viewer-version", "/ui/workflows/sleepy/versions/1"),
        ("viewer-workflow", "/ui/workflows/sleepy"),
        ("viewer-cluster", "/ui/cluster"),
        ("viewer-workflows", "/ui/workflows"),
        ("viewer-workers", "/ui/workers"),
    ):
        page.goto(live_api.base_url + path)
        expect(page.locator("main h1")).to_be_visible()
        writes = page.locator("form[method=post]:not([action='/ui/logout'])")
        expect(writes).to_have_count(0)
        expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)
        expect(page.get_by_role("button", name="Start run")).to_have_count(0)
        shoot(page, shots, name)
    # A forged POST from the viewer's own browser, with a valid CSRF token of the session
    # (taken from the sign-out form) and without one: both refused, nothing written.
    csrf = page.locator("form[action='/ui/logout'] input[name=csrf]").get_attribute("value")
    assert csrf
    cancel = f"{live_api.base_url}/ui/runs/{run_id}/cancel"
    assert page.request.post(cancel, form={"csrf": csrf}).status == 403
    assert page.request.post(cancel, form={}).status == 403
    started = page.request.post(
        f"{live_api.base_url}/ui/workflows/sleepy/versions/1/runs", form={"csrf": csrf}
    )
    assert started.status == 403
    run = live_api.viewer.get(f"{V1}/runs/{run_id}").json()
    assert (run["status"], run["cancel_requested"]) == ("running", False)
    assert len(live_api.viewer.get(f"{V1}/runs").json()["items"]) == 1
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(f"{live_api.base_url}/ui/login")
    page.goto(f"{live_api.base_url}/ui/runs")
    expect(page).to_have_url(re.compile(r"/ui/login"))


def test_a_worker_token_cannot_sign_in_and_pages_work_with_the_keyboard(
    live_api: LiveApi, browser: OpenPage, shots: Path
) -> None:
    page = browser("worker")
    page.goto(f"{live_api.base_url}/ui/login")
    page.get_by_label("Token").fill(WORKER_TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("Worker tokens cannot sign in")
    assert WORKER_TOKEN not in page.content()
    shoot(page, shots, "sign-in-refused")

    sign_in(page, live_api, VIEWER_TOKEN)
    # The first Tab reaches "Skip to content", which moves the focus to the page's content.
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#main")).to_be_focused()
    # The filter form with the keyboard: choose a status, submit with Enter.
    page.get_by_label("Status").focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Tab")
    page.keyboard.type("pipeline")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"workflow_id=pipeline"))
    shoot(page, shots, "runs-filtered")
