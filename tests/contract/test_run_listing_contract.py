"""The runs listing's order and creation window (SPEC §6, amended 2026-12-01), on both stores.

201 runs, some sharing a ``created_at`` (the run id breaks the tie), paged both ways with and
without each filter; a cursor is bound to the order and the window it was issued for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import pytest

from tests.engine.harness import Harness, mock, workflow
from workload_domain.cursors import Page
from workload_domain.errors import InvalidCursor
from workload_domain.ports import Store
from workload_domain.records import RunWithCounts
from workload_domain.run_listing import RunFilter, RunOrder
from workload_domain.statuses import RunStatus
from workload_engine.clock import FakeClock

pytestmark = pytest.mark.anyio

RUNS = 201
Created = list[tuple[str, str, datetime]]
"""(run id, workflow id, created_at) of every run, in creation order."""


async def create_runs(store: Store, clock: FakeClock) -> Created:
    h = Harness(store=store, clock=clock)
    created: Created = []
    for i in range(RUNS):
        workflow_id = f"wf-{i % 2}"
        run_id = await h.create(workflow(mock("a"), workflow_id=workflow_id))
        created.append((run_id, workflow_id, clock.now()))
        if i % 3 == 2:  # three runs share each created_at
            clock.advance(0.25)
    return created


async def every_page(
    store: Store,
    limit: int,
    *,
    workflow_id: str | None = None,
    status: RunStatus | None = None,
    order: RunOrder,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
) -> tuple[list[str], int]:
    """Every run id of the listing, following its cursors, and how many pages that took."""
    ids: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = await store.page_runs(
            RunFilter(workflow_id, status, order, created_after, created_before),
            cursor,
            limit,
        )
        ids.extend(run.run_id for run, _ in page.items)
        pages += 1
        if page.next_cursor is None:
            return ids, pages
        cursor = page.next_cursor


async def test_runs_page_oldest_or_newest_first(store: Store, clock: FakeClock) -> None:
    created = await create_runs(store, clock)
    oldest_first = [run_id for run_id, _, _ in created]

    ascending, pages = await every_page(store, 50, order=RunOrder.ASC)
    assert ascending == oldest_first
    assert pages == 5  # 50 + 50 + 50 + 50 + 1
    descending, pages = await every_page(store, 50, order=RunOrder.DESC)
    assert descending == oldest_first[::-1]
    assert pages == 5
    assert (await every_page(store, 200, order=RunOrder.DESC))[0] == oldest_first[::-1]
    # The store's own default is the keyset's ascending order (the API's default is desc).
    first = await store.page_runs(RunFilter(), None, 3)
    assert [run.run_id for run, _ in first.items] == oldest_first[:3]


@pytest.mark.parametrize(
    ("workflow_id", "status"),
    [(None, None), ("wf-1", None), (None, RunStatus.PENDING), ("wf-0", RunStatus.PENDING)],
    ids=["unfiltered", "by-workflow", "by-status", "by-workflow-and-status"],
)
async def test_the_creation_window_is_exclusive_with_every_filter(
    store: Store, clock: FakeClock, workflow_id: str | None, status: RunStatus | None
) -> None:
    created = await create_runs(store, clock)
    after, before = created[40][2], created[160][2]  # each shared by three runs
    inside = [
        run_id for run_id, wf, at in created if after < at < before and workflow_id in (None, wf)
    ]
    assert 50 < len(inside) < 120
    for order, expected in ((RunOrder.ASC, inside), (RunOrder.DESC, inside[::-1])):
        found, pages = await every_page(
            store,
            7,
            workflow_id=workflow_id,
            status=status,
            order=order,
            created_after=after,
            created_before=before,
        )
        assert found == expected
        assert pages == -(-len(expected) // 7)  # every page full but the last
    only_after, _ = await every_page(store, 200, order=RunOrder.DESC, created_after=after)
    assert only_after == [run_id for run_id, _, at in created if at > after][::-1]
    only_before, _ = await every_page(store, 200, order=RunOrder.ASC, created_before=before)
    assert only_before == [run_id for run_id, _, at in created if at < before]
    # Bounds that leave nothing between them, and a status no run has.
    for lower, upper in ((before, after), (after, after), (after, after + timedelta(0, 0, 1))):
        empty = await store.page_runs(
            RunFilter(created_after=lower, created_before=upper), None, 10
        )
        assert empty == Page((), None)
    done = await store.page_runs(
        RunFilter(workflow_id, RunStatus.SUCCEEDED, RunOrder.DESC), None, 10
    )
    assert done.items == ()


async def test_a_runs_cursor_is_bound_to_its_order_and_window(
    store: Store, clock: FakeClock
) -> None:
    created = await create_runs(store, clock)
    after = created[10][2]
    issued = await store.page_runs(
        RunFilter("wf-0", None, RunOrder.DESC, created_after=after), None, 5
    )
    cursor = issued.next_cursor
    assert cursor is not None

    async def again(
        order: RunOrder = RunOrder.DESC,
        created_after: datetime | None = after,
        created_before: datetime | None = None,
    ) -> Page[RunWithCounts]:
        return await store.page_runs(
            RunFilter("wf-0", None, order, created_after, created_before),
            cursor,
            5,
        )

    following = await again()
    assert [r.run_id for r, _ in following.items] == [
        run_id for run_id, wf, at in created if wf == "wf-0" and at > after
    ][::-1][5:10]
    refused: list[Callable[[], Awaitable[object]]] = [
        lambda: again(order=RunOrder.ASC),
        lambda: again(created_after=None),
        lambda: again(created_after=after + timedelta(microseconds=1)),
        lambda: again(created_before=created[-1][2]),
    ]
    for call in refused:
        with pytest.raises(InvalidCursor):
            await call()
