"""The executor of the coordinator's built-in actions: each action to the executor serving it."""

from __future__ import annotations

from workload_domain.ports import Executor
from workload_domain.records import ExecutorFailure, ExecutorRequest, ExecutorResult, TaskError

__all__ = ["LocalExecutors"]


class LocalExecutors:
    """Routes each attempt to the executor of its action (``mock``, ``agent``).

    ``resumable`` are the actions whose attempts a new coordinator resumes instead of
    interrupting (SPEC §10–§11: ``agent``).
    """

    def __init__(self, *executors: Executor, resumable: frozenset[str] = frozenset()) -> None:
        self._by_action: dict[str, Executor] = {}
        for executor in executors:
            for action in executor.actions:
                if action in self._by_action:
                    raise ValueError(f"two executors serve action {action!r}")
                self._by_action[action] = executor
        self.actions = frozenset(self._by_action)
        self.resumable = resumable & self.actions

    async def execute(self, request: ExecutorRequest) -> ExecutorResult:
        """Execute the attempt with the executor of its action."""
        executor = self._by_action.get(request.action)
        if executor is None:
            return ExecutorFailure(
                TaskError("unknown_action", f"no executor serves {request.action!r}", False)
            )
        return await executor.execute(request)
