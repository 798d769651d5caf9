"""``LISTEN/NOTIFY`` between replicas (SPEC §14): what one writes, the others hear — not itself."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from tests.store_postgres.test_store_postgres import T0, WORKFLOW, new_run
from workload_domain.idempotency import IdempotencyClaim, IdempotencyRecord, Outcome
from workload_domain.model import VersionRecord, WorkflowRecord
from workload_domain.ports import NotifyHandlers
from workload_store_postgres.notifications import PostgresNotifications
from workload_store_postgres.store import PostgresStore

pytestmark = pytest.mark.anyio


def _ignore(*_: object) -> None:
    return None


class Heard:
    """The run ids a listener was handed, and an event per expected one."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self._waiting: dict[str, anyio.Event] = {}

    def handlers(self) -> NotifyHandlers:
        return NotifyHandlers(run=self._run, work=_ignore, step=_ignore)

    def _run(self, run_id: str) -> None:
        self.runs.append(run_id)
        self._waiting.setdefault(run_id, anyio.Event()).set()

    async def until(self, run_id: str) -> None:
        with anyio.fail_after(10):
            await self._waiting.setdefault(run_id, anyio.Event()).wait()


@pytest.fixture
async def replicas(database_url: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores on one database that announce what they write, as two replicas' do."""
    async with (
        PostgresStore(database_url, max_size=4) as first,
        PostgresStore(database_url, max_size=4) as second,
    ):
        await first.create_workflow(
            WorkflowRecord("wf", 1, "", T0, T0),
            VersionRecord("wf", 1, WORKFLOW.definition_hash, 3, T0, WORKFLOW.document()),
        )
        first.announce(True)
        second.announce(True)
        yield first, second


async def _create(store: PostgresStore, key: str) -> str:
    run = new_run()
    claim = IdempotencyClaim("op", key, "create_run", key)
    await store.create_run(run, IdempotencyRecord(claim, Outcome(202, {"run_id": run.run.run_id})))
    return run.run.run_id


async def test_a_replica_hears_the_others_runs_but_not_its_own(
    database_url: str, replicas: tuple[PostgresStore, PostgresStore]
) -> None:
    first, second = replicas
    own = PostgresNotifications(database_url, sent_here=first.sent_here)
    everything = PostgresNotifications(database_url)
    heard_by_first, heard_by_all = Heard(), Heard()
    async with anyio.create_task_group() as tg:
        tg.start_soon(own.run, heard_by_first.handlers())
        tg.start_soon(everything.run, heard_by_all.handlers())
        with anyio.fail_after(10):
            await own.listening.wait()
            await everything.listening.wait()

        mine = await _create(first, "mine")
        theirs = await _create(second, "theirs")
        # One listener session gets notifications in commit order: once the later run is heard,
        # the earlier one would have been handed over already, had it not been left out.
        await heard_by_first.until(theirs)
        await heard_by_all.until(theirs)
        tg.cancel_scope.cancel()

    assert heard_by_all.runs == [mine, theirs]  # the first replica's write was announced
    assert heard_by_first.runs == [theirs]  # …and the first replica did not hear its own echo


async def test_a_closed_connections_backend_is_no_longer_this_stores(
    replicas: tuple[PostgresStore, PostgresStore],
) -> None:
    first, second = replicas
    pids: set[int] = set()
    async with anyio.create_task_group() as tg:
        for _ in range(3):  # more than one pooled connection at once

            async def backend() -> None:
                async with first._db.pool.connection() as conn:
                    pids.add(conn.info.backend_pid)
                    await conn.execute("SELECT pg_sleep(0.05)")

            tg.start_soon(backend)
    assert pids
    assert all(first.sent_here(pid) for pid in pids)
    assert not any(second.sent_here(pid) for pid in pids)  # another pool's backends
    assert not first.sent_here(0)

    await first.close()
    assert not any(first.sent_here(pid) for pid in pids)
