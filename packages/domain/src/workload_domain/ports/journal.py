"""The journal store port: an agent's steps and tool calls."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from workload_domain.agent.journal import StepRecord
from workload_domain.cursors import Page
from workload_domain.leases import LeasedToolCall

__all__ = ["JournalStore"]


class JournalStore(Protocol):
    """The step journal of agent attempts (SPEC §11), and the leases of remote tool calls.

    Steps are the attempt's, not the run's: they are written without a new revision, but only
    while their attempt is running (a commit that ends an agent attempt also ends its running
    steps, ``failed``). Every write returns the step *as stored*, so that the agent loop builds
    its conversation from exactly what a replay will read.
    """

    async def list_steps(self, run_id: str, task_key: str, attempt: int) -> Sequence[StepRecord]:
        """The journal of one attempt, by sequence (empty when it has none)."""
        ...

    async def begin_step(self, step: StepRecord) -> StepRecord | None:
        """Insert a ``running`` step (a remote tool call is queued in ``step.queue``).

        None (nothing written) when its attempt is not running or its sequence is taken.
        """
        ...

    async def finish_step(
        self,
        step: StepRecord,
        *,
        token_digest: str | None = None,
        deadline_passed: bool = False,
    ) -> StepRecord | None:
        """End a running step, and add what it used to its task's and run's usage, atomically.

        The step's status, response, usage and ``finished_at`` are ``step``'s.
        With ``token_digest`` (a worker's report) only while that token holds the lease at
        ``step.finished_at``; with ``deadline_passed`` (the lease reaper) only if the tool
        call's lease, start-to-close or schedule-to-start time has passed by then. None
        (nothing written) when the step is not running or the condition fails.
        """
        ...

    async def page_steps(
        self, run_id: str, task_key: str, cursor: str | None, limit: int
    ) -> Page[StepRecord]:
        """A task's steps by ``(attempt, sequence)``; ``RunNotFound`` / ``TaskNotFound``."""
        ...

    async def find_tool_call(self, step_id: str) -> LeasedToolCall | None:
        """A remote tool call by its step id, with its lease token's digest (None: unknown)."""
        ...

    async def due_tool_calls(self, now: datetime, limit: int) -> Sequence[StepRecord]:
        """Running remote tool calls whose lease or deadline has passed, oldest first.

        Their lease, start-to-close or schedule-to-start time; at most ``limit``.
        """
        ...
