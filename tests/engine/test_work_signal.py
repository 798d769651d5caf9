"""Waiting claims are woken by the work they could take, and only by it (ADR 0025, issue 33 D1).

Before, every queued attempt woke every waiting claim, whatever its queues and actions: idle
claims on an unrelated queue each looked again (a read, sometimes a write) at every run start.
"""

from __future__ import annotations

import anyio
import pytest

from workload_engine.signals import WorkSignal

pytestmark = pytest.mark.anyio


def test_work_wakes_only_the_claims_whose_queue_and_action_match() -> None:
    signal = WorkSignal()
    with (
        signal.listen(["default"], ["resize"]) as match,
        signal.listen(["other"], ["resize"]) as other_queue,
        signal.listen(["default"], ["ocr"]) as other_action,
        signal.listen(["gpu", "default"], ["ocr", "resize"]) as wider,
    ):
        waiters = {
            "match": match.waiter(),
            "other_queue": other_queue.waiter(),
            "other_action": other_action.waiter(),
            "wider": wider.waiter(),
        }
        assert signal.waiting == 4
        signal.notify([("default", "resize")])
        woken = {name for name, event in waiters.items() if event.is_set()}
    assert woken == {"match", "wider"}
    assert signal.waiting == 0  # a claim that stopped waiting is forgotten


def test_a_notification_that_names_no_work_wakes_every_claim() -> None:
    # An older peer's notification, or a payload too long to send: nothing is missed.
    signal = WorkSignal()
    with signal.listen(["a"], ["x"]) as first, signal.listen(["b"], ["y"]) as second:
        events = [first.waiter(), second.waiter()]
        signal.notify(None)
        assert all(e.is_set() for e in events)
        # The next wait needs the next notification.
        again = [first.waiter(), second.waiter()]
        assert not any(e.is_set() for e in again)
        signal.notify([("a", "x")])
        assert [e.is_set() for e in again] == [True, False]


def test_a_notification_between_the_waiter_and_the_look_is_not_missed() -> None:
    signal = WorkSignal()
    with signal.listen(["default"], ["resize"]) as listening:
        waiter = listening.waiter()  # taken before looking for work
        signal.notify([("default", "resize")])  # committed while the claim looked
        assert waiter.is_set()  # so the claim does not wait


async def test_close_wakes_every_claim_now_and_from_now_on() -> None:
    signal = WorkSignal()
    with signal.listen(["default"], ["resize"]) as listening:
        waiter = listening.waiter()
        signal.close()
        assert waiter.is_set()
        with anyio.fail_after(1):  # a bound on a hang, not a measure
            await listening.waiter().wait()
    with signal.listen(["late"], ["x"]) as late:
        assert late.waiter().is_set()


def test_work_of_queues_nobody_waits_on_is_cheap_and_harmless() -> None:
    signal = WorkSignal()
    signal.notify([("nobody", "x")] * 1000)
    with signal.listen(["q"], ["a"]) as listening:
        waiter = listening.waiter()
        signal.notify([("nobody", "a"), ("q", "b")])
        assert not waiter.is_set()
