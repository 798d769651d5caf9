"""What a broken or hostile server answers never escapes the SDK's errors (docs/sdk.md).

Every failure of a call is a ``WorkloadError``: a body httpx cannot decode, JSON nested deeper
than the parser goes, a listing whose cursors go round in a circle, an event that is not an
event — on both clients. A follow's deadline holds while keep-alives keep arriving, and a
wait's while a server stops answering; a wait goes on through a restart of the service.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import httpx
import pytest

from tests.sdk.fakes import RUN_ID, json_response, page, run_body
from workload_sdk import (
    APIConnectionError,
    APIResponseValidationError,
    APITimeoutError,
    AsyncClient,
    Client,
    ServerError,
    TooManyRequests,
    WaitTimeout,
    WorkloadError,
    from_response,
)

BASE = "http://api.test"
Handler = Callable[[httpx.Request], httpx.Response]


def get_run_sync(handler: Handler) -> None:
    with Client(base_url=BASE, max_retries=0, transport=httpx.MockTransport(handler)) as client:
        client.runs.get(RUN_ID)


def get_run_async(handler: Handler) -> None:
    async def get() -> None:
        transport = httpx.MockTransport(handler)
        async with AsyncClient(base_url=BASE, max_retries=0, transport=transport) as client:
            await client.runs.get(RUN_ID)

    anyio.run(get)


TWINS = [pytest.param(get_run_sync, id="sync"), pytest.param(get_run_async, id="async")]


def gzip_that_is_not(status: int) -> Handler:
    def answer(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "application/json", "content-encoding": "gzip"}
        return httpx.Response(status, headers=headers, content=b"this is not gzip at all")

    return answer


def nested(status: int) -> Handler:
    def answer(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "application/json"}
        return httpx.Response(status, headers=headers, content=b"[" * 200_000)

    return answer


@pytest.mark.parametrize(
    ("handler", "raised"),
    [
        pytest.param(gzip_that_is_not(200), APIResponseValidationError, id="bad-gzip-200"),
        pytest.param(gzip_that_is_not(500), APIResponseValidationError, id="bad-gzip-500"),
        pytest.param(nested(200), APIResponseValidationError, id="nested-200"),
        pytest.param(nested(500), ServerError, id="nested-500"),
    ],
)
@pytest.mark.parametrize("call", TWINS)
def test_a_body_that_cannot_be_read_is_an_sdk_error(
    call: Callable[[Handler], None], handler: Handler, raised: type[WorkloadError]
) -> None:
    with pytest.raises(WorkloadError) as caught:
        call(handler)
    assert type(caught.value) is raised


def circling(requests: list[httpx.Request]) -> Handler:
    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        cursor = request.url.params.get("cursor")
        # a → b → a …: each page names a cursor the listing has followed before.
        return json_response(200, page([], "b" if cursor == "a" else "a"))

    return answer


def test_a_listing_whose_cursors_circle_stops_with_an_error() -> None:
    requests: list[httpx.Request] = []
    transport = httpx.MockTransport(circling(requests))
    with (
        Client(base_url=BASE, transport=transport) as client,
        pytest.raises(APIResponseValidationError, match="repeats one already followed"),
    ):
        list(client.workflows.list())
    assert len(requests) == 3  # the first page, a, b: then a again is refused
    requests.clear()
    with (
        Client(base_url=BASE, transport=transport) as client,
        pytest.raises(APIResponseValidationError),
    ):
        list(client.workflows.list().pages())
    assert len(requests) == 3


def test_an_async_listing_whose_cursors_circle_stops_with_an_error() -> None:
    requests: list[httpx.Request] = []

    async def every() -> None:
        transport = httpx.MockTransport(circling(requests))
        async with AsyncClient(base_url=BASE, transport=transport) as client:
            [w async for w in client.workflows.list()]

    with pytest.raises(APIResponseValidationError):
        anyio.run(every)
    assert len(requests) == 3


STREAM = f"/api/v1/runs/{RUN_ID}/events/stream"
END = b'event: end\ndata: {"run_id": "r", "status": "succeeded"}\n\n'
KEEP_ALIVES = 500
"""Keep-alives 10 ms apart: 5 s of them, then the run's end."""


class Trickle:
    """An event stream of keep-alives only, then its end; counts what it has sent."""

    def __init__(self) -> None:
        self.sent = 0

    def lines(self) -> Iterator[bytes]:
        for _ in range(KEEP_ALIVES):
            time.sleep(0.01)
            self.sent += 1
            yield b": keep-alive\n\n"
        yield END

    async def alines(self) -> AsyncIterator[bytes]:
        for _ in range(KEEP_ALIVES):
            await anyio.sleep(0.01)
            self.sent += 1
            yield b": keep-alive\n\n"
        yield END

    def answer(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == STREAM
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, content=self.lines())

    def aanswer(self, request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, content=self.alines())


