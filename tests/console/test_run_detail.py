"""The run page's read (``RunUseCases.detail``): everything shown is as of one snapshot.

Regression: the page once took its ``last_sequence`` from events read *after* the snapshot, so a
commit between the two reads was neither shown (the tasks came from the snapshot) nor sent by the
live stream (which started after it): the page stayed stale until the next event.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.engine.harness import Harness, mock, workflow
from workload_api.usecases import RunUseCases
from workload_domain.records import RunSnapshot
from workload_engine.clock import FakeClock
from workload_engine.engine import Engine
from workload_engine.memory import InMemoryStore
from workload_engine.mock_executor import MockExecutor

pytestmark = pytest.mark.anyio


class LaggingStore(InMemoryStore):
    """Once lagging, its snapshots are one event behind its events: as if a commit landed
    between the two reads."""

    lagging = False

    async def load_run(self, run_id: str) -> RunSnapshot:
        snapshot = await super().load_run(run_id)
        if not self.lagging:
            return snapshot
        return replace(snapshot, last_sequence=snapshot.last_sequence - 1)


async def test_the_page_is_as_of_its_snapshot() -> None:
    clock = FakeClock()
    store = LaggingStore(clock)
    harness = Harness(store=store, clock=clock)
    view = await harness.run(workflow(mock("a"), mock("b", ["a"])))
    run_id = view.snapshot.run.run_id
    store.lagging = True
    engine = Engine(store, MockExecutor(clock=clock), clock)
    usecases = RunUseCases(store, engine, engine.definitions, clock)
    detail: dict[str, Any] = await usecases.detail(run_id, attempts=10, events=100)
    snapshot = await store.load_run(run_id)
    assert detail["last_sequence"] == snapshot.last_sequence
    sequences = [e["sequence"] for e in detail["events"]]
    assert sequences == list(range(1, snapshot.last_sequence + 1))
    assert len(view.events) == snapshot.last_sequence + 1, "the stream sends the last one"
