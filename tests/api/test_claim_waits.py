"""A long-poll claim's looks and its caps, in the use case (ADR 0025; issue 33, D1).

- The request's first look records the worker; a look after a wake-up that finds nothing
  writes nothing (``record_seen`` false), so idle claims woken by work another takes cost no
  write.
- Claims past a worker id's or a principal's cap are refused before any store work, with the
  seconds after which to try again; a claim that ends gives its place back.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import anyio
import pytest

from tests.engine.harness import Harness
from tests.waiting import await_until
from workload_api.usecases.workers import CLAIM_RETRY_AFTER, WorkerUseCases
from workload_domain.errors import InvalidArgument, TooManyRequests
from workload_domain.workers import Claim, ClaimedAttempt
from workload_engine.clock import FakeClock
from workload_engine.memory import InMemoryStore
from workload_engine.remote import RemoteAttempts
from workload_engine.signals import WorkSignal

pytestmark = pytest.mark.anyio

BODY: dict[str, Any] = {"queues": ["default"], "actions": ["resize"], "wait_seconds": 30}


class RecordingStore(InMemoryStore):
    """The in-memory store, keeping every claim it is asked."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.claims: list[Claim] = []

    async def claim(self, claim: Claim, now: datetime) -> Sequence[ClaimedAttempt]:
        self.claims.append(claim)
        return await super().claim(claim, now)


def usecases(
    per_worker: int = 16, per_principal: int = 256
) -> tuple[WorkerUseCases, RecordingStore, WorkSignal]:
    clock = FakeClock()
    store = RecordingStore(clock)
    h = Harness(store=store, clock=clock)
    signal = WorkSignal()
    workers = WorkerUseCases(
        store,
        remote=RemoteAttempts(store, h.engine),
        signal=signal,
        clock=clock,
        max_waiting_per_worker=per_worker,
        max_waiting_per_principal=per_principal,
    )
    return workers, store, signal


async def _until(condition: Callable[[], bool]) -> None:
    async def check() -> bool:
        return condition()

    await await_until(check, within=5, interval=0.001, message="the claims did not get there")


async def test_a_look_after_a_wake_up_records_nothing() -> None:
    workers, store, signal = usecases()
    gone = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(workers.claim, "w1", BODY, gone)
        await _until(lambda: len(store.claims) == 1 and signal.waiting == 1)
        signal.notify([("default", "resize")])  # work another claimer took first
        await _until(lambda: len(store.claims) == 2)
        signal.notify(None)  # a notification that names nothing
        await _until(lambda: len(store.claims) == 3)
        gone.set()
    assert [c.record_seen for c in store.claims] == [True, False, False]
    (worker,) = (await store.page_workers(None, 10)).items
    assert worker.worker_id == "w1"


async def test_claims_past_a_worker_ids_cap_are_refused_before_any_look() -> None:
    workers, store, _ = usecases(per_worker=2, per_principal=10)
    gone = anyio.Event()
    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(functools.partial(workers.claim, "w1", BODY, gone, principal="p"))
        await _until(lambda: len(store.claims) == 2)
        with pytest.raises(TooManyRequests) as refused:
            await workers.claim("w1", BODY, principal="p")
        assert (refused.value.limit, refused.value.retry_after) == (
            "per_worker",
            CLAIM_RETRY_AFTER,
        )
        assert refused.value.code == "too_many_requests"
        assert len(store.claims) == 2  # no look for the refused one
        assert await workers.claim("w2", {**BODY, "wait_seconds": 0}, principal="p") == {
            "attempts": []
        }
        gone.set()
    assert workers.claims.held("per_worker", "w1") == 0
    assert workers.claims.held("per_principal", "p") == 0
    assert await workers.claim("w1", {**BODY, "wait_seconds": 0}, principal="p") == {"attempts": []}


async def test_claims_past_a_principals_cap_are_refused() -> None:
    workers, _, _ = usecases(per_worker=5, per_principal=3)
    gone = anyio.Event()
    async with anyio.create_task_group() as tg:
        for n in range(3):
            tg.start_soon(functools.partial(workers.claim, f"w{n}", BODY, gone, principal="p"))
        await _until(lambda: workers.claims.held("per_principal", "p") == 3)
        with pytest.raises(TooManyRequests) as refused:
            await workers.claim("w9", BODY, principal="p")
        assert refused.value.limit == "per_principal"
        # Another token is counted apart.
        assert await workers.claim("w9", {**BODY, "wait_seconds": 0}, principal="q") == {
            "attempts": []
        }
        gone.set()


async def test_a_malformed_claim_holds_no_place() -> None:
    workers, store, _ = usecases(per_worker=1)
    for _ in range(3):
        with pytest.raises(InvalidArgument):
            await workers.claim("w1", {"queues": [], "actions": ["resize"]}, principal="p")
    assert workers.claims.held("per_worker", "w1") == 0
    assert store.claims == []
