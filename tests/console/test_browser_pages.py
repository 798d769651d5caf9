"""The console's pages in a real browser (SPEC §13), beyond the journeys of ``test_browser.py``:
what a browser review found wrong, each checked where a person meets it.

The service runs over real HTTP and PostgreSQL (``real_http_only``); each test signs in through
the form. Select these tests with ``-m browser``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import ConsoleMessage, Error, Page, expect

from tests.console.browsing import shoot, sign_in
from tests.console.conftest import OpenPage
from tests.console.helpers import SLEEPY, V1, create, idem, start
from tests.e2e.test_workers import claim_one, complete
from tests.plugins.live_api import OPERATOR_TOKEN, LiveApi
from tests.waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.real_http_only]

HOSTILE = "<b>not bold</b> "
LONG_MESSAGE = HOSTILE + "M" * 3000
REMOTE: dict[str, Any] = {
    "id": "remote",
    "description": "D" * 3000,
    "tasks": [
        {
            "key": "call",
            "action": "resize",
            "retry": {"max_attempts": 2, "initial_backoff_seconds": 0.1},
        }
    ],
}
"""A task no in-process executor runs: the test claims its attempts as a remote worker."""
TWO_STEPS: dict[str, Any] = {
    "id": "two-steps",
    "tasks": [
        {"key": "first", "action": "mock", "input": {"output": {"n": 1}}},
        {
            "key": "second",
            "action": "mock",
            "depends_on": ["first"],
            "input": {"sleep_ms": 600_000},
        },
    ],
}


def cancel(api: LiveApi, run_id: str) -> None:
    answer = api.operator.post(f"{V1}/runs/{run_id}/cancel", headers=idem())
    assert answer.status_code == 202, answer.text


def operator_on_run(live_api: LiveApi, browser: OpenPage, run_id: str) -> Page:
    """A signed-in operator's page on the run."""
    page = browser("operator")
    sign_in(page, live_api, OPERATOR_TOKEN)
    page.goto(f"{live_api.base_url}/ui/runs/{run_id}")
    return page


def mark_focus(page: Page) -> None:
    """Remember the focused element, to see when a refresh has replaced it."""
    page.evaluate("window.__focused = document.activeElement")


def wait_for_refresh(page: Page) -> None:
    """Wait until a live refresh has replaced the element that was focused."""
    page.wait_for_function("() => !document.body.contains(window.__focused)")


def claim(api: LiveApi) -> dict[str, Any]:
    body = {"queues": ["default"], "actions": ["resize"], "wait_seconds": 5}

    def claimed() -> list[dict[str, Any]]:
        answer = api.worker.post(f"{V1}/workers/remote-1/claim", json=body, timeout=30)
        assert answer.status_code == 200, answer.text
        items: list[dict[str, Any]] = answer.json()["attempts"]
        return items

    (item,) = wait_until(claimed, message="nothing to claim")
    return item


def test_the_runs_list_follows_runs_started_after_it_opened(
    live_api: LiveApi, browser: OpenPage, shots: Path
) -> None:
    create(live_api, SLEEPY)
    page = browser("operator")
    sign_in(page, live_api, OPERATOR_TOKEN)
    running = page.locator("#active-counts [data-status=running]")
    expect(running).to_have_text("0 running")
    expect(page.locator("#run-rows")).to_contain_text("No runs.")
    page.evaluate("window.__notReloaded = true")

    # Nothing was unfinished when the page opened: a run started now still shows up.
    run_id = start(live_api, "sleepy")
    expect(running).to_have_text("1 running")
    row = page.locator(f"#run-rows tr[data-run='{run_id}']")
    expect(row).to_contain_text("running")
    shoot(page, shots, "runs-live")
    cancel(live_api, run_id)
    expect(row).to_contain_text("canceled")
    expect(running).to_have_text("0 running")
    # And again, now that nothing is unfinished once more.
    other = start(live_api, "sleepy")
    expect(page.locator(f"#run-rows tr[data-run='{other}']")).to_contain_text("running")
    expect(running).to_have_text("1 running")
    assert page.evaluate("window.__notReloaded") is True, "the page was reloaded"
    cancel(live_api, other)


