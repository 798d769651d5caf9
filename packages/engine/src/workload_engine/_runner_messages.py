"""The channel of a run's runner: what its tasks and its callers send it.

Attempts, slot waiters and the retry timer only *report* to the runner through it, as do
:meth:`~workload_engine.runner.RunRunner.notify`, ``report`` and ``drain``; the runner alone
commits.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from workload_engine.approval_planning import ApprovalWait
from workload_engine.planner import AttemptOutcome
from workload_engine.reports import Report

__all__ = ["Drain", "Message", "Refresh", "SlotGranted", "Wake", "drained"]


@dataclass(frozen=True, slots=True)
class SlotGranted:
    """A concurrency slot the runner waited for was granted for ``task_key``."""

    task_key: str


@dataclass(frozen=True, slots=True)
class Wake:
    """The runner's timer fired (a retry is due)."""


@dataclass(frozen=True, slots=True)
class Refresh:
    """Someone else changed the run, or reports were held back: read it again."""


@dataclass(frozen=True, slots=True)
class Drain:
    """Start nothing more; return once nothing of the run executes here (SPEC §16)."""


Message = AttemptOutcome | ApprovalWait | SlotGranted | Wake | Refresh | Drain | Report
"""What a runner receives on its channel."""


def drained(receive: MemoryObjectReceiveStream[Message]) -> list[Message]:
    """Every message still buffered in ``receive``."""
    found: list[Message] = []
    while True:
        try:
            found.append(receive.receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
            return found
