"""Queued work is announced with its queues and actions (ADR 0025, issue 33 D1).

A claim waiting on another replica wakes only for work it could take, so ``workload_work``
names the ``(queue, action)`` pairs queued. A payload that names nothing readably (an older
peer's empty one, one too long to send, garbage) wakes every claim: nothing is ever missed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import anyio
import psycopg
import pytest

from tests.store_postgres.test_claim_locked import queued_run
from workload_domain.ports import NotifyHandlers
from workload_store_postgres._work_notice import MAX_PAYLOAD, decode_work, encode_work
from workload_store_postgres.notifications import PostgresNotifications
from workload_store_postgres.store import PostgresStore

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "pairs",
    [
        [("default", "resize")],
        [("default", "resize"), ("gpu", "ocr"), ("default", "ocr")],
        [("q", 'an "action" with, commas]'), ("q", "ünïcødé ✓")],
        [("q", "a" * 128)],
    ],
    ids=["one", "several", "json-special", "longest-action"],
)
def test_the_payload_names_the_queued_pairs(pairs: list[tuple[str, str]]) -> None:
    payload = encode_work(pairs)
    assert payload
    assert len(payload.encode()) <= MAX_PAYLOAD
    assert decode_work(payload) == pairs


def test_repeated_pairs_are_named_once() -> None:
    assert decode_work(encode_work([("q", "a")] * 50)) == [("q", "a")]


def test_a_payload_too_long_to_send_names_nothing() -> None:
    # A commit queueing hundreds of distinct actions: the notification wakes every claim.
    pairs = [("default", f"action-{i:04d}-" + "x" * 100) for i in range(100)]
    assert encode_work(pairs) == ""
    assert decode_work(encode_work(pairs)) is None


@pytest.mark.parametrize(
    "payload",
    [
        "",
        "not json",
        "{}",
        "[]",
        "null",
        '"default"',
        '[["default"]]',
        '[["default", "resize", "extra"]]',
        '[["default", 1]]',
        "[[null, null]]",
        '[["default", "resize"], "x"]',
        '[["a", "b"]' + "]" * 5,
        "[" * 3000,
        "[" * 10_000,
        "\x00",
    ],
    ids=[
        "empty",
        "garbage",
        "object",
        "empty-list",
        "null",
        "string",
        "short-pair",
        "long-pair",
        "number",
        "nulls",
        "mixed",
        "trailing",
        "deep",
        "too-long",
        "nul",
    ],
)
def test_a_payload_that_names_nothing_readably_wakes_every_claim(payload: str) -> None:
    assert decode_work(payload) is None


@pytest.fixture
async def stores(database_url: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    async with (
        PostgresStore(database_url, max_size=2) as listening,
        PostgresStore(database_url, max_size=2) as writing,
    ):
        writing.announce(True)
        yield listening, writing


async def test_another_replica_hears_the_queue_and_action_of_queued_work(
    database_url: str, stores: tuple[PostgresStore, PostgresStore]
) -> None:
    listening, writing = stores
    heard: list[Sequence[tuple[str, str]] | None] = []
    got = anyio.Event()

    def work(pairs: Sequence[tuple[str, str]] | None) -> None:
        heard.append(pairs)
        got.set()

    listener = PostgresNotifications(database_url, senders=listening)
    handlers = NotifyHandlers(run=lambda _: None, work=work, step=lambda *_: None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.run, handlers)
        with anyio.fail_after(10):
            await listener.listening.wait()
        await queued_run(writing)
        with anyio.fail_after(10):
            await got.wait()
        # An older replica's notification (no payload) is heard as "some work".
        got = anyio.Event()
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("NOTIFY workload_work")
        with anyio.fail_after(10):
            await got.wait()
        tg.cancel_scope.cancel()
    assert heard == [[("default", "resize")], None]
