"""Run retention (SPEC §5): deletes finished runs with every row they own, a batch at a time."""

from __future__ import annotations

from datetime import datetime

from workload_store_postgres._db import rows
from workload_store_postgres._part import StorePart
from workload_store_postgres._queries import query

__all__ = ["PURGE_ROWS", "Retention"]

PURGE_ROWS = 50_000
"""Events and agent steps a batch deletes at most (but a whole run, however large): a batch of
runs is bounded by the rows they own, not only by their number — 500 runs of 1,000 tasks each
outlasted the statement timeout."""

# Children before parents: the foreign keys (agent steps and approvals → attempts → tasks → run;
# events → run) refuse a parent whose children remain.
_CHILDREN = (
    "purge_run_approvals",
    "purge_run_steps",
    "purge_run_events",
    "purge_run_attempts",
    "purge_run_tasks",
)


class Retention(StorePart):
    """The ``RetentionStore`` part."""

    async def purge_finished_runs(self, finished_before: datetime, limit: int) -> int:
        """Delete up to ``limit`` terminal runs finished before ``finished_before``.

        One transaction locks only those runs (one locked elsewhere is skipped) and their rows,
        so run creation and execution never wait for more than one batch; the batch stops short
        of ``limit`` once its runs own :data:`PURGE_ROWS` events and agent steps.
        """
        async with self._db.tx() as conn:
            due = await rows(
                conn, "finished_runs_due", {"finished_before": finished_before, "limit": limit}
            )
            if not due:
                return 0
            run_ids: list[object] = []
            owned = 0
            for row in due:  # oldest first, at least one
                owned += row["owned"]
                if run_ids and owned > PURGE_ROWS:
                    break  # the rest stay locked until this commit, and are left for the next
                run_ids.append(row["run_id"])
            params = {"run_ids": run_ids}
            for name in _CHILDREN:
                await conn.execute(query(name), params)
            cur = await conn.execute(query("purge_runs"), params)
            return cur.rowcount
