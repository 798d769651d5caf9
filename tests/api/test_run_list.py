"""A page of runs shows each run's status with the task counts of that same state (SPEC §6).

The list used to read the page, then the counts of its runs in a second read: a commit landing
in between showed a ``pending`` run whose tasks had all ``succeeded``. The counts are now read
with the page, so nothing that commits after the page's read can mix into it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tests.engine.harness import Harness, mock, workflow
from workload_api.usecases import RunUseCases
from workload_domain.cursors import Page
from workload_domain.records import RunWithCounts
from workload_domain.run_listing import RunFilter
from workload_engine.clock import FakeClock
from workload_engine.memory import InMemoryStore

pytestmark = pytest.mark.anyio


class CommitsAfterPaging(InMemoryStore):
    """Runs ``then`` (once) right after a page of runs was read, before the caller goes on."""

    then: Callable[[], Awaitable[object]] | None = None

    async def page_runs(
        self, wanted: RunFilter, cursor: str | None, limit: int
    ) -> Page[RunWithCounts]:
        page = await super().page_runs(wanted, cursor, limit)
        then, self.then = self.then, None
        if then is not None:
            await then()
        return page


async def test_a_commit_after_the_page_is_read_does_not_change_its_counts() -> None:
    clock = FakeClock()
    store = CommitsAfterPaging(clock)
    h = Harness(store=store, clock=clock)
    run_id = await h.create(workflow(mock("a"), mock("b", depends_on=["a"])))
    runs = RunUseCases(store, h.engine, h.engine.definitions, clock)
    store.then = lambda: h.execute(run_id)  # the run ends between the page and anything after

    (item,) = (await runs.list(None, None, None, 10))["items"]

    assert (item["run_id"], item["status"]) == (run_id, "pending")
    assert item["task_counts"]["pending"] == 2
    assert item["task_counts"]["succeeded"] == 0
    assert (await h.view(run_id)).status == "succeeded"  # it did end in between
    (after,) = (await runs.list(None, None, None, 10))["items"]
    assert (after["status"], after["task_counts"]["succeeded"]) == ("succeeded", 2)
