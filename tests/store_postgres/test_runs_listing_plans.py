"""The runs listing's statements are served by their indexes in both orders (SPEC §5, §6).

Each of the eight statements (four filter combinations, oldest or newest first, every one with
the creation window) must read its index in the listing's order: no sort of the matching rows,
however many there are. Sequential scans are disabled so the plan shows what the indexes can
do on a small table, as the planner chooses on a large one.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from workload_store_postgres._queries import query

pytestmark = pytest.mark.anyio

_NAMES = {
    "page_runs": {"workflow_runs_keyset"},
    "page_runs_by_workflow": {"workflow_runs_by_workflow"},
    "page_runs_by_status": {"workflow_runs_by_status"},
    # Either serves the order; the planner picks the more selective one for its statistics.
    "page_runs_by_workflow_and_status": {"workflow_runs_by_workflow", "workflow_runs_by_status"},
}


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan's nodes, leaving out sub-plans (each run's task counts, read by its key)."""
    found = [plan]
    for child in plan.get("Plans", []):
        if child.get("Parent Relationship") != "SubPlan":
            found.extend(nodes(child))
    return found


@pytest.mark.parametrize("desc", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("name", sorted(_NAMES))
async def test_each_listing_reads_its_index_in_order(
    database_url: str, name: str, desc: bool
) -> None:
    params = {
        "after_at": datetime.max.replace(tzinfo=UTC) if desc else datetime.min.replace(tzinfo=UTC),
        "after_id": uuid.UUID(int=(1 << 128) - 1 if desc else 0),
        "workflow_id": "wf",
        "status": "succeeded",
        "created_after": datetime(2026, 1, 1, tzinfo=UTC),
        "created_before": datetime(2026, 12, 1, tzinfo=UTC),
        "limit": 51,
    }
    statement = query(name + ("_desc" if desc else ""))
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("SET enable_seqscan = off")
        cur = await conn.execute("EXPLAIN (FORMAT JSON) " + statement, params)
        row = await cur.fetchone()
    assert row is not None
    plan = row[0][0]["Plan"]
    outer = [n for n in nodes(plan) if n.get("Relation Name") == "workflow_runs"]
    assert len(outer) == 1, plan
    assert outer[0]["Index Name"] in _NAMES[name], plan
    assert outer[0]["Node Type"] == "Index Scan", plan
    assert outer[0]["Scan Direction"] == ("Backward" if desc else "Forward"), plan
    assert not [n for n in nodes(plan) if n["Node Type"] in ("Sort", "Incremental Sort")], plan
