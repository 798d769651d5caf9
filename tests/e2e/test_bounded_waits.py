"""Claims and event streams that cannot be multiplied (ADR 0025; issue 33, D1 and D4).

- Queued work wakes only the waiting claims that could take it: idle long-polls on another
  queue cost no store work, however many there are.
- A worker id and a worker token hold only so many claims at once, a principal and a run only
  so many event streams: past a cap, 429 ``too_many_requests`` with ``Retry-After``, before
  any store work.
- The streams of one run share one reader: one store read per change, not one per stream;
  each still gets every event once, in order, and resumes from its own ``Last-Event-ID``.

Store work is counted at the port (:class:`CountingStore`, the real PostgreSQL store).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import anyio
import httpx
import pytest
from dependency_injector import providers

from tests.e2e.test_event_stream import listed_sequences
from tests.plugins.live_api import (
    OPERATOR_TOKEN,
    VIEWER_TOKEN,
    WORKER_TOKEN,
    LiveApi,
    settings,
)
from tests.waiting import await_until, wait_until
from workload_api.container import Container
from workload_api.settings import Settings
from workload_domain.records import EventRecord, RunRecord
from workload_domain.workers import Claim, ClaimedAttempt
from workload_store_postgres.store import PostgresStore

V1 = "/api/v1"
_keys = itertools.count()
IDLE_CLAIMS = 50
RUNS = 10
CAPS = {
    "max_waiting_claims_per_worker": 2,
    "max_waiting_claims_per_principal": 5,
    "max_streams_per_principal": 24,
    "max_streams_per_run": 21,
}


class CountingStore(PostgresStore):
    """The PostgreSQL store, counting the claims and event reads asked of it (per run)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.claims = 0
        self.claims_of_queue: Counter[str] = Counter()
        self.event_reads: Counter[str] = Counter()
        self.run_reads: Counter[str] = Counter()

    async def claim(self, claim: Claim, now: datetime) -> Sequence[ClaimedAttempt]:
        self.claims += 1
        self.claims_of_queue.update(claim.queues)
        return await super().claim(claim, now)

    async def list_events(
        self, run_id: str, after_sequence: int = 0, limit: int | None = None
    ) -> Sequence[EventRecord]:
        self.event_reads[run_id] += 1
        return await super().list_events(run_id, after_sequence, limit)

    async def get_run(self, run_id: str) -> RunRecord:
        self.run_reads[run_id] += 1
        return await super().get_run(run_id)


def counting(container: Container) -> None:
    """Count at the port: the PostgreSQL store of a ``postgres`` backend, counting."""
    real = container.settings()
    if real.database_url is None:
        return  # the in-memory backend keeps its store
    container.store.override(
        providers.Singleton(
            CountingStore,
            real.database_url,
            max_size=real.pool_max_size,
            statement_timeout_ms=real.statement_timeout_ms,
            verify_schema=True,
        )
    )


def counted(api: LiveApi) -> CountingStore:
    store = api.container.store()
    assert isinstance(store, CountingStore)
    return store


@pytest.fixture
def api_overrides() -> Callable[[Container], None]:
    return counting


@pytest.fixture
def api_settings(request: pytest.FixtureRequest) -> Settings:
    """Low caps, unless a test asks for other settings (``indirect`` parametrization)."""
    overrides: dict[str, Any] = getattr(request, "param", CAPS)
    return settings(**overrides)


def idem() -> dict[str, str]:
    return {"Idempotency-Key": f"waits-{next(_keys)}"}


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


def claim_body(queue: str = "default", wait: float = 20) -> dict[str, Any]:
    return {"queues": [queue], "actions": ["resize"], "wait_seconds": wait}


def client(api: LiveApi, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=api.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )


async def long_poll(
    http: httpx.AsyncClient, worker_id: str, queue: str, answered: list[int]
) -> None:
    response = await http.post(f"{V1}/workers/{worker_id}/claim", json=claim_body(queue, 50))
    answered.append(response.status_code)


async def until(condition: Callable[[], bool], message: str) -> None:
    """Wait until ``condition`` holds (it reads the service's state: no I/O)."""

    async def check() -> bool:
        return condition()

    await await_until(check, message=message)


def waiting_claims(api: LiveApi) -> int:
    return api.container.engine().work_signal.waiting


# -- D1: idle claims on other queues ---------------------------------------------------------


