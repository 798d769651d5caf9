"""``LISTEN/NOTIFY`` between replicas (SPEC §14): what one writes, the others hear — not itself."""

from __future__ import annotations

import itertools
import logging
import socket
from collections.abc import AsyncIterator, Callable

import anyio
import psycopg
import pytest

from tests.store_postgres.test_store_postgres import T0, WORKFLOW, new_run
from tests.waiting import await_until
from workload_domain.idempotency import IdempotencyClaim, IdempotencyRecord, Outcome
from workload_domain.ports import NotifyHandlers
from workload_domain.records import VersionRecord, WorkflowRecord
from workload_domain.shards import DEFAULT_SHARDS
from workload_store_postgres.notifications import APPLICATION_NAME, PostgresNotifications
from workload_store_postgres.store import PostgresStore

pytestmark = pytest.mark.anyio


def _ignore(*_: object) -> None:
    return None


def announcing(store: PostgresStore) -> bool:
    """Whether ``store`` announces now (a call: each assertion reads it afresh)."""
    return store.announcing


class Heard:
    """The run ids a listener was handed, and an event per expected one."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self._waiting: dict[str, anyio.Event] = {}

        self.listened = 0
        """How many times the listener said it listens (at each connection)."""

    def handlers(self) -> NotifyHandlers:
        return NotifyHandlers(run=self._run, work=_ignore, step=_ignore, listening=self._listening)

    def _listening(self) -> None:
        self.listened += 1

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
    own = PostgresNotifications(database_url, senders=first)
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


async def _until(condition: Callable[[], bool], message: str) -> None:
    async def check() -> bool:
        return condition()

    await await_until(check, within=10, message=message)


def _terminate(database_url: str, where: str, value: object) -> int:
    """Terminate the backends matching ``where`` (a fixed SQL condition); how many."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE {where}", (value,)
        ).fetchall()
    return len(rows)


async def test_a_backend_counts_as_ours_only_while_its_connection_lives(
    database_url: str, replicas: tuple[PostgresStore, PostgresStore]
) -> None:
    first, second = replicas
    async with first._db.pool.connection() as one, first._db.pool.connection() as other:
        pids = (one.info.backend_pid, other.info.backend_pid)
    assert pids[0] != pids[1]
    assert first.sent_here(pids[0])
    assert first.sent_here(pids[1])
    assert not second.sent_here(pids[0])  # another pool's
    assert not second.sent_here(pids[1])
    assert not first.sent_here(0)

    # A terminated backend's pid may be given to another backend: it is no longer ours, even
    # before the pool notices that its idle connection died.
    assert _terminate(database_url, "pid = %s", pids[0]) == 1
    await _until(lambda: not first.sent_here(pids[0]), "a dead backend's pid still counts")
    assert first.sent_here(pids[1])

    first.forget_senders()
    assert not first.sent_here(pids[1])
    await first.close()
    assert not first.sent_here(pids[1])


async def test_a_listener_that_reconnects_forgets_the_senders_it_knew(
    database_url: str, replicas: tuple[PostgresStore, PostgresStore]
) -> None:
    first, second = replicas
    async with first._db.pool.connection() as conn:
        pid = conn.info.backend_pid
    listener = PostgresNotifications(database_url, senders=first)
    heard = Heard()
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.run, heard.handlers())
        with anyio.fail_after(10):
            await listener.listening.wait()
        assert first.sent_here(pid)
        # Its server went away (here: its session only): every connection made before may be
        # half-open to a server that is gone, so none counts as ours any more.
        assert _terminate(database_url, "application_name = %s", APPLICATION_NAME) == 1
        await _until(lambda: not first.sent_here(pid), "the listener did not forget")
        # Listening again (after its back-off): another replica's run is heard.
        created = itertools.count()

        async def heard_a_new_run() -> bool:
            theirs = await _create(second, f"after-reconnect-{next(created)}")
            with anyio.move_on_after(0.2):
                await heard.until(theirs)
            return theirs in heard.runs

        await await_until(heard_a_new_run, within=10, message="not listening again")
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("sharded", [False, True], ids=["coordinator", "replica"])
async def test_a_listener_says_it_listens_at_each_connection_what_it_missed_is_looked_at(
    database_url: str, replicas: tuple[PostgresStore, PostgresStore], sharded: bool
) -> None:
    _, second = replicas
    if sharded:
        second.shard_notices(DEFAULT_SHARDS)  # each run on its shard's channel (SPEC §16)
    listener = PostgresNotifications(database_url, sharded=sharded, retry_seconds=(0.5,))
    heard = Heard()
    created = itertools.count()

    async def heard_a_new_run() -> bool:
        theirs = await _create(second, f"listening-{next(created)}")
        with anyio.move_on_after(0.2):
            await heard.until(theirs)
        return theirs in heard.runs

    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.run, heard.handlers())
        await listener.hear_shards(range(DEFAULT_SHARDS))
        with anyio.fail_after(10):
            await listener.listening.wait()
        assert heard.listened == 1  # the first connection: nothing was heard before it either
        await await_until(heard_a_new_run, within=10, message="not listening")
        assert _terminate(database_url, "application_name = %s", APPLICATION_NAME) == 1
        # While it reconnects, what is announced is lost: its handlers are told once it is back.
        await _until(lambda: heard.listened == 2, "not told that it listens again")
        await await_until(heard_a_new_run, within=10, message="not listening again")
        tg.cancel_scope.cancel()
    assert heard.listened == 2


