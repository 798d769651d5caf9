"""Failing fast while PostgreSQL is unreachable, and stopping without error noise (ADR 0021).

In process: a standby whose lock try fails for want of PostgreSQL tells the store (which then
refuses at once); a refusal is 503 ``unavailable`` with ``Retry-After``; the HTTP server cancels
the requests still running when its shutdown grace ends, with a warning, where uvicorn logs an
error; a fail-stop for a lost database is a warning, one for a bug an error.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterator

import anyio
import httpx
import pytest
from starlette.types import Receive, Scope, Send

from tests.waiting import await_until
from workload_api._http_server import FAIL_STOP_GRACE, HttpServer, server_config
from workload_api.context import RequestContext
from workload_api.lifecycle import Readiness, Service
from workload_api.problems import problem_for, problem_response
from workload_api.readiness import UNAVAILABLE
from workload_domain.errors import Fenced, StoreUnavailable
from workload_engine.clock import SystemClock
from workload_engine.engine import Engine
from workload_engine.memory import InMemoryStore
from workload_engine.mock_executor import MockExecutor
from workload_store_postgres import StoreDown

pytestmark = pytest.mark.anyio

INTERVAL = 0.02
"""The lock check interval of these tests (seconds)."""


class UnreachableLock:
    """A coordinator lock held elsewhere at start-up; then every try fails for want of
    PostgreSQL."""

    epoch: int | None = None

    def __init__(self) -> None:
        self.tries = 0

    async def acquire(self) -> bool:
        self.tries += 1
        if self.tries == 1:
            return False  # another process leads: this one stands by
        raise StoreUnavailable("cannot connect to PostgreSQL to take the coordinator lock")

    async def check(self) -> None:
        return None

    async def release(self) -> None:
        return None


async def test_a_standby_that_cannot_reach_postgresql_tells_the_store() -> None:
    told: list[str] = []
    clock = SystemClock()
    store = InMemoryStore(clock)
    readiness = Readiness()
    service = Service(
        store=store,
        lock=UnreachableLock(),
        engine=Engine(store, MockExecutor(clock=clock), clock),
        clock=clock,
        readiness=readiness,
        standby=True,
        lock_check_interval=INTERVAL,
        on_unreachable=told.append,
    )
    async with service.running():

        async def told_and_unavailable() -> bool:
            return bool(told) and readiness.reason == UNAVAILABLE

        await await_until(told_and_unavailable, message="the store was not told")
    assert "cannot connect to PostgreSQL" in told[0]
    assert service.fault is None  # a standby without PostgreSQL is no fault


def test_a_refusal_is_503_unavailable_with_retry_after() -> None:
    response = problem_response(problem_for(StoreDown("PostgreSQL is unreachable")), "req-1")
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"
    body = json.loads(bytes(response.body))
    assert (body["code"], body["request_id"]) == ("unavailable", "req-1")
    assert "PostgreSQL" not in body["detail"]  # no internals in a 5xx


# -- the HTTP server's shutdown grace ----------------------------------------------------------


class Records(logging.Handler):
    """Every record of the loggers it is attached to."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def at(self, level: int) -> list[str]:
        return [f"{r.name}: {r.getMessage()}" for r in self.records if r.levelno >= level]


@pytest.fixture
def server_logs() -> Iterator[Records]:
    """What uvicorn and our HTTP server log (whatever configured their loggers before)."""
    records = Records()
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "workload.http")]
    for logger in loggers:
        logger.addHandler(records)
    try:
        yield records
    finally:
        for logger in loggers:
            logger.removeHandler(records)


def slow_app(*, stubborn: bool) -> RequestContext:
    """An app whose every request waits until cancelled (and, ``stubborn``, ignores one cancel:
    as psycopg does, cancelling its query on a server that stopped answering)."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            if not stubborn:
                raise
            await asyncio.sleep(60)
            raise

    return RequestContext(app)


@pytest.mark.parametrize(
    ("stubborn", "stops"),
    [(False, 1), (True, 1), (True, 2)],
    ids=["cancellable", "stubborn", "stubborn-stopped-twice"],
)
async def test_requests_outliving_the_grace_are_cancelled_with_a_warning_not_an_error(
    server_logs: Records, stubborn: bool, stops: int
) -> None:
    # Stopped twice: found by the chaos soak, a fail-stop reported by execution and by the
    # lock check lowered uvicorn's backstop to the grace, and uvicorn logged an error.
    server = HttpServer(server_config(slow_app(stubborn=stubborn), host="127.0.0.1", port=0))
    answers: list[httpx.Response | httpx.TransportError] = []
    stopped = anyio.Event()

    async def serve() -> None:
        await server.serve()
        stopped.set()

    async def request(port: int) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            try:
                answers.append(await client.get(f"http://127.0.0.1:{port}/slow"))
            except httpx.TransportError as exc:
                answers.append(exc)

    async def started() -> bool:
        return server.started

    async def in_flight() -> bool:
        return bool(server.server_state.tasks)

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        await await_until(started, message="the server did not start")
        tg.start_soon(request, server.servers[0].sockets[0].getsockname()[1])
        await await_until(in_flight, message="the request never arrived")
        running = set(server.server_state.tasks)
        server.stop(grace=FAIL_STOP_GRACE)  # as a fail-stop does
        for _ in range(stops - 1):
            await anyio.sleep(0.05)  # the shutdown has begun
            server.stop(grace=FAIL_STOP_GRACE)
        # The stop does not wait for uvicorn's own bound (the grace and 5 s more).
        with anyio.fail_after(FAIL_STOP_GRACE + 4):
            await stopped.wait()
        for task in running:  # a stubborn request ends at its second cancel (the loop's end)
            task.cancel()
    assert server_logs.at(logging.ERROR) == []
    warnings = server_logs.at(logging.WARNING)
    assert any("still running at the end of the shutdown grace" in w for w in warnings), warnings
    (answer,) = answers
    assert isinstance(answer, httpx.Response), answer
    assert (answer.status_code, answer.json()["code"]) == (503, "unavailable")


class TellingStore(InMemoryStore):
    """The in-memory store, keeping what the lifecycle asks it to tell of refused writes."""

    on_fenced: Callable[[Fenced], None] | None = None

    def fence(self, epoch: int | None, on_fenced: Callable[[Fenced], None] | None = None) -> None:
        self.on_fenced = on_fenced


@pytest.mark.parametrize(
    ("refused", "reason"),
    [
        (Fenced(7), "fail-stop: a newer coordinator leads: a write of coordinator epoch 7"),
        (Fenced(3, shard=12), "fail-stop: another replica owns a shard: a write to shard 12"),
    ],
)
async def test_a_fenced_write_fail_stops_naming_the_fence_that_refused_it(
    refused: Fenced, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Found by the chaos soak (--replica): a replica whose shard write was refused logged
    # "a newer coordinator leads: a write of coordinator epoch 0 was refused" — there is no
    # coordinator among replicas; the shard and its epoch were lost on the way.
    clock = SystemClock()
    store = TellingStore(clock)
    service = Service(
        store=store,
        lock=None,
        engine=Engine(store, MockExecutor(clock=clock), clock),
        clock=clock,
        readiness=Readiness(),
    )
    async with service.running():
        assert store.on_fenced is not None
        with caplog.at_level(logging.WARNING, logger="workload.coordinator"):
            store.on_fenced(refused)
    assert service.fault is refused
    assert any(r.getMessage().startswith(reason) for r in caplog.records), caplog.text
