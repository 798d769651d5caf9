"""Every attempt of a run in the console (SPEC §13): a run's page shows the first ones, and each
task's attempts page shows all of that task's, paged."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.console.helpers import assert_safe_page, create, sign_in, start
from tests.plugins.live_api import VIEWER_TOKEN, LiveApi
from workload_api.console import runs as console_runs

FLAKY = {
    "id": "flaky",
    "tasks": [
        {
            "key": "a",
            "action": "mock",
            "input": {"fail_first": 2},
            "retry": {"max_attempts": 3, "initial_backoff_seconds": 0.01},
        },
        {
            "key": "b",
            "action": "mock",
            "depends_on": ["a"],
            "input": {"fail_first": 1},
            "retry": {"max_attempts": 2, "initial_backoff_seconds": 0.01},
        },
        {"key": "c", "action": "mock", "depends_on": ["b"], "input": {"fail_always": True}},
    ],
}


def attempt_rows(page: str) -> list[tuple[str, str]]:
    """The attempts table: (task#attempt, status) per row."""
    table = page.split('id="attempts"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<tr data-attempt="([^"]+)" data-status="([^"]+)">', table)


@pytest.fixture
def viewer_browser(live_api: LiveApi) -> httpx.Client:
    return sign_in(live_api, VIEWER_TOKEN)


def test_attempts_a_runs_page_leaves_out_are_on_their_tasks_pages(
    live_api: LiveApi, viewer_browser: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run's page shows its first attempts (500; 3 here) — a timeline of every attempt must
    # not end there: each task's count of attempts links its own page, paged (100; 2 here).
    monkeypatch.setattr(console_runs, "ATTEMPTS_SHOWN", 3)
    monkeypatch.setattr(console_runs, "TASK_ATTEMPTS_SHOWN", 2)
    create(live_api, FLAKY)
    run_id = start(live_api, "flaky")
    assert live_api.wait_for_run(run_id)["status"] == "failed"

    page = assert_safe_page(viewer_browser.get(f"/ui/runs/{run_id}"))
    assert attempt_rows(page) == [("a#1", "failed"), ("a#2", "failed"), ("a#3", "succeeded")]
    assert "More attempts exist than are shown" in page
    for key, count in (("a", "3 / 3"), ("b", "2 / 2"), ("c", "1 / 1")):
        link = f'<a href="/ui/runs/{run_id}/tasks/{key}/attempts" aria-label="Attempts of {key}'
        assert link in page
        assert f">{count}</a>" in page

    first = assert_safe_page(viewer_browser.get(f"/ui/runs/{run_id}/tasks/a/attempts"))
    assert attempt_rows(first) == [("a#1", "failed"), ("a#2", "failed")]
    assert "mock_failure" in first
    assert "First page" not in first
    following = re.search(r'href="([^"]+)" rel="next"', first)
    assert following is not None
    second = viewer_browser.get(following[1].replace("&amp;", "&")).text
    assert attempt_rows(second) == [("a#3", "succeeded")]
    assert re.search(r'rel="next"', second) is None
    assert f'<a href="/ui/runs/{run_id}/tasks/a/attempts">First page</a>' in second
    last = viewer_browser.get(f"/ui/runs/{run_id}/tasks/c/attempts").text
    assert attempt_rows(last) == [("c#1", "failed")]


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/ui/runs/{run_id}/tasks/nope/attempts", 404),
        ("/ui/runs/not-a-run/tasks/a/attempts", 404),
        ("/ui/runs/{run_id}/tasks/a/attempts?cursor=garbage", 400),
    ],
    ids=["unknown-task", "unknown-run", "bad-cursor"],
)
def test_a_task_attempts_page_answers_bad_paths_with_4xx(
    live_api: LiveApi, viewer_browser: httpx.Client, path: str, status: int
) -> None:
    create(live_api, FLAKY)
    run_id = start(live_api, "flaky")
    live_api.wait_for_run(run_id)
    assert viewer_browser.get(path.format(run_id=run_id)).status_code == status


def test_a_task_attempts_page_needs_a_session(live_api: LiveApi) -> None:
    answer = live_api.client(None).get("/ui/runs/x/tasks/a/attempts")
    assert answer.status_code in (302, 303)
    assert answer.headers["location"].startswith("/ui/login")