def test_a_refresh_of_the_runs_list_keeps_the_focus_on_its_link(
    live_api: LiveApi, browser: OpenPage
) -> None:
    create(live_api, SLEEPY)
    run_id = start(live_api, "sleepy")
    page = browser("operator")
    sign_in(page, live_api, OPERATOR_TOKEN)
    row = page.locator(f"#run-rows tr[data-run='{run_id}']")
    expect(row).to_contain_text("running")
    link = row.get_by_role("link", name=run_id)
    link.focus()
    mark_focus(page)
    cancel(live_api, run_id)  # the row changes: the list is refreshed
    wait_for_refresh(page)
    expect(row).to_contain_text("canceled")
    expect(link).to_be_focused()
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{live_api.base_url}/ui/runs/{run_id}")


def test_a_refresh_of_a_runs_page_keeps_the_focus_on_its_viewer(
    live_api: LiveApi, browser: OpenPage
) -> None:
    create(live_api, TWO_STEPS)
    run_id = start(live_api, "two-steps")
    page = operator_on_run(live_api, browser, run_id)
    expect(page.locator("#tasks tr[data-task=second]")).to_have_attribute("data-status", "running")
    viewer = page.locator("summary", has_text="Output of first")
    viewer.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#tasks tr[data-task=first] pre")).to_be_visible()
    mark_focus(page)
    cancel(live_api, run_id)
    wait_for_refresh(page)
    expect(page.locator("#run-status")).to_have_text("canceled")
    expect(viewer).to_be_focused()
    expect(page.locator("#tasks tr[data-task=first] pre")).to_be_visible()
    page.keyboard.press("Enter")  # the same viewer, by keyboard: it closes
    expect(page.locator("#tasks tr[data-task=first] pre")).to_be_hidden()


def failed_then_succeeded(api: LiveApi) -> str:
    """A run of REMOTE whose task's first attempt fails (LONG_MESSAGE), its second succeeds."""
    create(api, REMOTE)
    run_id = start(api, "remote")
    first = claim(api)
    error = {"code": "resize_failed", "message": LONG_MESSAGE, "retryable": True}
    failed = api.worker.post(
        f"{V1}/attempts/{first['attempt_id']}/fail",
        json={"lease_token": first["lease_token"], "error": error},
    )
    assert failed.status_code == 200, failed.text
    second = claim(api)
    done = api.worker.post(
        f"{V1}/attempts/{second['attempt_id']}/complete",
        json={"lease_token": second["lease_token"], "output": {"size": "S" * 3000}},
    )
    assert done.status_code == 200, done.text
    assert api.wait_for_run(run_id)["status"] == "succeeded"
    return run_id


def test_every_failed_attempt_shows_its_error_in_a_viewer(
    live_api: LiveApi, browser: OpenPage, shots: Path
) -> None:
    run_id = failed_then_succeeded(live_api)
    page = operator_on_run(live_api, browser, run_id)
    expect(page.locator("#run-status")).to_have_text("succeeded")
    # The task succeeded; its first attempt's error is still there, reached by the keyboard.
    summary = page.locator("#attempts summary", has_text="Error of call attempt 1")
    expect(summary).to_contain_text("resize_failed")
    summary.focus()
    page.keyboard.press("Enter")
    facts = page.locator('#attempts tr[data-attempt="call#1"] dl')
    expect(facts).to_be_visible()
    expect(facts.locator("dd").nth(0)).to_have_text("resize_failed")
    expect(facts.locator("dd").nth(1)).to_have_text(LONG_MESSAGE)  # escaped: shown as text
    expect(facts.locator("dd").nth(2)).to_have_text("yes")
    expect(page.locator("#attempts b")).to_have_count(0)
    expect(page.locator('#attempts tr[data-attempt="call#2"] details')).to_have_count(0)
    shoot(page, shots, "attempt-error")


OPEN_ALL = "() => document.querySelectorAll('details').forEach(d => { d.open = true; })"


def test_long_unbroken_text_stays_inside_the_page(
    live_api: LiveApi, browser: OpenPage, shots: Path
) -> None:
    run_id = failed_then_succeeded(live_api)
    page = browser("operator")
    sign_in(page, live_api, OPERATOR_TOKEN)
    for name, path in (
        ("run", f"/ui/runs/{run_id}"),
        ("events", f"/ui/runs/{run_id}/events"),
        ("workflows", "/ui/workflows"),
        ("workflow", "/ui/workflows/remote"),
        ("version", "/ui/workflows/remote/versions/1"),
    ):
        page.goto(live_api.base_url + path)
        expect(page.locator("main h1")).to_be_visible()
        page.evaluate(OPEN_ALL)  # every viewer open, the long error and output shown
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 1280, f"{name} is {width} px wide in a window 1280 px wide"
        shoot(page, shots, f"long-{name}")


