"""A live leader's lease never runs out: renewed from the lock's taking, every interval (ADR 0047).

Found by a red CI: under a slow disk, a standby took over from a live leader mid-test (SPEC §14:
the leader was fenced, exit 5, and its requests were answered 503). A lease (three check
intervals) counts from the *start* of the renewal that set it, but the leader renewed an interval
after the *end* of its last check — two slow checks outlasted the lease — and renewed nothing at
all while it recovered the runs of a database it had just taken. A replica's shard leases had the
first of these faults too (SPEC §16).

The locks and leases here are fakes at the port that count a lease from a renewal's start and
treat it as lost for good once it ran out, as an eager standby or replica would take it over.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import cast

import anyio
import pytest

from tests.api.test_membership_renewals import (
    EagerPeerLeases,
    NoticeStore,
    SlowRecoveryEngine,
)
from workload_api.lifecycle import Readiness, Service
from workload_api.membership import Membership
from workload_domain.errors import LockLost
from workload_domain.ports import Store
from workload_domain.shards import ClusterPicture, ShardFence
from workload_engine.clock import SystemClock
from workload_engine.engine import Engine
from workload_engine.memory import InMemoryStore
from workload_engine.mock_executor import MockExecutor

pytestmark = pytest.mark.anyio

INTERVAL = 0.5
"""The lock check interval of these tests (seconds); a lease is three of them."""
LEASE = 3 * INTERVAL
SLOW = 2 * INTERVAL
"""How long a slow renewal takes: one interval of margin is left to the lease."""


class EagerStandbyLock:
    """A coordinator lock whose lease is lost for good once it ran out; renewals take ``slow``."""

    def __init__(self, slow: float = 0.0) -> None:
        self.epoch: int | None = None
        self.slow = slow
        self.expires = 0.0
        self.renewals: list[float] = []

    async def acquire(self) -> bool:
        self.epoch = 1
        self.expires = anyio.current_time() + LEASE
        return True

    async def check(self) -> None:
        started = anyio.current_time()
        self.renewals.append(started)
        if started > self.expires:
            raise LockLost(f"the lease ran out {started - self.expires:.3f} s before the renewal")
        await anyio.sleep(self.slow)  # e.g. the commit waits for a slow disk
        self.expires = started + LEASE  # PostgreSQL's now() is the statement's start

    async def release(self) -> None:
        return None


def leader(
    monkeypatch: pytest.MonkeyPatch, lock: EagerStandbyLock, recovery: float = 0.0
) -> tuple[Service, Readiness]:
    clock = SystemClock()
    store = InMemoryStore(clock)
    engine = Engine(store, MockExecutor(clock=clock), clock)
    recover = engine.recover

    async def slow_recovery(page_size: int = 500, shards: object = None) -> int:
        await anyio.sleep(recovery)  # a backlog of unfinished runs
        return await recover(page_size)

    monkeypatch.setattr(engine, "recover", slow_recovery)
    readiness = Readiness()
    service = Service(
        store=store,
        lock=lock,
        engine=engine,
        clock=clock,
        readiness=readiness,
        lock_check_interval=INTERVAL,
    )
    return service, readiness


async def test_a_leader_renews_its_lease_while_it_recovers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lock = EagerStandbyLock()
    recovery = 3 * LEASE
    service, readiness = leader(monkeypatch, lock, recovery)
    taken = anyio.current_time()
    with anyio.fail_after(recovery + 30):
        async with service.running():
            recovered = anyio.current_time()
            await anyio.sleep(LEASE)
    assert service.fault is None, f"the leader fail-stopped: {service.fault}"
    assert readiness.reason == "stopping"
    during = [t for t in lock.renewals if taken < t < recovered]
    assert len(during) >= 3, f"renewals during a recovery of three leases: {during}"


async def test_slow_renewals_of_a_leader_keep_its_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    lock = EagerStandbyLock(slow=SLOW)
    service, _ = leader(monkeypatch, lock)
    with anyio.fail_after(60):
        async with service.running():
            await anyio.sleep(3 * LEASE)
    assert service.fault is None, f"the leader fail-stopped: {service.fault}"
    assert len(lock.renewals) >= 3, f"renewals: {lock.renewals}"


class SlowLeases(EagerPeerLeases):
    """Shard leases of :data:`LEASE` counted from a renewal's start; renewals take ``slow``."""

    slow = SLOW

    async def renew(self, held: Collection[ShardFence]) -> ClusterPicture:
        started = anyio.current_time()
        self.renewals.append(started)
        lost = tuple(f.shard for f in held if self.expires.get(f.shard, started) < started)
        if lost:
            raise AssertionError(f"the leases of {lost} ran out before a renewal")
        await anyio.sleep(self.slow)
        for fence in held:
            self.expires[fence.shard] = started + LEASE
        return self.picture(held)

    async def take(self, shard: int) -> ShardFence | None:
        fence = await super().take(shard)
        self.expires[shard] = anyio.current_time() + LEASE
        return fence


async def test_slow_renewals_of_a_replica_keep_its_shards() -> None:
    leases = SlowLeases()
    membership = Membership(
        leases=leases,
        engine=cast(Engine, SlowRecoveryEngine()),
        store=cast(Store, NoticeStore()),
        readiness=Readiness(),
        check_interval=INTERVAL,
        handoff_seconds=1,
    )
    await membership.join()
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(membership.run)
            await membership.first_round.wait()
            renewed = len(leases.renewals)
            await anyio.sleep(3 * LEASE)
            leases.slow = 0.0  # the hand-over on the stop is not what this test is about
            membership.stop()
            await membership.left.wait()
    assert len(leases.renewals) - renewed >= 3, f"renewals: {leases.renewals}"
    assert membership.ownership is not None
    assert membership.ownership.held == ()  # every shard handed over on the stop, none lost
