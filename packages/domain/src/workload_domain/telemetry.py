"""The telemetry port: what the core tells the outside about its work (SPEC §12).

The engine, the use cases, the store and (later) the agent runtime report through a
:class:`Telemetry`; the API package's adapter (``workload_api.telemetry``) turns the reports into
Prometheus metrics and OpenTelemetry spans. The domain and the engine never import either
library. :data:`NO_TELEMETRY` is the default everywhere: it does nothing, at no cost.

What is reported, and by whom:

- every committed :class:`~workload_domain.records.RunCommit` (:meth:`Telemetry.committed`), by
  ``Engine.committed`` — runs started and finished, attempts finished, leases expired, and the
  end of remote attempts' spans are all derived from the commit's events;
- a run being executed (:meth:`Telemetry.run`) and a local attempt executing
  (:meth:`Telemetry.attempt`), by the runner: the run span and its attempts' spans;
- a remote attempt handed to a worker (:meth:`Telemetry.claimed`), by the claim use case: the
  schedule-to-start time, and the trace context the worker continues;
- the trace context of the current request (:meth:`Telemetry.current_traceparent`), stored with
  a new run;
- database statements (:meth:`Telemetry.statement`, asked first whether one would be a span:
  :meth:`Telemetry.traces_statements`), by the PostgreSQL store;
- model calls, tool calls and pending approvals, by the agent runtime
  (:meth:`Telemetry.model_call`, :meth:`Telemetry.tool_call`: a tool call run in-process);
- the end of an agent's *remote* tool call (:meth:`Telemetry.tool_call_ended`), by whoever
  wrote it, once: a worker's report or a passed deadline (``RemoteAttempts``), or the store's
  commit that ended the agent attempt (a cancel) and closed its running calls. Its status is
  :func:`tool_call_end`'s.
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import Protocol

from workload_domain.agent.journal import StepRecord, StepStatus
from workload_domain.leases import LeaseLostReason
from workload_domain.records import AttemptRecord, RunCommit, RunRecord
from workload_domain.statuses import AttemptStatus
from workload_domain.workers import ClaimedAttempt

__all__ = [
    "NO_TELEMETRY",
    "TOOL_KIND",
    "TRACEPARENT_PATTERN",
    "UNTRACED_ATTEMPT",
    "AttemptSpan",
    "ModelCall",
    "NoTelemetry",
    "Telemetry",
    "attempt_kind",
    "tool_call_end",
    "valid_traceparent",
]

TRACEPARENT_PATTERN = r"^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$"
"""A W3C ``traceparent`` of version 00 with a valid trace id and parent id."""
_TRACEPARENT = re.compile(TRACEPARENT_PATTERN)


def valid_traceparent(value: str | None) -> str | None:
    """``value`` if it is a well-formed version-00 ``traceparent``, else None."""
    if value is None or not _TRACEPARENT.fullmatch(value):
        return None
    return value


def attempt_kind(action: str) -> str:
    """The ``kind`` label of an attempt (SPEC §12): ``mock``, ``agent`` or ``remote``.

    Tool calls (``tool``) are reported by the agent runtime, which knows them as such.
    """
    if action in ("mock", "agent"):
        return action
    return "remote"


TOOL_KIND = "tool"
"""The ``kind`` label of a tool call's end in ``workload_attempts_finished_total``."""
LEASE_EXPIRED = "lease_expired"
ATTEMPT_ENDED = "attempt_ended"


def tool_call_end(
    step: StepRecord, closed_by: AttemptRecord | None = None
) -> tuple[AttemptStatus, str | None]:
    """How an ended remote tool call counts, as an attempt would (SPEC §12): status, error code.

    A tool call is executed like a remote attempt (§11) and ends like one: ``succeeded`` or
    ``failed`` as its worker reports; ``interrupted`` (``lease_expired``) when its lease ran
    out; ``timed_out`` past its agent attempt's deadline; ``failed`` when no worker claimed it
    within schedule-to-start. ``closed_by`` is the agent attempt whose end closed the call (a
    commit): ``canceled`` with its run, ``timed_out`` with its attempt, else ``interrupted``.
    """
    code = (step.response or {}).get("code")
    error = code if isinstance(code, str) else None
    if closed_by is not None:
        if closed_by.status in (AttemptStatus.CANCELED, AttemptStatus.TIMED_OUT):
            return closed_by.status, closed_by.status.value
        return AttemptStatus.INTERRUPTED, ATTEMPT_ENDED
    if step.status is StepStatus.SUCCEEDED:
        return AttemptStatus.SUCCEEDED, None
    if step.lease_end == LeaseLostReason.EXPIRED:
        return AttemptStatus.INTERRUPTED, error or LEASE_EXPIRED
    if step.lease_end == LeaseLostReason.TIMED_OUT and step.worker_id is not None:
        return AttemptStatus.TIMED_OUT, error
    if step.lease_end == LeaseLostReason.CANCELED:
        return AttemptStatus.CANCELED, error
    return AttemptStatus.FAILED, error


class AttemptSpan(Protocol):
    """The span of one local attempt, told how it ended."""

    def finished(self, status: str, error_code: str | None) -> None:
        """The attempt ended with ``status`` (and ``error_code`` when it did not succeed)."""
        ...


class ModelCall(Protocol):
    """One model call in progress (a GenAI ``chat {model}`` span), told what it cost."""

    def usage(self, *, input_tokens: int | None, output_tokens: int | None) -> None:
        """The tokens the provider reported for this call."""
        ...

    def outcome(self, outcome: str) -> None:
        """How the call ended: ``ok`` (the default), or an error code.

        For example ``model_unavailable`` or ``model_error``; an exception leaving the block
        sets its class name.
        """
        ...


