"""A replica's life in its database's cluster (SPEC §16): join, renew, balance, hand over.

:class:`Membership` drives one ``workload serve --replica`` process. It joins the cluster (a
coordinator on the database: ``ModeConflict``, exit 3), then every lock check interval renews
its membership and its shard leases in one statement and moves toward its share of the shards
(:func:`~workload_domain.shards.balance`):

- **taking** a free shard: a new epoch of the shard, its channel listened to, then its runs
  recovered by the engine (§7's recovery, for that shard's runs only);
- **giving** a shard up: the engine stops starting attempts in it, lets those executing finish
  (``WORKLOAD_SHARD_HANDOFF_SECONDS``, then interrupts them), and the lease is released, for the
  replica that wants it to take. Hand-offs run beside the renewals, which go on meanwhile.

The renewals have a task of their own: a round that takes shards recovers their runs, however
many, and the leases held must not run out meanwhile.

The owner of shard 0 runs the cluster's duties (``on_duties(True/False)``). A failed renewal or a
shard taken over meanwhile is ``ShardsLost``, raised out of :meth:`Membership.run`: fail-stop.
On a stop (:meth:`Membership.stop`), every shard is handed over before the replica leaves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
import anyio.abc

from workload_api._errors import single_errors
from workload_api.readiness import Readiness
from workload_domain.errors import SystemFault
from workload_domain.ports import Notifications, ShardLeases, Store
from workload_domain.shards import ClusterPicture, ShardFence, balance
from workload_engine.engine import Engine
from workload_engine.ownership import ShardOwnership

__all__ = ["Membership"]

_log = logging.getLogger("workload.cluster")


class Membership:
    """A replica's membership of the cluster and the shards it executes (see the module)."""

    def __init__(
        self,
        *,
        leases: ShardLeases,
        engine: Engine,
        store: Store,
        readiness: Readiness,
        notifications: Notifications | None = None,
        check_interval: float = 1.0,
        handoff_seconds: float = 30.0,
        recovery_page_size: int = 500,
        on_takeover: Callable[[], None] | None = None,
    ) -> None:
        self.leases = leases
        self.engine = engine
        self.store = store
        self.readiness = readiness
        self.notifications = notifications
        self._interval = check_interval
        self._handoff = handoff_seconds
        self._page_size = recovery_page_size
        self._on_takeover = on_takeover
        self.ownership: ShardOwnership | None = None
        self.on_duties: Callable[[bool], None] | None = None
        """Told when this replica starts (True) or stops (False) owning shard 0."""
        self._duties = False
        self._leaving: set[int] = set()
        self._stopping = anyio.Event()
        self.left = anyio.Event()
        """Set once a stop has handed every shard over (or the membership ended)."""
        self.first_round = anyio.Event()
        """Set once the first round took (and recovered) this replica's first shards."""
        self._renewed_at = 0.0
        self._lock = anyio.Lock()
        """One statement at a time on the membership's session."""
        self._given = anyio.Event()
        """Set whenever a hand-over ended (a stop waits for all of them)."""

    @property
    def replica_id(self) -> str:
        """This replica's id."""
        return self.leases.replica_id

    async def join(self) -> None:
        """Join the cluster: this replica executes the runs of the shards it will hold."""
        total = await self.leases.join()
        self.store.shard_notices(total)
        self.ownership = ShardOwnership(total)
        self.engine.ownership = self.ownership
        self.readiness.replica_id = self.readiness.name = self.replica_id
        self.readiness.since = None
        _log.info(
            "joined the cluster", extra={"fields": {"replica_id": self.replica_id, "shards": total}}
        )

    async def run(self) -> None:
        """Renew and balance until stopped (then hand everything over); raises ``ShardsLost``.

        :attr:`first_round` is set after the first round, which takes this replica's first
        share of the free shards and recovers them (or once the membership ended).
        """
        try:
            async with single_errors(alike=SystemFault), anyio.create_task_group() as tasks:
                tasks.start_soon(self._keep_renewed)
                while not self._stopping.is_set():
                    await self._round(tasks)
                    self.first_round.set()
                    with anyio.move_on_after(self._interval):
                        await self._stopping.wait()
                await self._leave(tasks)
                tasks.cancel_scope.cancel()  # every shard handed over: nothing left to renew
        finally:
            self._set_duties(False)
            self.first_round.set()
            self.left.set()

    def stop(self) -> None:
        """Hand every shard over and leave (the replica stops: SIGTERM, SPEC §16)."""
        self._stopping.set()

    async def _round(self, handoffs: anyio.abc.TaskGroup) -> None:
        picture = await self._renew()
        assert self.ownership is not None
        held = [f.shard for f in self.ownership.held]
        moves = balance(picture, self.replica_id, held)
        for shard in moves.give:
            if shard not in self._leaving:
                self._leaving.add(shard)
                handoffs.start_soon(self._hand_over, shard)
        taken: list[int] = []
        for shard in moves.take:
            if self._stopping.is_set():
                break
            if await self._take(shard):
                taken.append(shard)
        if taken:
            await self._recover(taken)
        self._publish(picture)

    async def _keep_renewed(self) -> None:
        """Renew every interval, whatever a round is busy with meanwhile.

        A round that takes shards recovers their runs, which takes as long as there are runs;
        a lease (three intervals) must not run out meanwhile, or another replica takes the
        shards and this one fail-stops at its next renewal.
        """
        while True:
            await anyio.sleep(max(0.0, self._renewed_at + self._interval - anyio.current_time()))
            if anyio.current_time() - self._renewed_at >= self._interval:
                await self._renew()

    async def _renew(self) -> ClusterPicture:
        async with self._lock:
            return await self._renew_held()

    async def _renew_held(self) -> ClusterPicture:
        """Renew every lease held (the caller holds the session's lock)."""
        assert self.ownership is not None
        started = anyio.current_time()  # the leases count from the renewal's start, not its end
        picture = await self.leases.renew(self.ownership.held)
        self._renewed_at = started
        self._publish(picture)
        return picture

    async def _renew_if_due(self) -> None:
        """Renew first when an interval has passed (the caller holds the session's lock).

        Takes and gives queue on the membership's one session: a burst of them (a balance that
        hands many shards over at once) would otherwise keep the renewal waiting behind them
        longer than a lease, and the shards still held would lapse to another replica.
        """
        if anyio.current_time() - self._renewed_at >= self._interval:
            await self._renew_held()

    async def _take(self, shard: int) -> bool:
        """Take ``shard`` in a new epoch: its runs are this replica's from now on."""
        assert self.ownership is not None
        async with self._lock:
            await self._renew_if_due()
            fence = await self.leases.take(shard)
        if fence is None:
            return False  # taken by another replica first (or busy): the next round sees it
        self.ownership.hold(fence)
        if self._on_takeover is not None:
            self._on_takeover()
        return True

    async def _recover(self, shards: list[int]) -> None:
        """Hear the shards just taken, then recover their runs (as §7 recovers a database's)."""
        await self._hear()
        recovered = await self.engine.recover(self._page_size, shards)
        _log.info(
            "took shards",
            extra={"fields": {"shards": shards, "recovered_runs": recovered}},
        )
        if 0 in shards:
            self._set_duties(True)

    async def _hand_over(self, shard: int) -> None:
        """Stop executing ``shard``'s runs, then release its lease for another replica."""
        assert self.ownership is not None
        fence = next(f for f in self.ownership.held if f.shard == shard)
        if shard == 0:
            self._set_duties(False)
        try:
            interrupted = await self.engine.hand_off(shard, self._handoff)
            await self._hear()
            await self._give(fence)
        finally:
            self.ownership.drop(shard)
            self._leaving.discard(shard)
            self._given.set()
        _log.info(
            "handed a shard over",
            extra={"fields": {"shard": shard, "interrupted_runs": interrupted}},
        )

    async def _give(self, fence: ShardFence) -> None:
        async with self._lock:
            await self._renew_if_due()
            await self.leases.give(fence)

    async def _leave(self, handoffs: anyio.abc.TaskGroup) -> None:
        """Hand every shard over (renewing meanwhile), then leave the cluster.

        Said first: the others count this replica out of their shares, so each shard is taken
        as soon as it is given up, not once the last hand-off (the longest attempt) has ended.
        """
        assert self.ownership is not None
        async with self._lock:
            await self.leases.depart()
        for fence in self.ownership.held:
            if fence.shard not in self._leaving:
                self._leaving.add(fence.shard)
                handoffs.start_soon(self._hand_over, fence.shard)
        while self.ownership.held:  # renewed meanwhile by _keep_renewed
            self._given = anyio.Event()
            with anyio.move_on_after(self._interval):
                await self._given.wait()

    async def _hear(self) -> None:
        assert self.ownership is not None
        if self.notifications is not None:
            await self.notifications.hear_shards(self.ownership.serving)

    def _set_duties(self, owned: bool) -> None:
        if owned != self._duties:
            self._duties = owned
            if self.on_duties is not None:
                self.on_duties(owned)

    def _publish(self, picture: ClusterPicture) -> None:
        assert self.ownership is not None
        self.readiness.shards_owned = len(self.ownership.held)
        self.readiness.replicas_live = len(picture.members)
