"""``runs watch`` (and ``--wait``) when the server refuses an event stream for now (ADR 0025).

A principal or a run may hold only so many streams; past the cap the server answers 429
``too_many_requests``. A watcher must not fail then (the run goes on): it reads the run again
every ``Retry-After`` seconds and opens the stream again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, cast

import pytest

from workload_cli import _watch
from workload_sdk import Client, TooManyRequests


class BusyRuns:
    """``stream_events`` refused ``refusals`` times, then a stream of two events."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.opened = 0

    def stream_events(self, run_id: str, timeout: float | None = None) -> Iterator[Any]:
        self.opened += 1
        if self.opened <= self.refusals:
            raise TooManyRequests("this run has as many event streams as it may")
        yield from ("event 1", "event 2")


class BusyClient:
    def __init__(self, refusals: int) -> None:
        self.runs = BusyRuns(refusals)


def test_a_refused_stream_is_opened_again_and_is_no_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_watch, "_BUSY_WAIT", 0.01)
    client = BusyClient(refusals=3)
    follower = _watch._Follower(cast(Client, client), "run-1", None)
    assert follower.ended.wait(10), "the follower never ended"
    assert follower.error is None
    assert client.runs.opened == 4  # three refusals, then the stream
    assert follower.changed.is_set()


def test_a_refusal_makes_the_watcher_read_the_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the stream is refused, ``changed`` is set at each refusal: the run is polled."""
    monkeypatch.setattr(_watch, "_BUSY_WAIT", 0.2)
    released = threading.Event()

    class Refusing(BusyRuns):
        def stream_events(self, run_id: str, timeout: float | None = None) -> Iterator[Any]:
            self.opened += 1
            if not released.is_set():
                raise TooManyRequests("busy")
            yield "event"

    client = BusyClient(0)
    client.runs = Refusing(0)
    follower = _watch._Follower(cast(Client, client), "run-1", None)
    for _ in range(3):  # each refusal wakes the watcher
        assert follower.changed.wait(5)
        follower.changed.clear()
    released.set()
    assert follower.ended.wait(10)
    assert follower.error is None