@pytest.mark.real_http_only
@pytest.mark.anyio
@pytest.mark.parametrize("api_settings", [{}], indirect=True, ids=["default-caps"])
async def test_idle_claims_on_another_queue_cost_no_store_work(live_api: LiveApi) -> None:
    create(live_api, "remote", [{"key": "r", "action": "resize"}])
    store = counted(live_api)
    answered: list[int] = []
    async with client(live_api, WORKER_TOKEN) as http, anyio.create_task_group() as idle:
        for i in range(IDLE_CLAIMS):
            idle.start_soon(long_poll, http, f"idle-{i}", "other", answered)
        await until(
            lambda: waiting_claims(live_api) == IDLE_CLAIMS and store.claims >= IDLE_CLAIMS,
            "the idle claims are not all waiting",
        )
        before = store.claims
        for _ in range(RUNS):
            run_id = await anyio.to_thread.run_sync(start, live_api, "remote")
            response = await http.post(f"{V1}/workers/busy/claim", json=claim_body(wait=20))
            assert response.status_code == 200, response.text
            (item,) = response.json()["attempts"]
            assert item["run_id"] == run_id
            done = await http.post(
                f"{V1}/attempts/{item['attempt_id']}/complete",
                json={"lease_token": item["lease_token"], "output": {}},
            )
            assert done.status_code == 200, done.text
        looks = store.claims - before
        assert answered == []  # the idle claims all still wait
        idle.cancel_scope.cancel()
    # Each run's claim looked once or twice (a look may find the attempt not yet committed);
    # before ADR 0025 each queued attempt also woke the 50 idle claims: 500 more looks.
    assert looks <= 3 * RUNS, f"{looks} store claims for {RUNS} runs"


# -- caps on waiting claims --------------------------------------------------------------------


def refused(response: httpx.Response, limit: str) -> None:
    assert response.status_code == 429, response.text
    body = response.json()
    assert (body["code"], body["limit"]) == ("too_many_requests", limit), body
    assert body["type"] == "urn:workload:problem:too_many_requests"
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.headers["retry-after"].isdigit(), response.headers
    assert int(response.headers["retry-after"]) >= 1


@pytest.mark.real_http_only
@pytest.mark.anyio
async def test_claims_past_a_workers_cap_are_429_with_retry_after(live_api: LiveApi) -> None:
    store = counted(live_api)
    answered: list[int] = []
    async with client(live_api, WORKER_TOKEN) as http, anyio.create_task_group() as held:
        for _ in range(2):
            held.start_soon(long_poll, http, "w1", "default", answered)
        await until(lambda: waiting_claims(live_api) == 2, "not waiting")
        # On a queue of its own, so that a waiting claim woken meanwhile cannot count as its look.
        extra = await http.post(f"{V1}/workers/w1/claim", json=claim_body("capped", wait=0))
        refused(extra, "per_worker")
        assert store.claims_of_queue["capped"] == 0  # refused before any store work
        # Another worker id of the same token is under its caps.
        other = await http.post(f"{V1}/workers/w2/claim", json=claim_body(wait=0))
        assert other.status_code == 200, other.text
        held.cancel_scope.cancel()
    # The hung-up claims gave their places back: w1 claims again.
    async with client(live_api, WORKER_TOKEN) as http:
        await until(lambda: waiting_claims(live_api) == 0, "still held")
        again = await http.post(f"{V1}/workers/w1/claim", json=claim_body(wait=0))
        assert again.status_code == 200, again.text
    assert answered == []


@pytest.mark.real_http_only
@pytest.mark.anyio
async def test_claims_past_a_tokens_cap_are_429(live_api: LiveApi) -> None:
    answered: list[int] = []
    async with client(live_api, WORKER_TOKEN) as http, anyio.create_task_group() as held:
        for i in range(5):
            held.start_soon(long_poll, http, f"w{i}", "default", answered)
        await until(lambda: waiting_claims(live_api) == 5, "not waiting")
        refused(
            await http.post(f"{V1}/workers/fresh/claim", json=claim_body(wait=0)),
            "per_principal",
        )
        held.cancel_scope.cancel()


@pytest.mark.real_http
@pytest.mark.parametrize(
    "body",
    [{"queues": [], "actions": ["resize"]}, {"queues": ["default"]}, {"wait_seconds": 51}],
    ids=["no-queue", "no-actions", "too-long-wait"],
)
def test_a_malformed_claim_holds_no_place(live_api: LiveApi, body: dict[str, Any]) -> None:
    for _ in range(CAPS["max_waiting_claims_per_principal"] + 1):
        response = live_api.worker.post(f"{V1}/workers/w1/claim", json=body)
        assert response.status_code == 400, response.text
    assert live_api.container.workers().claims.held("per_worker", "w1") == 0
    ok = live_api.worker.post(f"{V1}/workers/w1/claim", json=claim_body(wait=0))
    assert ok.status_code == 200, ok.text


# -- event streams -----------------------------------------------------------------------------


def remote_run(api: LiveApi, workflow_id: str) -> str:
    """A run whose one task is remote and unserved: it stays running until canceled."""
    create(api, workflow_id, [{"key": "r", "action": "resize"}])
    return start(api, workflow_id)


