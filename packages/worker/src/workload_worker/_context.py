"""What a handler is told about the attempt it runs: :class:`Context`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio

from workload_sdk import ClaimedAttempt

__all__ = ["Context", "JsonObject"]

JsonObject = dict[str, Any]
HeartbeatSink = Callable[[JsonObject | None], None]


def _ignore(progress: JsonObject | None) -> None:
    del progress


class Context:
    """The attempt a handler runs, and its line back to the worker.

    Attributes:
        run_id: The run.
        workflow_id: The run's workflow.
        version: The workflow version the run executes.
        task_key: The task this attempt executes.
        attempt: The attempt's number (1, 2 … across retries of the task).
        attempt_id: The attempt's id (the one the worker reports on).
        queue: The queue the attempt was claimed from.
        action: The action (the handler's name).
        kind: ``"task"``, or ``"tool_call"`` when an agent calls this action as a tool.
        run_input: The run's input.
        upstream: The outputs of the task's direct dependencies, by task key.
        timeout_at: When the server times the attempt out (the handler is cancelled then).
        traceparent: The W3C trace context of the run, or None.
        tool_call_id: For a tool call, the call's id (else None).
        tool: For a tool call, the tool's name (else None).
        idempotency_key: Stable for the task across its attempts (``run_id:task_key``, plus
            ``:tool_call_id`` for a tool call): pass it to the systems your handler changes
            (payments, e-mails, uploads) so that a retried attempt does not do it twice.
        cancelled: Set when the worker stops waiting for this handler: the lease was lost
            (the run was canceled, the lease expired, another report won), ``timeout_at``
            passed, or the worker is shutting down. An async handler is cancelled as well; a
            sync handler (in a thread) cannot be, so it should check ``cancelled.is_set()``
            between steps. Whatever the handler returns after that is dropped.
        progress: The last progress given to :meth:`heartbeat`, or None.
    """

    def __init__(
        self,
        item: ClaimedAttempt,
        *,
        heartbeat: HeartbeatSink = _ignore,
    ) -> None:
        self.run_id = item.run_id
        self.workflow_id = item.workflow_id
        self.version = item.version
        self.task_key = item.task_key
        self.attempt = item.attempt
        self.attempt_id = item.attempt_id
        self.queue = item.queue
        self.action = item.action
        self.kind = item.kind
        self.run_input: JsonObject = dict(item.run_input)
        self.upstream: JsonObject = dict(item.upstream)
        self.timeout_at = item.timeout_at
        self.traceparent = item.traceparent
        self.tool_call_id = item.tool_call_id
        self.tool = item.tool
        key = f"{item.run_id}:{item.task_key}"
        self.idempotency_key = key if item.tool_call_id is None else f"{key}:{item.tool_call_id}"
        self.cancelled = anyio.Event()
        self.progress: JsonObject | None = None
        self._cancel_reason: str | None = None
        self._sink = heartbeat

    @classmethod
    def standalone(
        cls,
        *,
        run_id: str = "run-1",
        task_key: str = "task",
        attempt: int = 1,
        action: str = "action",
        run_input: Mapping[str, Any] | None = None,
        upstream: Mapping[str, Any] | None = None,
        timeout_seconds: float = 300.0,
    ) -> Context:
        """A context bound to no worker, to call a handler directly (tests, scripts).

        :meth:`heartbeat` only records ``progress``; ``cancelled`` is never set.
        """
        now = datetime.now(UTC)
        item = ClaimedAttempt(
            kind="task",
            attempt_id=f"{run_id}:{task_key}:{attempt}",
            lease_token="standalone",  # noqa: S106 - no server: the token is never sent
            lease_expires_at=now + timedelta(seconds=30),
            timeout_at=now + timedelta(seconds=timeout_seconds),
            heartbeat_timeout_seconds=30,
            run_id=run_id,
            workflow_id="standalone",
            version=1,
            task_key=task_key,
            attempt=attempt,
            queue="default",
            action=action,
            input={},
            run_input=dict(run_input or {}),
            upstream=dict(upstream or {}),
        )
        return cls(item)

    @property
    def cancel_reason(self) -> str | None:
        """Why ``cancelled`` was set: ``lease_lost``, ``timed_out`` or ``worker_shutdown``."""
        return self._cancel_reason

    def heartbeat(self, progress: Mapping[str, Any] | None = None) -> None:
        """Ask for a heartbeat now, with ``progress`` (a JSON object, at most 64 KiB) if given.

        It does not block and does not wait for the server: the worker heartbeats on its own
        every third of the heartbeat timeout, and sends this one soon (a few per second at
        most). Call it from the handler, sync or async, e.g. after each item of a long loop.
        Progress is shown on the attempt resource (``progress``).

        Raises:
            TypeError: ``progress`` is not a mapping.
        """
        if progress is not None and not isinstance(progress, Mapping):
            raise TypeError("progress must be a JSON object (a mapping)")
        recorded = None if progress is None else dict(progress)
        if recorded is not None:
            self.progress = recorded
        self._sink(recorded)

    def _cancel(self, reason: str) -> None:
        """Tell the handler to stop (in the worker's event loop)."""
        if self._cancel_reason is None:
            self._cancel_reason = reason
        self.cancelled.set()

    def __repr__(self) -> str:
        return (
            f"Context(run_id={self.run_id!r}, task_key={self.task_key!r}, "
            f"attempt={self.attempt}, action={self.action!r})"
        )
