"""The executor port: what runs an attempt of a local action."""

from __future__ import annotations

from typing import Protocol

from workload_domain.records import (
    ExecutorRequest,
    ExecutorResult,
)

__all__ = ["Executor"]


class Executor(Protocol):
    """Executes one attempt of a task. Cancellation (anyio) must stop it promptly.

    An executor runs in the coordinator's process; the actions it executes are *local*. Every
    other action is *remote*: its attempts wait in a queue for a worker (SPEC §10).
    """

    @property
    def actions(self) -> frozenset[str]:
        """The actions this executor executes."""
        ...

    async def execute(self, request: ExecutorRequest) -> ExecutorResult:
        """Execute the attempt and report its outcome; failures are results, not exceptions."""
        ...