async def test_a_plain_leader_starts_announcing_once_it_hears_a_replica(
    database_url: str,
) -> None:
    # A leader started without --standby announces nothing while alone (SPEC §14).
    async with (
        PostgresStore(database_url, max_size=2) as leader,
        PostgresStore(database_url, max_size=2) as replica,
    ):
        await leader.create_workflow(
            WorkflowRecord("wf", 1, "", T0, T0),
            VersionRecord("wf", 1, WORKFLOW.definition_hash, 3, T0, WORKFLOW.document()),
        )
        replica.announce(True)
        listener = PostgresNotifications(
            database_url, senders=leader, on_replica=lambda: leader.announce(True)
        )
        observer = PostgresNotifications(database_url)  # hears everything, in commit order
        heard_by_leader, heard_by_observer = Heard(), Heard()
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.run, heard_by_leader.handlers())
            tg.start_soon(observer.run, heard_by_observer.handlers())
            with anyio.fail_after(10):
                await listener.listening.wait()
                await observer.listening.wait()
            alone = await _create(leader, "alone")
            assert not announcing(leader)
            marker = await _create(replica, "marker")
            await heard_by_leader.until(marker)
            assert announcing(leader)  # it heard another process
            together = await _create(leader, "together")
            await heard_by_observer.until(together)
            tg.cancel_scope.cancel()
        # Notifications arrive in commit order: had "alone" been announced, it came first.
        assert heard_by_observer.runs == [marker, together]
        assert alone not in heard_by_leader.runs


async def test_a_standby_says_it_is_there_and_never_hears_itself(database_url: str) -> None:
    async with PostgresStore(database_url, max_size=2) as quiet:
        heard_itself: list[None] = []
        heard_by_quiet: list[None] = []
        present = PostgresNotifications(
            database_url,
            present=True,
            presence_seconds=0.05,
            on_replica=lambda: heard_itself.append(None),
        )

        def replica_heard() -> None:
            heard_by_quiet.append(None)
            quiet.announce(True)

        listener = PostgresNotifications(database_url, senders=quiet, on_replica=replica_heard)
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.run, Heard().handlers())
            with anyio.fail_after(10):
                await listener.listening.wait()
            assert not quiet.announcing
            tg.start_soon(present.run, Heard().handlers())

            async def heard_three_times() -> bool | None:
                await anyio.sleep(0.01)
                return len(heard_by_quiet) >= 3 or None

            await await_until(heard_three_times, message="the presence was not heard, again")
            tg.cancel_scope.cancel()
        assert quiet.announcing
        assert heard_itself == []  # its own NOTIFY, on its own connection, is left out


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "workload.notifications" and r.levelno == logging.WARNING
    ]


async def test_a_listener_without_a_server_warns_once_not_at_every_try(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as probe:  # a port nothing listens on: each try is refused at once
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://postgres@127.0.0.1:{port}/nowhere"
    listener = PostgresNotifications(url, retry_seconds=(0.01,), log_every_seconds=3600)
    caplog.set_level(logging.INFO, logger="workload.notifications")
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.run, Heard().handlers())
        await _until(lambda: listener.failed_tries >= 20, "the listener stopped trying")
        tg.cancel_scope.cancel()
    assert len(_warnings(caplog)) == 1, [r.getMessage() for r in _warnings(caplog)]


async def test_a_listener_that_listens_again_says_so_once_and_backs_off_afresh(
    database_url: str,
    replicas: tuple[PostgresStore, PostgresStore],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, second = replicas
    listener = PostgresNotifications(database_url, retry_seconds=(0.05, 5.0))
    heard = Heard()
    caplog.set_level(logging.INFO, logger="workload.notifications")
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.run, heard.handlers())
        with anyio.fail_after(10):
            await listener.listening.wait()
        created = itertools.count()
        for _ in range(2):
            # Each cut is the first failure since it last listened: the short back-off again
            # (5 s would outlast the wait below), one warning, and one line when it listens.
            assert _terminate(database_url, "application_name = %s", APPLICATION_NAME) == 1

            async def heard_a_new_run() -> bool:
                # Until it listens again, a notification is lost: create runs until one is heard.
                theirs = await _create(second, f"after-cut-{next(created)}")
                with anyio.move_on_after(0.2):
                    await heard.until(theirs)
                return theirs in heard.runs

            await await_until(heard_a_new_run, within=4, message="not listening again")
            assert listener.failed_tries == 0
        tg.cancel_scope.cancel()
    assert len(_warnings(caplog)) == 2, [r.getMessage() for r in _warnings(caplog)]
    again = [
        r for r in caplog.records if r.getMessage() == "the notification listener listens again"
    ]
    assert len(again) == 2
