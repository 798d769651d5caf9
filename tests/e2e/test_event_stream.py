"""The run event stream (SPEC §13): ``GET /api/v1/runs/{run_id}/events/stream``.

In-process (``httpx.ASGITransport`` buffers a whole response) for what a finished run's stream
and the refusals show; over real HTTP (``real_http_only``) for what only a live stream shows:
events arriving while the run goes on, a resume with ``Last-Event-ID`` across a reconnect,
keep-alive comments, and streams ending when the service stops.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.plugins.live_api import VIEWER_TOKEN, LiveApi, over_http, settings
from tests.waiting import wait_until
from workload_api.container import Container
from workload_api.settings import Settings

V1 = "/api/v1"
_keys = itertools.count()


def idem() -> dict[str, str]:
    return {"Idempotency-Key": f"stream-{next(_keys)}"}


@dataclass
class Message:
    """One server-sent message, as the wire shows it."""

    event: str = "message"
    data: list[str] = field(default_factory=list)
    id: str | None = None


@dataclass
class Wire:
    """A stream read line by line: its messages and its comments."""

    messages: list[Message] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    retry: str | None = None

    @property
    def sequences(self) -> list[int]:
        return [int(m.id) for m in self.messages if m.event == "message" and m.id is not None]

    @property
    def ended(self) -> bool:
        return bool(self.messages) and self.messages[-1].event == "end"


def messages(lines: Iterator[str], wire: Wire) -> Iterator[Message]:
    """Yield each message as it is parsed (a comment as a message of event ``comment``)."""
    current = Message()
    fields = False
    for line in lines:
        if line == "":
            if fields:
                wire.messages.append(current)
                yield current
            current, fields = Message(), False
        elif line.startswith(":"):
            wire.comments.append(line[1:].strip())
            yield Message(event="comment")
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "retry":
                wire.retry = value
                continue
            fields = True
            if name == "data":
                current.data.append(value)
            elif name == "event":
                current.event = value
            elif name == "id":
                current.id = value


def parse(lines: Iterator[str], wire: Wire, *, stop_after: int | None = None) -> Wire:
    """Read SSE lines into ``wire`` until the body ends (or ``stop_after`` events arrived)."""
    for _ in messages(lines, wire):
        if stop_after is not None and len(wire.sequences) >= stop_after:
            break
    return wire


def create(api: LiveApi, workflow_id: str, tasks: list[dict[str, Any]]) -> None:
    response = api.operator.post(
        f"{V1}/workflows", json={"id": workflow_id, "tasks": tasks}, headers=idem()
    )
    assert response.status_code == 201, response.text


def start(api: LiveApi, workflow_id: str) -> str:
    response = api.operator.post(f"{V1}/workflows/{workflow_id}/versions/1/runs", headers=idem())
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id


def listed_sequences(api: LiveApi, run_id: str) -> list[int]:
    response = api.viewer.get(f"{V1}/runs/{run_id}/events", params={"limit": 200})
    assert response.status_code == 200, response.text
    assert response.json()["next_cursor"] is None
    return [e["sequence"] for e in response.json()["items"]]


def stream(client: httpx.Client, run_id: str, **headers: str) -> Wire:
    with client.stream("GET", f"{V1}/runs/{run_id}/events/stream", headers=headers) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return parse(response.iter_lines(), Wire())


CHAIN: list[dict[str, Any]] = [
    {"key": "a", "action": "mock"},
    {
        "key": "b",
        "action": "mock",
        "depends_on": ["a"],
        "input": {"fail_first": 1},
        "retry": {"max_attempts": 2, "initial_backoff_seconds": 0},
    },
    {"key": "c", "action": "mock", "depends_on": ["b"]},
]


# -- a finished run (in-process and over HTTP) -------------------------------------------------


@pytest.mark.real_http
def test_a_finished_runs_stream_has_every_event_once_then_ends(live_api: LiveApi) -> None:
    create(live_api, "chain", CHAIN)
    run_id = start(live_api, "chain")
    assert live_api.wait_for_run(run_id)["status"] == "succeeded"
    wire = stream(live_api.viewer, run_id)
    expected = listed_sequences(live_api, run_id)
    assert wire.sequences == expected
    events = [m for m in wire.messages if m.event == "message"]
    bodies = [json.loads("\n".join(m.data)) for m in events]
    assert [b["sequence"] for b in bodies] == expected, "id: is the event's sequence"
    assert bodies[-1]["type"] == "run.succeeded"
    assert wire.ended, "the stream ends with its end message"
    assert json.loads(wire.messages[-1].data[0]) == {"run_id": run_id, "status": "succeeded"}
    assert wire.retry is not None, "the stream tells EventSource how soon to reconnect"


@pytest.mark.parametrize(
    ("header", "query", "first"),
    [
        pytest.param({"Last-Event-ID": "3"}, None, 4, id="last-event-id"),
        pytest.param({}, {"after": "5"}, 6, id="after-query"),
        pytest.param({"Last-Event-ID": "2"}, {"after": "5"}, 3, id="header-wins"),
        pytest.param({"Last-Event-ID": " 0 "}, None, 1, id="zero"),
    ],
)
def test_a_stream_starts_after_the_given_sequence(
    live_api: LiveApi, header: dict[str, str], query: dict[str, str] | None, first: int
) -> None:
    create(live_api, "chain", CHAIN)
    run_id = start(live_api, "chain")
    live_api.wait_for_run(run_id)
    path = f"{V1}/runs/{run_id}/events/stream"
    with live_api.viewer.stream("GET", path, headers=header, params=query) as response:
        assert response.status_code == 200
        wire = parse(response.iter_lines(), Wire())
    every = listed_sequences(live_api, run_id)
    assert wire.sequences == [s for s in every if s >= first]
    assert wire.ended


def test_a_stream_resumed_after_the_last_event_only_ends(live_api: LiveApi) -> None:
    create(live_api, "chain", CHAIN)
    run_id = start(live_api, "chain")
    live_api.wait_for_run(run_id)
    last = listed_sequences(live_api, run_id)[-1]
    wire = stream(live_api.viewer, run_id, **{"Last-Event-ID": str(last)})
    assert wire.sequences == []
    assert wire.ended


# -- refusals ----------------------------------------------------------------------------------

UNKNOWN_RUN = "01890000-0000-7000-8000-000000000000"


@pytest.mark.real_http
@pytest.mark.parametrize(
    "run_id",
    [
        pytest.param(UNKNOWN_RUN, id="unknown-uuid"),
        pytest.param("not-a-run", id="not-a-uuid"),
    ],
)
def test_a_stream_of_an_unknown_run_is_404(live_api: LiveApi, run_id: str) -> None:
    response = live_api.viewer.get(f"{V1}/runs/{run_id}/events/stream")
    assert response.status_code == 404, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "run_not_found"


@pytest.mark.parametrize(
    ("headers", "query"),
    [
        pytest.param({"Last-Event-ID": "x"}, None, id="last-event-id-not-a-number"),
        pytest.param({"Last-Event-ID": "-1"}, None, id="last-event-id-negative"),
        pytest.param({"Last-Event-ID": "1" * 19}, None, id="last-event-id-too-long"),
        pytest.param({}, {"after": "-1"}, id="after-negative"),
        pytest.param({}, {"after": "1.5"}, id="after-not-an-integer"),
        pytest.param({}, {"limit": "5"}, id="unknown-query-parameter"),
        pytest.param({}, [("after", "1"), ("after", "2")], id="after-repeated"),
        # Last-Event-ID wins over after, but does not make a malformed after acceptable.
        pytest.param({"Last-Event-ID": "3"}, {"after": "abc"}, id="header-and-after-malformed"),
        pytest.param({"Last-Event-ID": "3"}, {"after": "-5"}, id="header-and-after-negative"),
    ],
)
def test_a_malformed_start_is_400(live_api: LiveApi, headers: dict[str, str], query: Any) -> None:
    create(live_api, "chain", CHAIN)
    run_id = start(live_api, "chain")
    path = f"{V1}/runs/{run_id}/events/stream"
    response = live_api.viewer.get(path, headers=headers, params=query)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "invalid_argument"


@pytest.mark.parametrize(
    ("who", "status"),
    [
        pytest.param("anonymous", 401, id="anonymous"),
        pytest.param("worker", 403, id="worker"),
        pytest.param("viewer", 200, id="viewer"),
        pytest.param("operator", 200, id="operator"),
    ],
)
def test_a_stream_needs_a_viewer(live_api: LiveApi, who: str, status: int) -> None:
    create(live_api, "chain", CHAIN)
    run_id = start(live_api, "chain")
    live_api.wait_for_run(run_id)
    client: httpx.Client = getattr(live_api, who)
    response = client.get(f"{V1}/runs/{run_id}/events/stream")
    assert response.status_code == status, response.text


# -- live streams (real HTTP: ASGITransport would buffer them) ---------------------------------


@pytest.fixture
def api_settings() -> Settings:
    # Keep-alives every 0.2 s, so a test sees some without waiting 15 s.
    return settings(stream_keepalive_seconds=0.2)


def remote_run(api: LiveApi, workflow_id: str) -> str:
    """A run whose only task is remote and unserved: it stays running, queued, until canceled."""
    create(api, workflow_id, [{"key": "r", "action": "resize"}])
    return start(api, workflow_id)


def stream_client(api: LiveApi, token: str = VIEWER_TOKEN) -> httpx.Client:
    return api.client(token)


@pytest.mark.real_http_only
def test_events_arrive_live_and_the_stream_closes_after_the_terminal_one(
    live_api: LiveApi,
) -> None:
    # Long enough that the stream opens while it runs, on a slow machine too.
    create(live_api, "slow", [{"key": "a", "action": "mock", "input": {"sleep_ms": 3000}}])
    run_id = start(live_api, "slow")
    arrivals: list[tuple[float, int]] = []
    with stream_client(live_api).stream("GET", f"{V1}/runs/{run_id}/events/stream") as response:
        wire = Wire()
        for message in messages(response.iter_lines(), wire):
            if message.id is not None:
                arrivals.append((time.monotonic(), int(message.id)))
        # The iteration ended: the server closed the stream after the end message.
    assert wire.ended
    assert wire.sequences == listed_sequences(live_api, run_id)
    # The attempt started before the run finished, and was seen while it ran: the events came
    # as they were committed, not all at once at the end.
    finished_at = arrivals[-1][0]
    assert arrivals[0][0] < finished_at - 0.3, arrivals


@pytest.mark.real_http_only
def test_a_resume_with_last_event_id_has_no_gap_and_no_duplicate(live_api: LiveApi) -> None:
    create(
        live_api,
        "steps",
        [
            {"key": f"t{n}", "action": "mock", "input": {"sleep_ms": 50}}
            | ({"depends_on": [f"t{n - 1}"]} if n else {})
            for n in range(6)
        ],
    )
    run_id = start(live_api, "steps")
    client = stream_client(live_api)
    first = Wire()
    with client.stream("GET", f"{V1}/runs/{run_id}/events/stream") as response:
        parse(response.iter_lines(), first, stop_after=3)
    # The client hung up after three events; the run goes on. Resume where it stopped.
    assert first.sequences == [1, 2, 3]
    second = stream(client, run_id, **{"Last-Event-ID": str(first.sequences[-1])})
    assert second.ended
    assert first.sequences + second.sequences == listed_sequences(live_api, run_id)


@pytest.mark.real_http_only
def test_a_quiet_stream_sends_keep_alive_comments(live_api: LiveApi) -> None:
    run_id = remote_run(live_api, "quiet")
    client = stream_client(live_api)
    wire = Wire()
    with client.stream("GET", f"{V1}/runs/{run_id}/events/stream") as response:
        lines = response.iter_lines()
        for _ in messages(lines, wire):
            if len(wire.comments) >= 2:
                break
        assert wire.comments[:2] == ["keep-alive", "keep-alive"]
        canceled = live_api.operator.post(f"{V1}/runs/{run_id}/cancel", headers=idem())
        assert canceled.status_code == 202, canceled.text
        for _ in messages(lines, wire):
            pass
    assert wire.ended, "the cancel's commit woke the stream, which ended after run.canceled"
    assert wire.sequences == listed_sequences(live_api, run_id)


def test_open_streams_do_not_hold_the_shutdown(database_url: str) -> None:
    """Stopping ends every stream at once (no end message: clients resume), well within a
    graceful shutdown that would otherwise wait 30 s for them."""
    real = settings(database_url=database_url, shutdown_grace_seconds=30)
    opened = threading.Event()
    results: list[Wire] = []
    with over_http(Container(settings=real)) as api:
        run_id = remote_run(api, "stopping")

        def follow() -> None:
            # A client of its own: the fixture closes its clients before it stops the service.
            path = f"{V1}/runs/{run_id}/events/stream"
            auth = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
            with (
                httpx.Client(base_url=api.base_url, headers=auth) as client,
                client.stream("GET", path) as response,
            ):
                wire = Wire()
                for _ in messages(response.iter_lines(), wire):
                    opened.set()
                results.append(wire)

        reader = threading.Thread(target=follow)
        reader.start()
        wait_until(opened.is_set, timeout=10, message="the stream did not open")
        stopping = time.monotonic()
    # Leaving over_http stopped the coordinator and waited for its thread.
    assert time.monotonic() - stopping < 5, "the open stream held the shutdown"
    reader.join(timeout=10)
    assert results, "the stream did not end"
    assert not results[0].ended, "a stream cut by a stop has no end: the client resumes"
