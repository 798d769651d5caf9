"""The mock executor of SPEC §4: sleeps, fails or succeeds as its input says; runs nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from workload_domain.ports import Clock
from workload_domain.records import (
    ExecutorFailure,
    ExecutorRequest,
    ExecutorResult,
    ExecutorSuccess,
    TaskError,
)

__all__ = ["MAX_SLEEP_MS", "MOCK_ACTION", "MockExecutor"]

MOCK_ACTION = "mock"
MAX_SLEEP_MS = 86_400_000
"""One day: longer than any task timeout, so a longer sleep could never finish."""
_FIELDS = frozenset({"sleep_ms", "fail_first", "fail_always", "output"})


class MockExecutor:
    """Implements action ``"mock"`` (any other action given to it fails with ``unknown_action``).

    Input fields: ``sleep_ms`` (int ≥ 0, cancellable, measured on the given clock),
    ``fail_first`` (int ≥ 0: attempts 1..N fail with ``mock_failure``, retryable),
    ``fail_always`` (bool: every attempt fails, retryable), ``output`` (object returned on
    success). Malformed input fails with ``invalid_input``, not retryable.
    """

    actions = frozenset({MOCK_ACTION})
    """The actions this executor executes: ``mock`` only (every other one is remote)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    async def execute(self, request: ExecutorRequest) -> ExecutorResult:
        """Execute one attempt of a mock task."""
        if request.action != MOCK_ACTION:
            return ExecutorFailure(
                TaskError("unknown_action", f"unknown action {request.action!r}", False)
            )
        problem = _input_problem(request.input)
        if problem is not None:
            return ExecutorFailure(TaskError("invalid_input", problem, False))
        sleep_ms: int = request.input.get("sleep_ms", 0)
        if sleep_ms > 0:
            await self._clock.sleep_until(self._clock.now() + timedelta(milliseconds=sleep_ms))
        if request.input.get("fail_always", False):
            return ExecutorFailure(TaskError("mock_failure", "fail_always is set", True))
        fail_first: int = request.input.get("fail_first", 0)
        if request.attempt <= fail_first:
            return ExecutorFailure(
                TaskError(
                    "mock_failure",
                    f"attempt {request.attempt} of the first {fail_first} fails",
                    True,
                )
            )
        output: dict[str, Any] = request.input.get("output", {})
        return ExecutorSuccess(dict(output))


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _input_problem(data: dict[str, Any]) -> str | None:
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        return f"unknown mock input fields: {', '.join(unknown)}"
    for name in ("sleep_ms", "fail_first"):
        if name in data and not _is_count(data[name]):
            return f"{name} must be an integer >= 0"
    if data.get("sleep_ms", 0) > MAX_SLEEP_MS:
        return f"sleep_ms must be at most {MAX_SLEEP_MS}"
    if "fail_always" in data and not isinstance(data["fail_always"], bool):
        return "fail_always must be a boolean"
    if "output" in data and not isinstance(data["output"], dict):
        return "output must be an object"
    return None
