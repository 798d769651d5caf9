"""A run with forty ~1 MiB outputs, followed live in a real browser (issue 33, finding D3).

The page was re-read whole-sized after every event: its live part held every output (40 MiB) and
was fetched again for each of the run's events. Now the page is loaded once, the live part is
bounded and re-read at most once a second, and the event log keeps following the stream.

Over real HTTP and PostgreSQL (``real_http_only``). Select with ``-m browser``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Request, Response, expect

from tests.console.browsing import shoot, sign_in
from tests.console.conftest import OpenPage
from tests.console.helpers import V1, create, start
from tests.console.test_large_outputs import PAGE_BOUND, big_workflow, complete_all, output_of
from tests.plugins.live_api import VIEWER_TOKEN, LiveApi

pytestmark = [pytest.mark.browser, pytest.mark.real_http_only]


def every_event(api: LiveApi, run_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 200}
    while True:
        page = api.viewer.get(f"{V1}/runs/{run_id}/events", params=params).json()
        found.extend(page["items"])
        if not page["next_cursor"]:
            return found
        params["cursor"] = page["next_cursor"]


def test_a_run_page_follows_large_outputs_without_reloading_the_page(
    live_api: LiveApi, browser: OpenPage, shots: Path
) -> None:
    create(live_api, big_workflow())
    run_id = start(live_api, "big")
    page = browser("viewer")
    sign_in(page, live_api, VIEWER_TOKEN)
    documents: list[str] = []
    live_sizes: list[int] = []
    run_url = f"{live_api.base_url}/ui/runs/{run_id}"

    def requested(request: Request) -> None:
        if request.resource_type == "document":
            documents.append(request.url)

    def answered(response: Response) -> None:
        if response.url == run_url + "/live":
            live_sizes.append(int(response.headers.get("content-length", "-1")))

    page.on("request", requested)
    page.on("response", answered)
    page.goto(run_url)
    after = int(page.locator("#live").get_attribute("data-after") or "0")
    page.evaluate("window.__notReloaded = true")

    complete_all(live_api)
    expect(page.locator("#run-status")).to_have_text("succeeded")
    followed = [e for e in every_event(live_api, run_id) if e["sequence"] > after]
    last = followed[-1]["sequence"]
    expect(page.locator(f"#event-log tr[data-sequence='{last}']")).to_have_count(1)
    shoot(page, shots, "large-outputs")

    assert page.evaluate("window.__notReloaded") is True, "the page was reloaded"
    assert documents == [run_url], "one document: the run's page, loaded once"
    assert live_sizes, "the live part was re-read"
    assert min(live_sizes) > 0, "every live part has its length"
    assert max(live_sizes) < PAGE_BOUND, f"a live part of {max(live_sizes)} bytes"
    assert len(live_sizes) < len(followed) / 2, (
        f"{len(live_sizes)} re-reads of the live part for {len(followed)} events"
    )

    # The first output, opened: its start, the note, and the link to the whole value.
    details = page.locator("#output-1")
    details.locator("summary").click()
    expect(details.locator("p.truncated")).to_contain_text("Truncated")
    link = details.get_by_role("link", name="The whole value as JSON")
    expect(link).to_have_attribute("href", f"/ui/runs/{run_id}/tasks/t00/raw/output")
    whole = page.request.get(f"{live_api.base_url}/ui/runs/{run_id}/tasks/t00/raw/output")
    assert whole.json() == output_of("t00")