class Telemetry(Protocol):
    """Where the service reports its work; see the module's docstring."""

    @property
    def tracing(self) -> bool:
        """Whether spans are recorded (adapters skip per-statement work when they are not)."""
        ...

    def committed(self, commit: RunCommit) -> None:
        """A commit of any writer succeeded (called exactly once per commit)."""
        ...

    def flush(self) -> None:
        """Export what is still buffered (the lifecycle calls it when the service stops)."""
        ...

    def run(self, run: RunRecord) -> AbstractContextManager[None]:
        """This process executes ``run`` within the block (the run span is current in it).

        The span starts when this is called: enter the result at once, and once.
        """
        ...

    def attempt(
        self, run_id: str, task_key: str, attempt: int, action: str
    ) -> AbstractContextManager[AttemptSpan]:
        """A local attempt executes within the block (its span is current in it)."""
        ...

    def claimed(self, worker_id: str, claimed: ClaimedAttempt, now: datetime) -> str | None:
        """``worker_id`` claimed ``claimed`` at ``now``; the ``traceparent`` to hand it, or None."""
        ...

    def current_traceparent(self) -> str | None:
        """The W3C ``traceparent`` of the current context (the request's span), or None."""
        ...

    def traces_statements(self) -> bool:
        """Whether a statement run now would be a span (within a traced request, run or attempt).

        A store asks before it names a statement: most statements are not traced (an unsampled
        request's, a background duty's), and naming one costs more than asking.
        """
        ...

    def statement(self, name: str, sql: str) -> AbstractContextManager[object]:
        """A database statement (``name``: its named query, or its first keyword) runs."""
        ...

    def model_call(
        self, *, provider: str, model: str, operation: str = "chat"
    ) -> AbstractContextManager[ModelCall]:
        """A model call runs within the block (the agent runtime's hook).

        It is a GenAI span ``{operation} {model}``, and counts in
        ``workload_model_calls_total`` and ``workload_model_tokens_total``.
        """
        ...

    def tool_call(
        self, name: str, *, call_id: str | None = None
    ) -> AbstractContextManager[AttemptSpan]:
        """A tool call runs within the block: an ``execute_tool {name}`` span.

        The status given to the handle's ``finished`` counts in
        ``workload_attempts_finished_total{kind="tool"}``.
        """
        ...

    def tool_call_ended(self, step: StepRecord, closed_by: AttemptRecord | None = None) -> None:
        """A remote tool call's step ended (reported once, by whoever wrote its end).

        It counts in ``workload_attempts_finished_total{kind="tool"}`` with
        :func:`tool_call_end`'s status (a lease expiry also in
        ``workload_leases_expired_total``), and ends its ``execute_tool {name}`` span.
        """
        ...


class _NoAttemptSpan:
    __slots__ = ()

    def finished(self, status: str, error_code: str | None) -> None:
        del status, error_code


class _NoModelCall:
    __slots__ = ()

    def usage(self, *, input_tokens: int | None, output_tokens: int | None) -> None:
        del input_tokens, output_tokens

    def outcome(self, outcome: str) -> None:
        del outcome


_NO_ATTEMPT_SPAN = _NoAttemptSpan()
_NO_SPAN = nullcontext()
_NO_MODEL_CALL = nullcontext(_NoModelCall())
UNTRACED_ATTEMPT: AbstractContextManager[AttemptSpan] = nullcontext(_NO_ATTEMPT_SPAN)
"""A local attempt (or tool call) without a span: one object, entered by any number at once.

The no-span paths return shared ``nullcontext`` objects rather than ``@contextmanager``
generators, which cost a generator and its frames at every run and attempt.
"""


class NoTelemetry:
    """Telemetry that records nothing (the default of the engine, the store and tests)."""

    __slots__ = ()

    @property
    def tracing(self) -> bool:
        """Never."""
        return False

    def committed(self, commit: RunCommit) -> None:
        """Nothing to count."""
        del commit

    def flush(self) -> None:
        """Nothing buffered."""

    def run(self, run: RunRecord) -> AbstractContextManager[None]:
        """No span."""
        del run
        return _NO_SPAN

    def attempt(
        self, run_id: str, task_key: str, attempt: int, action: str
    ) -> AbstractContextManager[AttemptSpan]:
        """No span."""
        del run_id, task_key, attempt, action
        return UNTRACED_ATTEMPT

    def claimed(self, worker_id: str, claimed: ClaimedAttempt, now: datetime) -> str | None:
        """The run's stored context, passed along unchanged."""
        del worker_id, now
        return claimed.traceparent

    def current_traceparent(self) -> str | None:
        """None: no context is known."""
        return None

    def traces_statements(self) -> bool:
        """Never."""
        return False

    def statement(self, name: str, sql: str) -> AbstractContextManager[object]:
        """No span."""
        del name, sql
        return _NO_SPAN

    def model_call(
        self, *, provider: str, model: str, operation: str = "chat"
    ) -> AbstractContextManager[ModelCall]:
        """No span, no count."""
        del provider, model, operation
        return _NO_MODEL_CALL

    def tool_call(
        self, name: str, *, call_id: str | None = None
    ) -> AbstractContextManager[AttemptSpan]:
        """No span, no count."""
        del name, call_id
        return UNTRACED_ATTEMPT

    def tool_call_ended(self, step: StepRecord, closed_by: AttemptRecord | None = None) -> None:
        """No span, no count."""
        del step, closed_by


NO_TELEMETRY: Telemetry = NoTelemetry()
"""The telemetry that records nothing."""
