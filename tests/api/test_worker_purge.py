"""Workers not seen for 7 days are forgotten by the service's purge duty (ADR 0023).

Before, a worker was never forgotten: every worker id a worker token ever claimed under stayed
in ``GET /workers`` and, seen within 24 hours, in every draft's prompt. The purge that forgets
idempotency records now forgets such workers too, once at start and then hourly.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.waiting import await_until
from workload_api.container import Container, use_memory_store
from workload_api.settings import Settings
from workload_domain.leases import token_digest
from workload_domain.workers import WORKER_RETENTION, Claim
from workload_engine.clock import FakeClock

pytestmark = pytest.mark.anyio


async def test_the_purge_forgets_workers_not_seen_for_seven_days() -> None:
    clock = FakeClock()
    # Settings of its own: the tests_api session installs the API package alone (no SDK).
    container = use_memory_store(Container(settings=Settings(operator_tokens="op-" + "x" * 32)))
    container.clock.override(clock)
    store = container.store()
    for worker_id in ("old", "recent"):
        if worker_id == "recent":
            clock.advance(timedelta(days=2).total_seconds())
        claim = Claim(worker_id, ("q",), ("resize",), 1, (token_digest("t"),))
        await store.claim(claim, clock.now())
    clock.advance((WORKER_RETENTION - timedelta(days=1)).total_seconds())  # "old": 8 days ago

    service = container.service()
    async with service.running():

        async def left() -> list[str] | None:
            listed = [w.worker_id for w in (await store.page_workers(None, 10)).items]
            return listed if len(listed) == 1 else None

        assert await await_until(left, within=10, message="the old worker is still listed") == [
            "recent"
        ]
    assert service.fault is None