def test_no_page_reports_a_console_error_and_workflow_ids_are_validated(
    live_api: LiveApi, browser: OpenPage
) -> None:
    create(live_api, SLEEPY)
    run_id = start(live_api, "sleepy")
    page = browser("operator")
    said: list[str] = []

    def heard(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            said.append(f"{page.url}: {message.type}: {message.text}")

    def failed(error: Error) -> None:
        said.append(f"{page.url}: uncaught: {error}")

    page.on("console", heard)
    page.on("pageerror", failed)
    sign_in(page, live_api, OPERATOR_TOKEN)
    for path in (
        "/ui/runs",
        f"/ui/runs/{run_id}",
        f"/ui/runs/{run_id}/events",
        "/ui/approvals",
        "/ui/workflows",
        "/ui/workflows/sleepy",
        "/ui/workflows/sleepy/versions/1",
        "/ui/drafts",
        "/ui/workers",
        "/ui/cluster",
        "/ui/runs?since=1h&created_after=2026-12-01T09:30",
    ):
        page.goto(live_api.base_url + path)
        expect(page.locator("main h1")).to_be_visible()
        page.wait_for_load_state("load")
        for field in page.locator("input[pattern]").all():
            field.fill("BAD ID!")
            assert field.evaluate("f => f.checkValidity()") is False, f"{path}: BAD ID! is valid"
            field.fill("a.good_id-1")
            assert field.evaluate("f => f.checkValidity()") is True, f"{path}: a.good_id-1"
    # The two forms with a workflow id were among them.
    page.goto(f"{live_api.base_url}/ui/runs")
    expect(page.locator("#filter-workflow[pattern]")).to_have_count(1)
    page.goto(f"{live_api.base_url}/ui/drafts")
    expect(page.locator("#draft-workflow[pattern]")).to_have_count(1)
    page.locator("#draft-workflow").fill("BAD ID!")
    assert page.locator("#draft-workflow").evaluate("f => f.checkValidity()") is False
    cancel(live_api, run_id)
    assert said == []


FAN_OUT: dict[str, Any] = {
    "id": "fan-out",
    "tasks": [
        {"key": "gate", "action": "gate"},  # a remote task: done when the test completes it
        *(
            {"key": f"t{n:02}", "action": "mock", "depends_on": ["gate"], "input": {}}
            for n in range(60)
        ),
    ],
}
"""A run whose events mostly come after its page has opened: 60 tasks wait for the gate.

The gate is a remote task the test claims and completes itself once the page is open (a timed
gate let a slow sign-in on a loaded machine miss the run: it had ended before the page opened).
"""


def event_rows(page: Page) -> list[int]:
    sequences: list[str] = page.locator("#event-log tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.sequence)"
    )
    return [int(s) for s in sequences]


def last_sequence(api: LiveApi, run_id: str) -> int:
    """The run's last event, read through the API's pages."""
    cursor: str | None = None
    last = 0
    while True:
        params = {"limit": "200", **({"cursor": cursor} if cursor else {})}
        answer = api.operator.get(f"{V1}/runs/{run_id}/events", params=params)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        last = max([last, *(int(e["sequence"]) for e in page["items"])])
        cursor = page["next_cursor"]
        if cursor is None:
            return last


def test_the_event_log_keeps_as_many_events_live_as_after_a_reload(
    live_api: LiveApi, browser: OpenPage
) -> None:
    create(live_api, FAN_OUT)
    run_id = start(live_api, "fan-out")
    page = operator_on_run(live_api, browser, run_id)
    expect(page.locator("#run-status")).to_have_text("running")
    assert len(event_rows(page)) < 100, "the run's events should come in live"
    expect(page.locator("#events-trimmed")).to_be_hidden()
    page.evaluate("window.__notReloaded = true")
    gate = claim_one(live_api, actions=["gate"])
    assert complete(live_api, gate, {}).status_code == 200

    expect(page.locator("#run-status")).to_have_text("succeeded", timeout=30_000)
    last = last_sequence(live_api, run_id)
    assert last > 100, f"the run has {last} events: too few to trim"
    latest = list(range(last - 99, last + 1))
    page.wait_for_function(
        "last => document.querySelector('#event-log tbody tr:last-child')"
        "?.dataset.sequence === String(last)",
        arg=last,
    )
    assert page.evaluate("window.__notReloaded") is True, "the page was reloaded"
    assert event_rows(page) == latest, "live, the log keeps the latest 100"
    expect(page.locator("#events-trimmed")).to_be_visible()

    page.reload()
    assert event_rows(page) == latest, "after a reload, the same 100"
    expect(page.locator("#events-trimmed")).to_be_visible()