async def open_stream(
    http: httpx.AsyncClient, run_id: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    request = http.build_request("GET", f"{V1}/runs/{run_id}/events/stream", headers=headers)
    return await http.send(request, stream=True)


@pytest.mark.real_http_only
@pytest.mark.anyio
async def test_streams_past_a_runs_or_a_principals_cap_are_429(live_api: LiveApi) -> None:
    runs = [remote_run(live_api, f"capped-{i}") for i in range(3)]
    store = counted(live_api)
    opened: list[httpx.Response] = []
    async with client(live_api, VIEWER_TOKEN) as http:
        try:
            for _ in range(21):
                opened.append(await open_stream(http, runs[0]))
            assert [r.status_code for r in opened] == [200] * 21
            reads = store.run_reads[runs[0]]
            one_more = await open_stream(http, runs[0])
            await one_more.aread()
            refused(one_more, "per_run")
            assert store.run_reads[runs[0]] == reads  # refused before the run is even read
            # Another principal is capped apart, but the run's cap is the run's.
            async with client(live_api, OPERATOR_TOKEN) as operator:
                other = await open_stream(operator, runs[0])
                await other.aread()
                refused(other, "per_run")
            for _ in range(3):
                opened.append(await open_stream(http, runs[1]))
            assert opened[-1].status_code == 200
            past = await open_stream(http, runs[2])
            await past.aread()
            refused(past, "per_principal")
        finally:
            for response in opened:
                await response.aclose()
        # Closed streams give their places back.
        streams = live_api.container.streams()
        await until(
            lambda: (
                streams.feeds == 0
                and all(streams.open_streams.held("per_run", run) == 0 for run in runs)
            ),
            "streams still held",
        )
        again = await open_stream(http, runs[2])
        assert again.status_code == 200
        await again.aclose()


FOLLOWERS = 20
GATED: list[dict[str, Any]] = [
    {"key": "gate", "action": "resize"},
    *(
        {"key": f"t{n}", "action": "mock", "depends_on": ["gate" if n == 0 else f"t{n - 1}"]}
        for n in range(5)
    ),
]


async def follow(
    http: httpx.AsyncClient, run_id: str, seen: list[int], stop_after: int | None = None
) -> bool:
    """Read the run's stream into ``seen`` (resuming after its last); True if it ended."""
    headers = {"Last-Event-ID": str(seen[-1])} if seen else {}
    async with http.stream("GET", f"{V1}/runs/{run_id}/events/stream", headers=headers) as response:
        assert response.status_code == 200
        event, ident = "message", None
        async for line in response.aiter_lines():
            if line:
                name, _, value = line.partition(":")
                if name == "id":
                    ident = value.strip()
                elif name == "event":
                    event = value.strip()
                continue
            if event == "end":
                return True
            if ident is not None:
                seen.append(int(ident))
                if stop_after is not None and len(seen) >= stop_after:
                    return False
            event, ident = "message", None
    return False


def queued_sequences(api: LiveApi, run_id: str) -> list[int] | None:
    """The run's event sequences once its gate is queued (nothing happens after, until it is
    claimed), else None."""
    response = api.viewer.get(f"{V1}/runs/{run_id}/events", params={"limit": 200})
    assert response.status_code == 200, response.text
    items = response.json()["items"]
    if "attempt.queued" not in {e["type"] for e in items}:
        return None
    return [e["sequence"] for e in items]


@pytest.mark.real_http_only
@pytest.mark.anyio
@pytest.mark.parametrize(
    "api_settings",
    [{"max_streams_per_run": 50, "max_streams_per_principal": 50}],
    indirect=True,
    ids=["room-for-resumes"],
)
async def test_the_streams_of_a_run_share_one_reader(live_api: LiveApi) -> None:
    create(live_api, "gated", GATED)
    run_id = start(live_api, "gated")
    first = wait_until(lambda: queued_sequences(live_api, run_id), message="the gate is queued")
    store = counted(live_api)
    seen: list[list[int]] = [[] for _ in range(FOLLOWERS)]
    ended: list[bool] = []
    resumed = 5  # these hang up after a few events and resume with Last-Event-ID

    async def follower(n: int) -> None:
        if n < resumed:
            assert not await follow(http, run_id, seen[n], stop_after=len(first) + 2 + n)
        ended.append(await follow(http, run_id, seen[n]))

    async with client(live_api, VIEWER_TOKEN) as http, anyio.create_task_group() as tg:
        for n in range(FOLLOWERS):
            tg.start_soon(follower, n)
        await until(lambda: all(s == first for s in seen), "the streams did not all catch up")
        # Every stream is open and has read the run so far (each once, from its position).
        reads = store.event_reads[run_id]
        response = await client_claim(live_api)
        (item,) = response.json()["attempts"]
        done = await anyio.to_thread.run_sync(
            lambda: live_api.worker.post(
                f"{V1}/attempts/{item['attempt_id']}/complete",
                json={"lease_token": item["lease_token"], "output": {}},
            )
        )
        assert done.status_code == 200, done.text
    everything = await anyio.to_thread.run_sync(listed_sequences, live_api, run_id)
    assert ended == [True] * FOLLOWERS
    for n in range(FOLLOWERS):
        assert seen[n] == everything, n  # every event once, in order, resumes included
    new = len(everything) - len(first)
    shared = store.event_reads[run_id] - reads
    # One read per change (fewer: a read may take several commits' events), plus a few: each
    # resumed stream's own first read, a recheck. Without a shared reader: one per stream per
    # change, 20 times as many.
    assert shared <= new + resumed + 3, f"{shared} reads for {new} new events"


async def client_claim(api: LiveApi) -> httpx.Response:
    async with client(api, WORKER_TOKEN) as http:
        response = await http.post(f"{V1}/workers/gate/claim", json=claim_body(wait=10))
    assert response.status_code == 200, response.text
    return response