def test_a_follow_s_deadline_holds_while_keep_alives_arrive() -> None:
    trickle = Trickle()
    with (
        Client(base_url=BASE, transport=httpx.MockTransport(trickle.answer)) as client,
        pytest.raises(APITimeoutError),
    ):
        list(client.runs.stream_events(RUN_ID, timeout=0.3))
    assert trickle.sent < KEEP_ALIVES / 2  # given up at its deadline, not at the stream's end

    atrickle = Trickle()

    async def follow() -> None:
        transport = httpx.MockTransport(atrickle.aanswer)
        async with AsyncClient(base_url=BASE, transport=transport) as client:
            [e async for e in client.runs.stream_events(RUN_ID, timeout=0.3)]

    with pytest.raises(APITimeoutError):
        anyio.run(follow)
    assert atrickle.sent < KEEP_ALIVES / 2


def not_an_event(request: httpx.Request) -> httpx.Response:
    body = b'id: 1\ndata: {"sequence": "first", "type": 3}\n\n' + END
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def test_an_event_that_is_not_an_event_is_a_response_validation_error() -> None:
    with (
        Client(base_url=BASE, transport=httpx.MockTransport(not_an_event)) as client,
        pytest.raises(APIResponseValidationError, match="is not an event"),
    ):
        list(client.runs.stream_events(RUN_ID))

    async def follow() -> list[Any]:
        transport = httpx.MockTransport(not_an_event)
        async with AsyncClient(base_url=BASE, transport=transport) as client:
            return [e async for e in client.runs.stream_events(RUN_ID)]

    with pytest.raises(APIResponseValidationError, match="is not an event"):
        anyio.run(follow)


@pytest.mark.parametrize("value", ["\u00b2", "\u0661", "1e9", "-1", "1234567", ""])
def test_a_retry_after_that_is_not_ascii_seconds_is_none(value: str) -> None:
    answer = httpx.Response(429, headers={b"retry-after": value.encode("utf-8")})
    error = from_response(answer)
    assert isinstance(error, TooManyRequests)
    assert error.retry_after is None
    plain = from_response(httpx.Response(429, headers={"retry-after": "12"}))
    assert isinstance(plain, TooManyRequests)
    assert plain.retry_after == 12


class Polls:
    """Answers a run's polls from a script (the last answer repeats); records each request."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, httpx.TransportError):
            raise type(answer)(str(answer), request=request)
        if isinstance(answer, Exception):
            raise answer
        return answer


def running() -> httpx.Response:
    return json_response(200, run_body("running"))


def wait_sync(polls: Polls, **kwargs: Any) -> Any:
    transport = httpx.MockTransport(polls)
    with Client(base_url=BASE, max_retries=0, transport=transport) as client:
        return client.runs.wait(RUN_ID, poll_interval=0.02, **kwargs)


def wait_async(polls: Polls, **kwargs: Any) -> Any:
    async def wait() -> Any:
        transport = httpx.MockTransport(polls)
        async with AsyncClient(base_url=BASE, max_retries=0, transport=transport) as client:
            return await client.runs.wait(RUN_ID, poll_interval=0.02, **kwargs)

    return anyio.run(wait)


WAITS = [pytest.param(wait_sync, id="sync"), pytest.param(wait_async, id="async")]


@pytest.mark.parametrize("wait", WAITS)
def test_a_wait_s_polls_wait_no_longer_than_its_deadline(wait: Callable[..., Any]) -> None:
    # A server that stops answering mid-wait: the wait ends at its deadline (WaitTimeout, with
    # the run last seen), each poll reading for the time left, not the client's 30 s.
    polls = Polls(running(), httpx.ReadTimeout("no answer"))
    with pytest.raises(WaitTimeout) as caught:
        wait(polls, timeout=0.3)
    assert caught.value.run.status == "running"
    assert all(r.extensions["timeout"]["read"] <= 1.0 for r in polls.requests)
    assert len(polls.requests) > 2  # polled on after the first unanswered one


@pytest.mark.parametrize("wait", WAITS)
def test_a_wait_goes_on_through_a_restart_of_the_service(wait: Callable[..., Any]) -> None:
    unavailable = httpx.Response(503, json={"code": "unavailable", "detail": "restarting"})
    polls = Polls(
        running(),
        unavailable,
        httpx.ConnectError("refused"),
        json_response(200, run_body("succeeded")),
    )
    assert wait(polls, timeout=10).status == "succeeded"
    assert len(polls.requests) == 4


@pytest.mark.parametrize("wait", WAITS)
def test_a_wait_stops_at_a_failure_that_does_not_pass(wait: Callable[..., Any]) -> None:
    with pytest.raises(ServerError):  # 500: a bug of the service, not a restart
        wait(Polls(running(), httpx.Response(500, json={"detail": "boom"})), timeout=10)
    with pytest.raises(APIConnectionError):  # never reached: nothing to wait for
        wait(Polls(httpx.ConnectError("refused")), timeout=10)
    with pytest.raises(APIConnectionError):  # no deadline: a failure is not waited out for ever
        wait(Polls(running(), httpx.ConnectError("refused")), timeout=None)
