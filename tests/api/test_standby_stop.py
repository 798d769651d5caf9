"""A standby on its way out does not take over (SPEC §14; found by the signals review).

Between its stop (SIGTERM: not ready, ``stopping``) and its exit, uvicorn drains the requests in
flight, for up to the shutdown grace. A standby that went on trying the lock meanwhile could take
it from a leader that just died, bump the epoch, recover every run, and interrupt them all a
moment later, while another standby, the one staying, waited for the lock.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from tests.waiting import await_until
from workload_api.lifecycle import Readiness, Service
from workload_domain.shards import Member
from workload_engine.clock import SystemClock
from workload_engine.engine import Engine
from workload_engine.memory import InMemoryStore
from workload_engine.mock_executor import MockExecutor

pytestmark = pytest.mark.anyio

INTERVAL = 0.02
"""The lock check interval of these tests (seconds)."""


class Lock:
    """A coordinator lock held elsewhere until ``free``; counts what the standby does."""

    def __init__(self) -> None:
        self.epoch: int | None = None
        self.free = False
        self.tries = 0
        self.released = 0
        self.on_acquire: list[Callable[[], None]] = []

    async def acquire(self) -> bool:
        self.tries += 1
        for hook in self.on_acquire:
            hook()
        if self.free:
            self.epoch = 1
        return self.free

    async def check(self) -> None:
        return None

    async def release(self) -> None:
        self.released += 1


def standby(lock: Lock) -> tuple[Service, Readiness]:
    clock = SystemClock()
    store = InMemoryStore(clock)
    readiness = Readiness()
    service = Service(
        store=store,
        lock=lock,
        engine=Engine(store, MockExecutor(clock=clock), clock),
        clock=clock,
        readiness=readiness,
        standby=True,
        lock_check_interval=INTERVAL,
    )
    return service, readiness


async def leads(readiness: Readiness) -> None:
    async def leading() -> bool:
        return readiness.leading

    await await_until(leading, within=10, message="the standby did not take the lock")


async def tried_again(lock: Lock, more_than: int) -> None:
    async def check() -> bool:
        return lock.tries > more_than

    await await_until(check, within=10, message="the standby does not retry the lock")


async def test_a_stopping_standby_no_longer_tries_the_lock() -> None:
    lock = Lock()
    service, readiness = standby(lock)
    async with service.running():
        assert readiness.role == "standby"
        await tried_again(lock, 2)
        service.stopping()  # as SIGTERM does; HTTP drains from here
        lock.free = True  # and the leader dies
        tries = lock.tries
        await anyio.sleep(INTERVAL * 10)  # ten check intervals of the drain
        assert lock.tries == tries, "a stopping standby tried the lock"
        assert not readiness.leading
        assert readiness.reason == "stopping"


async def test_a_standby_stopped_while_it_takes_the_lock_gives_it_back() -> None:
    lock = Lock()
    service, readiness = standby(lock)
    async with service.running():
        await tried_again(lock, 1)
        lock.free = True
        lock.on_acquire.append(service.stopping)  # the stop comes during the try
        tries = lock.tries
        await tried_again(lock, tries)
        await anyio.sleep(INTERVAL * 10)
        assert lock.released == 1, "the lock taken while stopping was kept"
        assert not readiness.leading
        assert lock.tries == tries + 1


@pytest.mark.parametrize("end", ["stopping", "failed"])
async def test_a_leader_stopping_or_failed_says_it_owns_no_shard(end: str) -> None:
    # The no-leader alert reads leader and shards owned together: a leader on its way out
    # (or failed) must not look as if it still executed every shard.
    lock = Lock()
    lock.free = True
    service, readiness = standby(lock)
    async with service.running():
        await leads(readiness)
        assert readiness.shards_owned > 0
        if end == "stopping":
            service.stopping()
        else:
            service.fail("lost the lock", RuntimeError("the test's"))
        assert (readiness.leading, readiness.shards_owned) == (False, 0)


async def test_a_standby_stopped_while_it_starts_to_lead_does_not_say_it_leads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The stop (SIGTERM) comes between the lock and the readiness fields of the new leader.
    lock = Lock()
    lock.free = True
    service, readiness = standby(lock)
    store = service.store
    cluster = store.cluster

    async def cluster_then_stop() -> tuple[int, tuple[Member, ...]]:
        found = await cluster()
        service.stopping()
        return found

    monkeypatch.setattr(store, "cluster", cluster_then_stop)
    async with service.running():

        async def took() -> bool:
            return lock.epoch is not None

        await await_until(took, within=10, message="the standby did not take the lock")
        await anyio.sleep(INTERVAL * 10)
        assert (readiness.leading, readiness.shards_owned) == (False, 0)


def test_a_failed_replica_owns_no_shard_whatever_its_leases_say() -> None:
    readiness = Readiness()
    readiness.replica_id = "r1"
    readiness.shards_owned = 5
    readiness.set(True, "ready")
    assert readiness.shards_owned == 5
    readiness.set(False, "failed")
    readiness.shards_owned = 5  # a renewal publishes after the fail-stop
    assert readiness.shards_owned == 0
