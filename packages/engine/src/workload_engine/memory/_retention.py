"""Run retention in the in-memory store: forget finished runs with everything they own."""

from __future__ import annotations

from datetime import datetime

import anyio

from workload_engine.memory._part import MemoryState

__all__ = ["MemoryRetention"]


class MemoryRetention(MemoryState):
    """The ``RetentionStore`` part of the in-memory store."""

    async def purge_finished_runs(self, finished_before: datetime, limit: int) -> int:
        """Delete up to ``limit`` terminal runs finished before ``finished_before``."""
        await anyio.lowlevel.checkpoint()
        due = sorted(
            (d.run.finished_at, run_id)
            for run_id, d in self._runs.items()
            if d.run.status.is_terminal
            and d.run.finished_at is not None
            and d.run.finished_at < finished_before
        )[:limit]
        gone = {run_id for _, run_id in due}
        for run_id in gone:
            del self._runs[run_id]
        for attempt_id in [a for a, (run_id, _) in self._attempt_ids.items() if run_id in gone]:
            del self._attempt_ids[attempt_id]
            self._tokens.pop(attempt_id, None)
        for journal in [key for key in self._journals if key[0] in gone]:
            del self._journals[journal]
        for step_id in [s for s, (key, _) in self._step_ids.items() if key[0] in gone]:
            del self._step_ids[step_id]
            self._step_tokens.pop(step_id, None)
        for approval in [a for a, r in self._approvals.items() if r.run_id in gone]:
            del self._approvals[approval]
        return len(gone)
