"""The runs page's time filter, the workflow page's start form, a run's output and the cluster
page over HTTP (SPEC §13, amended 2026-12-01; issue 30).

The filter is read strictly: a value the page cannot read is a 400 page that says which field
and what it takes (never a 500, never the value echoed); a later page and the live refresh keep
the window its cursor was issued for. The browser journeys are in ``test_browser_window.py``.
"""

from __future__ import annotations

import html as htmllib
import re
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.console.helpers import (
    QUICK,
    SLEEPY,
    V1,
    assert_safe_page,
    create,
    csrf_of,
    form_field,
    idem,
    post_forms,
    sign_in,
    start,
)
from tests.plugins.live_api import OPERATOR_TOKEN, VIEWER_TOKEN, LiveApi
from workload_api.console.cluster import shard_ranges

ROWS = re.compile(r'<tr data-run="([^"]+)">')


@pytest.fixture
def operator_browser(live_api: LiveApi) -> httpx.Client:
    return sign_in(live_api, OPERATOR_TOKEN)


@pytest.fixture
def viewer_browser(live_api: LiveApi) -> httpx.Client:
    return sign_in(live_api, VIEWER_TOKEN)


def listed(client: httpx.Client, path: str, params: dict[str, str] | None = None) -> list[str]:
    answer = client.get(path, params=params)
    assert answer.status_code == 200, answer.text
    return ROWS.findall(answer.text)


def created(api: LiveApi, run_id: str) -> datetime:
    run = api.viewer.get(f"{V1}/runs/{run_id}").json()
    return datetime.fromisoformat(run["created_at"].replace("Z", "+00:00"))


