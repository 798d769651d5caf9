"""A replica's leases stay renewed while it recovers the runs of shards it just took (SPEC §16).

Found by the chaos soak (``--replica``): a replica that took many shards at once recovered their
runs inside its balancing round, renewed nothing meanwhile, and on a busy machine the recovery
outlasted the lease (three check intervals). Another replica took the shards, and the next
renewal fail-stopped the first one — with no fault injected. Here the leases are a fake at the
port that treats a lease as lost once it ran out (as an eager peer would take it), and the
engine's recovery takes ten check intervals.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, cast

import anyio
import pytest

from workload_api.membership import Membership
from workload_api.readiness import Readiness
from workload_domain.errors import ShardsLost, StoreUnavailable, SystemFault
from workload_domain.ports import Store
from workload_domain.shards import ClusterPicture, ShardFence
from workload_engine.engine import Engine

INTERVAL = 0.2
LEASE = 3 * INTERVAL
RECOVERY = 10 * INTERVAL
SHARDS = 4

pytestmark = pytest.mark.anyio


class EagerPeerLeases:
    """Leases that are lost for good once they ran out (another replica would take them)."""

    replica_id = "replica-a"

    def __init__(self) -> None:
        self.expires: dict[int, float] = {}
        self.epochs: dict[int, int] = {}
        self.renewals: list[float] = []
        self.departed = False

    async def join(self) -> int:
        return SHARDS

    async def renew(self, held: Collection[ShardFence]) -> ClusterPicture:
        now = anyio.current_time()
        self.renewals.append(now)
        lost = tuple(f.shard for f in held if self.expires.get(f.shard, now) < now)
        if lost:
            raise ShardsLost(f"lost {lost}: the leases ran out", lost)
        for fence in held:
            self.expires[fence.shard] = now + LEASE
        return self.picture(held)

    def picture(self, held: Collection[ShardFence]) -> ClusterPicture:
        """The cluster as this one replica, holding ``held``, sees it."""
        mine = {f.shard for f in held}
        return ClusterPicture(
            shards_total=SHARDS,
            members=(self.replica_id,),
            free=tuple(s for s in range(SHARDS) if s not in mine),
            owned={self.replica_id: len(mine)},
        )

    async def take(self, shard: int) -> ShardFence | None:
        self.epochs[shard] = self.epochs.get(shard, 0) + 1
        self.expires[shard] = anyio.current_time() + LEASE
        return ShardFence(shard, self.epochs[shard])

    async def give(self, fence: ShardFence) -> None:
        self.expires.pop(fence.shard, None)

    async def depart(self) -> None:
        self.departed = True

    async def leave(self) -> None:
        self.expires.clear()


class SlowRecoveryEngine:
    """The engine's part a membership uses; its recovery takes :data:`RECOVERY` seconds."""

    def __init__(self) -> None:
        self.ownership: Any = None
        self.recovered: list[Sequence[int]] = []

    async def recover(self, page_size: int = 500, shards: Sequence[int] | None = None) -> int:
        await anyio.sleep(RECOVERY)
        self.recovered.append(tuple(shards or ()))
        return 0

    async def hand_off(self, shard: int, grace: float) -> int:
        return 0


class NoticeStore:
    def shard_notices(self, total: int | None) -> None:
        del total


async def test_leases_are_renewed_while_taken_shards_are_recovered() -> None:
    leases = EagerPeerLeases()
    engine = SlowRecoveryEngine()
    membership = Membership(
        leases=leases,
        engine=cast(Engine, engine),
        store=cast(Store, NoticeStore()),
        readiness=Readiness(),
        check_interval=INTERVAL,
        handoff_seconds=1,
    )
    await membership.join()
    async with anyio.create_task_group() as tg:
        tg.start_soon(membership.run)
        with anyio.fail_after(RECOVERY + 10):
            await membership.first_round.wait()  # took every shard, recovered them
        recovered_at = anyio.current_time()
        await anyio.sleep(3 * INTERVAL)  # a few more rounds: the leases must still be held
        membership.stop()
        with anyio.fail_after(10):
            await membership.left.wait()
    assert engine.recovered == [(0, 1, 2, 3)]
    during = [t for t in leases.renewals if recovered_at - RECOVERY < t < recovered_at]
    assert len(during) >= 2, f"renewals during the recovery: {during}"
    assert membership.ownership is not None
    assert membership.ownership.held == ()  # every shard handed over on the stop, none lost


class FailingLeases(EagerPeerLeases):
    """The second renewal fails, as one does when the membership's connection is gone."""

    async def renew(self, held: Collection[ShardFence]) -> ClusterPicture:
        if self.renewals:
            raise ShardsLost("renewing the shard leases failed: the connection is gone")
        return await super().renew(held)


async def test_a_lost_membership_is_its_own_error_not_a_group() -> None:
    # The lifecycle logs a fail-stop of a ShardsLost as the expected fault it is (a warning
    # naming the cause); inside an exception group it was an error saying only "unhandled
    # errors in a TaskGroup".
    membership = Membership(
        leases=FailingLeases(),
        engine=cast(Engine, SlowRecoveryEngine()),
        store=cast(Store, NoticeStore()),
        readiness=Readiness(),
        check_interval=INTERVAL,
    )
    await membership.join()
    with anyio.fail_after(RECOVERY + 10), pytest.raises(ShardsLost, match="connection is gone"):
        await membership.run()


