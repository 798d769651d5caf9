"""``client.runs.stream_events``: SSE decoding, the end, resuming with Last-Event-ID, giving up.

The fake server answers ``GET …/events/stream`` from a script of bodies, one per connection, and
records the ``Last-Event-ID`` each connection sent; the SDK's sync and async twins are run over
the same cases.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest

from tests.sdk.fakes import RUN_ID, problem
from workload_sdk import (
    APIConnectionError,
    APITimeoutError,
    AsyncClient,
    Client,
    Event,
    NotFound,
    TooManyRequests,
)
from workload_sdk._streams import SseDecoder

BASE = "http://api.test"
PATH = f"/api/v1/runs/{RUN_ID}/events/stream"


def event(sequence: int, kind: str = "attempt.started") -> str:
    body = {
        "sequence": sequence,
        "type": kind,
        "occurred_at": "2026-01-01T00:00:00Z",
        "task_key": None,
        "attempt": None,
        "data": {"note": "two\nlines"},
    }
    return f"id: {sequence}\ndata: {json.dumps(body)}\n\n"


END = 'event: end\ndata: {"run_id": "r", "status": "succeeded"}\n\n'


class Script:
    """Answers each connection with the next body (or error); records what each one sent."""

    def __init__(self, *answers: str | httpx.Response | httpx.TransportError) -> None:
        self.answers = list(answers)
        self.resumed: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == PATH
        assert request.headers["accept"] == "text/event-stream"
        self.resumed.append(request.headers.get("last-event-id"))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, httpx.TransportError):
            raise type(answer)(str(answer), request=request)
        if isinstance(answer, httpx.Response):
            return answer
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=answer.encode()
        )


def follow_sync(script: Script, **kwargs: Any) -> list[int]:
    with Client(base_url=BASE, token="t", transport=httpx.MockTransport(script)) as client:
        return [e.sequence for e in client.runs.stream_events(RUN_ID, **kwargs)]


def follow_async(script: Script, **kwargs: Any) -> list[int]:
    async def follow() -> list[int]:
        transport = httpx.MockTransport(script)
        async with AsyncClient(base_url=BASE, token="t", transport=transport) as client:
            return [e.sequence async for e in client.runs.stream_events(RUN_ID, **kwargs)]

    result: list[int] = anyio.run(follow)
    return result


TWINS = [pytest.param(follow_sync, id="sync"), pytest.param(follow_async, id="async")]
Follow = Callable[..., list[int]]


@pytest.mark.parametrize("follow", TWINS)
def test_events_until_the_end(follow: Follow) -> None:
    script = Script("retry: 3000\n\n" + event(1) + ": keep-alive\n\n" + event(2) + END)
    assert follow(script) == [1, 2]
    assert script.resumed == [None]


@pytest.mark.parametrize("follow", TWINS)
def test_a_cut_stream_resumes_after_the_last_event(follow: Follow) -> None:
    script = Script(
        event(1) + event(2),  # closed without its end: the service stopped
        httpx.ConnectError("refused"),  # restarting
        event(3) + END,
    )
    assert follow(script, reconnects=3) == [1, 2, 3]
    assert script.resumed == [None, "2", "2"]


@pytest.mark.parametrize("follow", TWINS)
def test_a_repeated_event_is_not_seen_twice(follow: Follow) -> None:
    script = Script(event(1) + event(2), event(2) + event(3) + END)
    assert follow(script, reconnects=1) == [1, 2, 3]


@pytest.mark.parametrize("follow", TWINS)
def test_a_start_after_a_sequence_is_sent_as_last_event_id(follow: Follow) -> None:
    script = Script(event(6) + END)
    assert follow(script, after=5) == [6]
    assert script.resumed == ["5"]


@pytest.mark.parametrize("follow", TWINS)
def test_it_gives_up_after_failures_in_a_row(follow: Follow) -> None:
    script = Script(httpx.ConnectError("refused"))
    with pytest.raises(APIConnectionError):
        follow(script, reconnects=2)
    assert len(script.resumed) == 3


@pytest.mark.parametrize("follow", TWINS)
def test_an_unknown_run_is_not_found_at_once(follow: Follow) -> None:
    script = Script(problem(404, "run_not_found"))
    with pytest.raises(NotFound):
        follow(script)
    assert len(script.resumed) == 1


@pytest.mark.parametrize("follow", TWINS)
def test_a_restarting_service_is_waited_for(follow: Follow) -> None:
    script = Script(problem(503, "unavailable"), event(1) + END)
    assert follow(script, reconnects=1) == [1]


@pytest.mark.parametrize("follow", TWINS)
def test_the_deadline_ends_the_follow(follow: Follow) -> None:
    script = Script(event(1))  # never ends
    with pytest.raises(APITimeoutError):
        follow(script, timeout=0.3, reconnects=1_000_000)


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        pytest.param(["data: a", ""], [("message", "a", None)], id="data"),
        pytest.param(["data:a", "data: b", ""], [("message", "a\nb", None)], id="two-data-lines"),
        pytest.param(["id: 7", "event: end", "data: x", ""], [("end", "x", "7")], id="fields"),
        pytest.param([": comment", ""], [], id="comment-only"),
        pytest.param(["retry: 10", ""], [], id="retry-only"),
        pytest.param(
            ["data: a", "", "", "data: b", ""],
            [("message", "a", None), ("message", "b", None)],
            id="blank-lines",
        ),
    ],
)
def test_the_decoder(lines: list[str], expected: list[tuple[str, str, str | None]]) -> None:
    decoder = SseDecoder()
    found = [m for m in (decoder.feed(line) for line in lines) if m is not None]
    assert [(m.event, m.data, m.id) for m in found] == expected


def test_events_parse_as_the_model() -> None:
    script = Script(event(1, "run.succeeded") + END)
    with Client(base_url=BASE, token="t", transport=httpx.MockTransport(script)) as client:
        (only,) = list(client.runs.stream_events(RUN_ID))
    assert isinstance(only, Event)
    assert (only.type, only.data) == ("run.succeeded", {"note": "two\nlines"})


@pytest.mark.parametrize("follow", TWINS)
def test_a_full_stream_limit_is_waited_out_then_resumed(follow: Follow) -> None:
    # 429 on a reconnection (a stream half-closed by a restart still counted): wait its
    # Retry-After, then resume after the last event seen.
    full = problem(429, "too_many_requests", limit="per_principal")
    full.headers["retry-after"] = "1"
    script = Script(event(1), full, event(2) + END)
    assert follow(script, reconnects=3) == [1, 2]
    assert script.resumed == [None, "1", "1"]


@pytest.mark.parametrize("follow", TWINS)
def test_a_stream_limit_that_stays_full_is_too_many_requests(follow: Follow) -> None:
    full = problem(429, "too_many_requests", limit="per_principal")
    full.headers["retry-after"] = "0"
    with pytest.raises(TooManyRequests):
        follow(Script(full), reconnects=1)