def rfc3339(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def link(html: str, pattern: str) -> str:
    found = re.search(pattern, html)
    assert found is not None, f"no {pattern} on the page"
    return htmllib.unescape(found[1])


# -- the time filter ---------------------------------------------------------------------------


@pytest.mark.real_http
def test_the_runs_page_lists_newest_first_and_the_time_filter_narrows_it(
    live_api: LiveApi, viewer_browser: httpx.Client
) -> None:
    create(live_api, QUICK)
    older, newer = start(live_api, "quick"), start(live_api, "quick")
    first, second = created(live_api, older), created(live_api, newer)
    assert first < second
    assert listed(viewer_browser, "/ui/runs") == [newer, older]
    # From and To are exclusive, read as the API reads them (an offset, or UTC without one).
    assert listed(viewer_browser, "/ui/runs", {"created_after": rfc3339(first)}) == [newer]
    assert listed(viewer_browser, "/ui/runs", {"created_before": rfc3339(second)}) == [older]
    local = (first - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M")  # datetime-local's form
    assert listed(viewer_browser, "/ui/runs", {"created_after": local}) == [newer, older]
    hour_later = (first + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%f")
    assert listed(viewer_browser, "/ui/runs", {"created_before": hour_later}) == [newer, older]
    # A window counts back from now, or from a later page's moment (at).
    assert listed(viewer_browser, "/ui/runs", {"since": "1h"}) == [newer, older]
    anchored = {"since": "1h", "at": rfc3339(first + timedelta(hours=1))}
    assert listed(viewer_browser, "/ui/runs", anchored) == [newer]
    later = {"since": "7d", "at": rfc3339(second + timedelta(days=8))}
    assert listed(viewer_browser, "/ui/runs", later) == []
    # With the other filters, and the empty fields a form submits.
    both = {"since": "24h", "status": "succeeded", "workflow_id": "quick"}
    live_api.wait_for_run(older), live_api.wait_for_run(newer)
    assert listed(viewer_browser, "/ui/runs", both) == [newer, older]
    empty = {"since": "", "created_after": "", "created_before": "", "status": ""}
    assert listed(viewer_browser, "/ui/runs", empty) == [newer, older]
    page = viewer_browser.get("/ui/runs", params={"since": "24h", "created_after": local})
    assert "created within the last 24 hours" in page.text
    assert f'value="{local}:00"' in page.text, "the From field shows the time it was given"
    assert '<option value="24h" selected>' in page.text


@pytest.mark.real_http
def test_a_later_page_and_the_live_refresh_keep_the_window_of_the_first(
    live_api: LiveApi, viewer_browser: httpx.Client
) -> None:
    create(live_api, QUICK)
    runs = [start(live_api, "quick") for _ in range(27)]
    first = viewer_browser.get("/ui/runs", params={"since": "1h", "workflow_id": "quick"})
    assert ROWS.findall(first.text) == runs[::-1][:25]
    rows = link(first.text, r'id="runs-live" data-url="([^"]+)"')
    assert "since=1h" in rows
    assert "at=" not in rows, "the first page's refresh follows a sliding window"
    following = link(first.text, r'href="([^"]+)" rel="next"')
    assert "since=1h" in following
    assert "at=" in following, "a later page counts back from the first page's moment"
    assert "First page" not in first.text
    second = viewer_browser.get(following)
    assert second.status_code == 200, second.text
    assert ROWS.findall(second.text) == runs[1::-1]
    back = link(second.text, r'href="([^"]+)">First page</a>')
    assert "since=1h" in back
    assert "at=" not in back, "the first page follows a sliding window again"
    assert "cursor=" not in back
    refresh = viewer_browser.get(link(second.text, r'id="runs-live" data-url="([^"]+)"'))
    assert refresh.status_code == 200, refresh.text
    assert ROWS.findall(refresh.text) == runs[1::-1]
    assert "selected>the last hour</option>" in second.text
    # The cursor is bound to the window: another moment, window or bound is refused.
    moment = re.search(r"at=([^&]+)", following)
    assert moment is not None
    for changed in (
        following.replace(moment[1], "2030-01-01T00%3A00%3A00Z"),
        following.replace("since=1h", "since=24h"),
        following + "&created_before=2999-01-01T00%3A00",
        following.replace("since=1h", "since="),
    ):
        answer = viewer_browser.get(changed)
        assert answer.status_code == 400, (changed, answer.status_code)
        assert "cursor" in answer.text


EXAMPLE = "2026-12-01T09:30:00+01:00"
LONG = "2026-12-01T09:30:00" + "0" * 5000 + "Z"


@pytest.mark.real_http
@pytest.mark.parametrize(
    ("params", "says"),
    [
        pytest.param({"since": "2h"}, "Created within must be one of", id="unknown-window"),
        pytest.param({"since": "1H"}, "Created within must be one of", id="window-case"),
        pytest.param({"since": "1h\x00"}, "Created within must be one of", id="window-nul"),
        pytest.param({"since": "x" * 5000}, "Created within must be one of", id="window-long"),
        pytest.param({"created_after": "2026-12-01"}, "From is not a time", id="date-alone"),
        pytest.param({"created_after": "yesterday"}, "From is not a time", id="words"),
        pytest.param({"created_after": "2026-13-01T00:00"}, "From is not a time", id="month-13"),
        pytest.param({"created_after": "2026-02-30T00:00"}, "From is not a time", id="feb-30"),
        pytest.param({"created_after": "2026-12-01T24:00"}, "From is not a time", id="hour-24"),
        pytest.param(
            {"created_after": "2026-12-01T23:59:61Z"}, "From is not a time", id="second-61"
        ),
        pytest.param({"created_after": "0000-01-01T00:00"}, "From is not a time", id="year-0"),
        pytest.param(
            {"created_after": "0001-01-01T00:00:00+00:01"}, "From is not a time", id="before-1"
        ),
        pytest.param(
            {"created_before": "9999-12-31T23:59:59-00:01"}, "To is not a time", id="after-9999"
        ),
        pytest.param(
            {"created_before": "\uff12\uff10\uff12\uff16-12-01T00:00"},
            "To is not a time",
            id="fullwidth-digits",
        ),
        pytest.param({"created_before": "2026-12-01T00:00\x00"}, "To is not a time", id="nul"),
        pytest.param({"created_before": LONG}, "To is not a time", id="oversized"),
        pytest.param({"created_before": "2026-12-01T00:00+25:00"}, "To is not a time", id="tz"),
        pytest.param({"since": "1h", "at": "soon"}, "moment (at) is not a time", id="bad-at"),
        pytest.param(
            {"since": "7d", "at": "0001-01-02T00:00:00Z"}, "too early", id="at-before-year-1"
        ),
    ],
)
def test_a_time_filter_the_page_cannot_read_is_a_clear_400(
    live_api: LiveApi, viewer_browser: httpx.Client, params: dict[str, str], says: str
) -> None:
    create(live_api, QUICK)
    start(live_api, "quick")
    answer = viewer_browser.get("/ui/runs", params=params)
    assert answer.status_code == 400, answer.text
    html = assert_safe_page(answer)
    assert says in html
    assert "Back to the runs" in html
    for value in params.values():
        if len(value) > 3 and not EXAMPLE.startswith(value):  # the message's own example
            assert htmllib.escape(value) not in html, "the value is not echoed"
    rows = viewer_browser.get("/ui/runs/rows", params=params)
    assert rows.status_code == 400, rows.text


@pytest.mark.parametrize(
    ("params", "count"),
    [
        pytest.param({"created_after": "0001-01-01T00:00"}, 1, id="from-year-1"),
        pytest.param({"created_before": "9999-12-31T23:59:59.999999Z"}, 1, id="to-9999"),
        pytest.param({"created_before": "9999-12-31T23:59:59.9999999Z"}, 1, id="to-past-micro"),
        pytest.param({"created_after": "9999-12-31T23:59:59.999999Z"}, 0, id="from-9999"),
        pytest.param({"created_before": "0001-01-01T00:00:00.000001Z"}, 0, id="to-year-1"),
        pytest.param({"since": "7d", "at": "0001-01-08T00:00:00Z"}, 1, id="at-year-1-plus-7d"),
        pytest.param({"since": "1h", "at": "9999-12-31T23:59:59Z"}, 0, id="at-9999"),
        pytest.param(
            {"created_after": "2999-01-01T00:00", "created_before": "2000-01-01T00:00"},
            0,
            id="inverted",
        ),
        pytest.param({"at": "2030-01-01T00:00:00Z"}, 1, id="at-without-window"),
    ],
)
def test_boundary_times_are_read(
    live_api: LiveApi, viewer_browser: httpx.Client, params: dict[str, str], count: int
) -> None:
    create(live_api, QUICK)
    start(live_api, "quick")
    assert len(listed(viewer_browser, "/ui/runs", params)) == count


# -- the workflow page starts runs -------------------------------------------------------------

TWO_VERSIONS: list[dict[str, Any]] = [
    {"id": "flow", "description": "first", "tasks": [{"key": "a", "action": "mock"}]},
    {
        "id": "flow",
        "description": "second",
        "tasks": [
            {"key": "a", "action": "mock"},
            {"key": "b", "action": "mock", "depends_on": ["a"], "input": {"output": {"n": 2}}},
        ],
    },
]


def two_versions(api: LiveApi) -> None:
    for definition in TWO_VERSIONS:
        answer = api.operator.put(f"{V1}/workflows/flow", json=definition, headers=idem())
        assert answer.status_code in (200, 201), answer.text


@pytest.mark.real_http
def test_the_workflow_page_shows_its_latest_version_and_starts_it(
    live_api: LiveApi, operator_browser: httpx.Client
) -> None:
    two_versions(live_api)
    page = operator_browser.get("/ui/workflows/flow")
    html = assert_safe_page(page)
    assert post_forms(html) == ["/ui/logout", "/ui/workflows/flow/versions/2/runs"]
    assert html.count('<g class="node s-defined"') == 2, "the latest version's DAG"
    assert "&#34;depends_on&#34;: [" in html, "its definition"
    for number in (1, 2):  # every version one click away
        assert f'href="/ui/workflows/flow/versions/{number}">version {number}</a>' in html
    form = {
        "csrf": csrf_of(html),
        "idempotency_key": form_field(html, "idempotency_key"),
        "back": "workflow",
        "input": '{"who": "workflow page"}',
    }
    answer = operator_browser.post("/ui/workflows/flow/versions/2/runs", data=form)
    assert answer.status_code == 303, answer.text
    run_id = answer.headers["location"].rsplit("/", 1)[1]
    run = live_api.wait_for_run(run_id)
    assert (run["version"], run["input"]) == (2, {"who": "workflow page"})
    # The run's page shows its output (SPEC §6: its sink tasks' outputs), linked whole.
    shown = operator_browser.get(f"/ui/runs/{run_id}").text
    assert 'id="run-output"' in shown
    assert "&#34;b&#34;: {\n    &#34;n&#34;: 2\n  }" in shown
    whole = operator_browser.get(f"/ui/runs/{run_id}/raw/output")
    assert whole.status_code == 200
    assert whole.json() == run["output"] == {"b": {"n": 2}}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{", "not valid JSON", id="not-json"),
        pytest.param("[1]", "one JSON object", id="not-an-object"),
        pytest.param('{"s": "\\u0000"}', "cannot be stored", id="nul"),
        pytest.param("{" * 100_000, "", id="deep"),
    ],
)
def test_a_bad_input_is_shown_back_on_the_workflow_page(
    live_api: LiveApi, operator_browser: httpx.Client, text: str, message: str
) -> None:
    two_versions(live_api)
    html = operator_browser.get("/ui/workflows/flow").text
    answer = operator_browser.post(
        "/ui/workflows/flow/versions/2/runs",
        data={"csrf": csrf_of(html), "input": text, "back": "workflow"},
    )
    assert answer.status_code == 400, answer.text
    assert "<h1>Workflow flow</h1>" in answer.text
    alert = re.search(r'<p class="message" role="alert">([^<]*)</p>', answer.text)
    assert alert is not None
    assert message in alert[1]
    assert 'id="start-form"' in answer.text, "the form again, to correct the input"
    assert live_api.viewer.get(f"{V1}/runs").json()["items"] == []


@pytest.mark.real_http
def test_viewers_get_no_start_form_on_the_workflow_page_and_their_post_is_403(
    live_api: LiveApi, viewer_browser: httpx.Client
) -> None:
    create(live_api, SLEEPY)
    page = viewer_browser.get("/ui/workflows/sleepy")
    assert page.status_code == 200
    assert post_forms(page.text) == ["/ui/logout"]
    assert "Start run" not in page.text
    assert 'class="dag"' in page.text, "viewers see the DAG"
    answer = viewer_browser.post(
        "/ui/workflows/sleepy/versions/1/runs",
        data={"csrf": csrf_of(page.text), "input": "{}", "back": "workflow"},
    )
    assert answer.status_code == 403, answer.text
    assert live_api.viewer.get(f"{V1}/runs").json()["items"] == []


def test_a_run_without_output_shows_no_output_viewer(
    live_api: LiveApi, viewer_browser: httpx.Client
) -> None:
    create(live_api, SLEEPY)
    run_id = start(live_api, "sleepy")
    page = viewer_browser.get(f"/ui/runs/{run_id}")
    assert 'id="run-output"' not in page.text
    assert viewer_browser.get(f"/ui/runs/{run_id}/raw/output").json() is None
    cancel = live_api.operator.post(f"{V1}/runs/{run_id}/cancel", headers=idem())
    assert cancel.status_code == 202, cancel.text


# -- the cluster page --------------------------------------------------------------------------


@pytest.mark.real_http
@pytest.mark.parametrize("token", [VIEWER_TOKEN, OPERATOR_TOKEN], ids=["viewer", "operator"])
def test_the_cluster_page_shows_what_the_api_says(live_api: LiveApi, token: str) -> None:
    client = sign_in(live_api, token)
    page = client.get("/ui/cluster")
    html = assert_safe_page(page)
    cluster = live_api.viewer.get(f"{V1}/cluster").json()
    status = live_api.viewer.get(f"{V1}/status").json()
    (member,) = cluster["replicas"]  # one process leads alone, with every shard
    assert member["shards"] == list(range(cluster["shards_total"]))
    row = re.search(r'<tr data-replica="([^"]+)" data-shards="([^"]*)">', html)
    assert row is not None
    assert row[1] == member["replica_id"]
    assert row[2] == ",".join(str(s) for s in member["shards"])
    assert f"{cluster['shards_total']} shards in all; 1 live member." in html
    assert f'<dd data-field="role">{status["role"]}</dd>' in html
    epoch = "—" if status["epoch"] is None else status["epoch"]  # in memory: no lock, no epoch
    assert f'<dd data-field="epoch">{epoch}</dd>' in html
    assert (status["epoch"] is None) is (live_api.backend == "memory")
    assert '<a href="/ui/cluster" aria-current="page">Cluster</a>' in html


def test_the_cluster_page_needs_a_session(live_api: LiveApi) -> None:
    answer = live_api.anonymous.get("/ui/cluster")
    assert answer.status_code == 303
    assert live_api.viewer.get("/ui/cluster").status_code == 303, "a bearer token is no session"


@pytest.mark.parametrize(
    ("shards", "text"),
    [
        ([], "none"),
        ([0], "0"),
        ([0, 1, 2, 3], "0–3"),
        ([8, 0, 1, 10, 11, 3], "0–1, 3, 8, 10–11"),
        (list(range(4096)), "0–4095"),
    ],
)
def test_shards_are_shown_as_runs_of_consecutive_numbers(shards: list[int], text: str) -> None:
    assert shard_ranges(shards) == text
