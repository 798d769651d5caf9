"""The fault proxy itself (:mod:`tests.fault.proxy`): it forwards, and it loses only what it should.

Driven by psycopg 3 the way the store drives it: simple ``BEGIN``/``COMMIT``, extended-protocol
statements, statements prepared after five runs, ``executemany`` in pipeline mode; and by the
real ``PostgresStore.create_run``.
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from tests.fault.conftest import DATABASE, PgCluster
from tests.fault.proxy import PgProxy, unix_socket_of
from tests.fault.test_faults import QUICK
from tests.fault.writes import write_run, write_workflow
from workload_domain.errors import StoreUnavailable

# A table with the run table's name is all the proxy looks for; no migrations needed here.
SCHEMA = (
    "CREATE TABLE workflow_runs (run_id int PRIMARY KEY)",
    "CREATE TABLE other (id int PRIMARY KEY)",
)


@pytest.fixture
def bare_database(pg: PgCluster) -> str:
    """A database with a table named ``workflow_runs``; its direct (Unix socket) URL."""
    url = pg.create_database()
    for statement in SCHEMA:
        pg.query(url, statement)
    return url


def run_ids(pg: PgCluster, url: str) -> list[int]:
    return [r for (r,) in pg.query(url, "SELECT run_id FROM workflow_runs ORDER BY run_id")]


def insert_run(conn: psycopg.Connection[tuple[object, ...]], run_id: int) -> None:
    """One transaction that inserts a run: BEGIN (implicit), INSERT, COMMIT."""
    conn.execute("INSERT INTO workflow_runs (run_id) VALUES (%s)", (run_id,))
    conn.commit()


def test_forwards_every_kind_of_statement(pg: PgCluster, bare_database: str) -> None:
    with (
        PgProxy(unix_socket_of(pg.socket_dir)) as proxy,
        psycopg.connect(proxy.url(DATABASE)) as conn,
    ):
        assert conn.execute("SELECT 1 + %s", (1,)).fetchone() == (2,)
        for run_id in range(1, 8):  # the fifth and later are prepared: Bind without Parse
            insert_run(conn, run_id)
        with conn.cursor() as cur:  # pipeline mode
            cur.executemany("INSERT INTO other (id) VALUES (%s)", [(i,) for i in range(50)])
        conn.commit()
        assert conn.execute("SELECT count(*) FROM other").fetchone() == (50,)
        conn.rollback()
        assert proxy.executions(r"insert into workflow_runs") == 7
        assert proxy.lost == []
    assert run_ids(pg, bare_database) == list(range(1, 8))


def test_a_missing_server_is_a_closed_connection(pg: PgCluster) -> None:
    with (
        PgProxy(pg.socket_dir / ".s.PGSQL.0") as proxy,  # no such socket
        pytest.raises(psycopg.OperationalError),
    ):
        psycopg.connect(proxy.url(DATABASE), connect_timeout=5)


def test_loses_only_the_commit_answer_of_a_run_insert(pg: PgCluster, bare_database: str) -> None:
    with (
        PgProxy(unix_socket_of(pg.socket_dir)) as proxy,
        psycopg.connect(proxy.url(DATABASE), autocommit=True) as bystander,
        psycopg.connect(proxy.url(DATABASE)) as victim,
    ):
        for run_id in range(1, 7):  # prepared by now
            insert_run(victim, run_id)
        proxy.lose_next_run_commit()

        # Not a run: passes.
        victim.execute("INSERT INTO other (id) VALUES (1)")
        victim.commit()
        # A run, rolled back: nothing to lose.
        victim.execute("INSERT INTO workflow_runs (run_id) VALUES (100)")
        victim.rollback()
        assert proxy.armed == 1
        assert proxy.lost == []

        # A run: its COMMIT reaches the server, its answer never comes back.
        victim.execute("INSERT INTO workflow_runs (run_id) VALUES (7)")
        with pytest.raises(psycopg.OperationalError):
            victim.commit()
        assert victim.closed or victim.broken
        assert [(lost.connection, lost.committed) for lost in proxy.lost] == [
            (2, True)
        ]  # the bystander is 1
        assert proxy.armed == 0

        # The other connection never noticed; the next run commits normally.
        assert bystander.execute("SELECT count(*) FROM workflow_runs").fetchone() == (7,)
        with psycopg.connect(proxy.url(DATABASE)) as again:
            insert_run(again, 8)
        assert len(proxy.lost) == 1
    assert run_ids(pg, bare_database) == list(range(1, 9))


def test_loses_the_commit_answer_of_the_stores_create_run(
    pg: PgCluster, database_url: str, pg_proxy: PgProxy
) -> None:
    """The store's real create_run (one statement, committed at its Sync) is recognised."""
    asyncio.run(write_workflow(database_url, QUICK))
    pg_proxy.lose_next_run_commit()
    with pytest.raises(StoreUnavailable):
        asyncio.run(write_run(pg_proxy.url(DATABASE), QUICK))
    assert [lost.committed for lost in pg_proxy.lost] == [True]
    rows = pg.query(database_url, "SELECT status FROM workflow_runs")
    assert rows == [("pending",)], rows