class Outage:
    """One moment at which every use of the database fails together (all backends gone)."""

    def __init__(self) -> None:
        self.now = anyio.Event()
        self.waiting = 0
        self.both_waiting = anyio.Event()

    async def wait(self) -> None:
        """Wait for the moment; the second to wait starts it."""
        self.waiting += 1
        if self.waiting == 2:
            self.both_waiting.set()
        await self.now.wait()


class LeasesLostInTheOutage(EagerPeerLeases):
    def __init__(self, outage: Outage) -> None:
        super().__init__()
        self.outage = outage

    async def renew(self, held: Collection[ShardFence]) -> ClusterPicture:
        if self.renewals:  # the renewal beside the round's recovery
            await self.outage.wait()
            raise ShardsLost("renewing the shard leases failed: the connection is gone")
        return await super().renew(held)


class RecoveryFailingInTheOutage(SlowRecoveryEngine):
    def __init__(self, outage: Outage) -> None:
        super().__init__()
        self.outage = outage

    async def recover(self, page_size: int = 500, shards: Sequence[int] | None = None) -> int:
        await self.outage.wait()
        raise StoreUnavailable("PostgreSQL is unavailable: terminating connection")


async def test_faults_of_one_outage_in_several_tasks_are_one_error_not_a_group() -> None:
    # Found by the soak: with every backend terminated, the renewal and the round's recovery
    # failed in the same moment, and the fail-stop was logged at error level as "unhandled
    # errors in a TaskGroup (2 sub-exceptions)" instead of naming its cause as a warning.
    outage = Outage()
    membership = Membership(
        leases=LeasesLostInTheOutage(outage),
        engine=cast(Engine, RecoveryFailingInTheOutage(outage)),
        store=cast(Store, NoticeStore()),
        readiness=Readiness(),
        check_interval=INTERVAL,
    )
    await membership.join()

    async def strike() -> None:
        await outage.both_waiting.wait()  # the recovery and the renewal both use the database
        outage.now.set()

    raised: list[BaseException] = []

    async def run() -> None:
        try:
            await membership.run()
        except BaseException as exc:  # what the lifecycle gets, group or not
            raised.append(exc)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(strike)
            tg.start_soon(run)
    (error,) = raised
    assert isinstance(error, SystemFault), repr(error)
    assert isinstance(error, ShardsLost | StoreUnavailable), repr(error)


MANY = 16
GIVE_SECONDS = 0.4 * INTERVAL


class CrowdedLeases(EagerPeerLeases):
    """Sixteen shards; once this replica holds them all a peer appears with none, so the
    balance hands half of them over at once, and each give takes a while (a busy database)."""

    def __init__(self) -> None:
        super().__init__()
        self.gave: list[int] = []
        self.half_given = anyio.Event()

    async def join(self) -> int:
        return MANY

    async def renew(self, held: Collection[ShardFence]) -> ClusterPicture:
        now = anyio.current_time()
        self.renewals.append(now)
        lost = tuple(f.shard for f in held if self.expires.get(f.shard, now) < now)
        if lost:
            raise ShardsLost(f"lost {lost}: the leases ran out", lost)
        for fence in held:
            self.expires[fence.shard] = now + LEASE
        mine = {f.shard for f in held}
        crowded = len(mine) == MANY or bool(self.gave)
        members = (self.replica_id, "peer") if crowded else (self.replica_id,)
        return ClusterPicture(
            shards_total=MANY,
            members=members,
            free=tuple(s for s in range(MANY) if s not in mine and s not in self.gave),
            owned={self.replica_id: len(mine), **({"peer": len(self.gave)} if crowded else {})},
        )

    async def give(self, fence: ShardFence) -> None:
        await anyio.sleep(GIVE_SECONDS)
        self.gave.append(fence.shard)
        if len(self.gave) >= MANY // 2:
            self.half_given.set()
        await super().give(fence)


class QuickEngine(SlowRecoveryEngine):
    async def recover(self, page_size: int = 500, shards: Sequence[int] | None = None) -> int:
        self.recovered.append(tuple(shards or ()))
        return 0


async def test_leases_kept_stay_renewed_while_many_shards_are_handed_over() -> None:
    # Found by the soak (--replica): a replica handing many shards over queued their gives on
    # its one membership session, the renewal waited behind them longer than a lease, and the
    # shards it kept lapsed to another replica; its next write to one of them was fenced.
    leases = CrowdedLeases()
    membership = Membership(
        leases=leases,
        engine=cast(Engine, QuickEngine()),
        store=cast(Store, NoticeStore()),
        readiness=Readiness(),
        check_interval=INTERVAL,
        handoff_seconds=1,
    )
    await membership.join()
    raised: list[BaseException] = []

    async def run() -> None:
        try:
            await membership.run()
        except BaseException as exc:
            raised.append(exc)
            leases.half_given.set()  # nothing more will be given: stop waiting

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(20):
            await leases.half_given.wait()
            await anyio.sleep(2 * LEASE)  # the kept half must still be renewed after the burst
        membership.stop()
    assert raised == [], raised
    assert len(leases.gave) >= MANY // 2
