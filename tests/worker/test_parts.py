"""The worker's parts on their own: configuration, backoff, lease clock, outcomes, context."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest

from tests.sdk.fakes import CLAIMED
from workload_sdk import AsyncClient, ClaimedAttempt
from workload_worker import (
    Context,
    NonRetryableError,
    Worker,
    WorkerConfigError,
    WorkerError,
    default_worker_id,
)
from workload_worker import _worker as worker_module
from workload_worker._backoff import Backoff
from workload_worker._lease import LeaseClock
from workload_worker._outcome import Completed, Failed, failure_of, outcome_of

# -- configuration -------------------------------------------------------------------------------

BAD_SETTINGS: list[tuple[str, dict[str, Any], str]] = [
    ("no-queue", {"queues": []}, "queues"),
    ("queue-string", {"queues": "default"}, "queues"),
    ("queue-upper", {"queues": ["Default"]}, "queue 'Default'"),
    ("queue-long", {"queues": ["q" * 64]}, "does not match"),
    ("concurrency-zero", {"concurrency": 0}, "concurrency"),
    ("worker-id-space", {"worker_id": "my worker"}, "worker_id"),
    ("worker-id-long", {"worker_id": "w" * 129}, "worker_id"),
    ("grace-negative", {"grace_seconds": -1}, "grace_seconds"),
    ("wait-long", {"wait_seconds": 51}, "wait_seconds"),
    ("backoff", {"backoff_initial_seconds": 2, "backoff_max_seconds": 1}, "backoff"),
]


@pytest.mark.parametrize(
    ("settings", "message"), [c[1:] for c in BAD_SETTINGS], ids=[c[0] for c in BAD_SETTINGS]
)
def test_settings_the_api_would_refuse_are_refused(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Worker(**settings)


BAD_ACTIONS = [
    ("empty", ""),
    ("long", "a" * 129),
    ("mock", "mock"),
    ("agent", "agent"),
    ("space", "has space"),  # the API refuses it (ADR 0023): refused before serving
    ("newline", "a\nb"),
    ("non-ascii", "résumé"),
]


@pytest.mark.parametrize("name", [c[1] for c in BAD_ACTIONS], ids=[c[0] for c in BAD_ACTIONS])
def test_bad_action_names_are_refused(name: str) -> None:
    with pytest.raises(WorkerConfigError):
        Worker().action(name)


def test_a_worker_declares_at_most_256_actions() -> None:
    worker = Worker()
    for n in range(256):
        worker.action(f"a{n}:v1")(lambda ctx, input: {})
    with pytest.raises(WorkerConfigError, match="at most 256"):
        worker.action("one-more")


def test_an_action_is_declared_once_and_the_function_is_kept() -> None:
    worker = Worker(queues=["b", "a", "b"])

    def handler(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        return input

    assert worker.action("z")(handler) is handler
    worker.action("y")(handler)
    with pytest.raises(WorkerConfigError, match="already declared"):
        worker.action("z")(handler)
    assert worker.actions == ["y", "z"]
    assert worker.queues == ["b", "a"]  # deduplicated, in order
    assert "w" in repr(worker)


def test_configure_overrides_only_what_is_given() -> None:
    worker = Worker(queues=["a"], concurrency=2, url="http://code.test", token="t1")
    worker.configure(queues=["b"], token="t2")
    assert (worker.queues, worker.concurrency, worker.url, worker.token) == (
        ["b"],
        2,
        "http://code.test",
        "t2",
    )
    with pytest.raises(WorkerConfigError):
        worker.configure(concurrency=0)


def test_the_default_worker_id_is_one_the_api_accepts() -> None:
    assert re.fullmatch(r"[A-Za-z0-9._-]{1,128}", default_worker_id())
    assert Worker().worker_id == default_worker_id()


@pytest.mark.anyio
async def test_serving_needs_an_action_and_a_worker_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("WORKLOAD_WORKER_TOKEN", raising=False)
    monkeypatch.setenv("WORKLOAD_TOKEN", "an-operator-token")  # never used by a worker
    worker = Worker()
    with pytest.raises(WorkerConfigError, match="no action"):
        await worker.serve()
    worker.action("a")(lambda ctx, input: {})
    with pytest.raises(WorkerConfigError, match="WORKLOAD_WORKER_TOKEN"):
        await worker.serve()
    assert not worker.is_serving
    # A token no header can carry: a configuration error (workload worker: exit 2), not a
    # traceback, and before any MCP server is started.
    monkeypatch.setenv("WORKLOAD_WORKER_TOKEN", "tok\r")
    with pytest.raises(WorkerConfigError, match="the token holds what an HTTP header cannot"):
        await worker.serve()
    assert not worker.is_serving


@pytest.mark.anyio
async def test_its_own_client_has_a_connection_for_every_report_and_heartbeat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each slot may have a report and a heartbeat in flight, besides the claim: with httpx's
    # default pool (100) a busy worker's heartbeats would wait behind its reports.
    made: list[dict[str, Any]] = []

    class Recorded(AsyncClient):
        def __init__(self, **options: Any) -> None:
            made.append(options)
            super().__init__(**options)

    monkeypatch.setattr(worker_module, "AsyncClient", Recorded)
    worker = Worker(concurrency=150, url="http://127.0.0.1:9", token="worker-token")
    worker.action("a")(lambda ctx, input: {})
    with anyio.move_on_after(0.5):  # the refused connection is only retried: stop it
        await worker.serve()
    assert [(o["max_connections"], o["max_retries"]) for o in made] == [(301, 0)]


def test_errors_form_one_tree() -> None:
    assert issubclass(NonRetryableError, WorkerError)
    assert issubclass(WorkerConfigError, WorkerError)
    assert issubclass(WorkerConfigError, ValueError)


# -- backoff -------------------------------------------------------------------------------------


def test_backoff_doubles_with_jitter_up_to_its_maximum_and_resets() -> None:
    backoff = Backoff(0.5, 4.0)
    delays = [backoff.next_delay() for _ in range(8)]
    for n, delay in enumerate(delays):
        full = min(0.5 * 2**n, 4.0)
        assert full / 2 <= delay <= full
    backoff.reset()
    assert backoff.next_delay() <= 0.5
    with pytest.raises(ValueError, match="backoff"):
        Backoff(0, 1)


# -- the lease clock -------------------------------------------------------------------------------


def test_the_lease_clock_counts_durations_not_the_server_clock() -> None:
    skewed = datetime(2000, 1, 1, tzinfo=UTC)  # the server's clock is far from ours
    item = ClaimedAttempt.model_validate(
        {
            **CLAIMED,
            "heartbeat_timeout_seconds": 30,
            "lease_expires_at": skewed + timedelta(seconds=30),
            "timeout_at": skewed + timedelta(seconds=120),
        }
    )
    clock = LeaseClock.of(item, now=1000.0)
    assert (clock.duration, clock.interval) == (30.0, 10.0)
    assert (clock.expires, clock.deadline, clock.renewed_at) == (1030.0, 1120.0, 1000.0)
    clock.renewed(1012.5)
    assert (clock.expires, clock.renewed_at) == (1042.5, 1012.5)


@pytest.mark.parametrize(
    ("lease", "sent", "give_up"),
    [
        (30.0, 10.0, 20.0),  # an interval: a retry still has one before the lease ends
        (3.0, 1.0, 2.0),  # an interval, which is the least wait (1 s)
        (1.5, 0.5, 1.5),  # the least wait, but not past the lease's end
        (0.6, 0.2, 0.6),  # the lease's end, more than an interval away
        (0.6, 0.5, 0.7),  # the lease's end is less than an interval away: an interval
        (0.6, 2.0, 2.2),  # past the lease's end (locally): an interval, never at once
    ],
)
def test_a_heartbeat_is_given_up_after_an_interval_never_past_the_lease(
    lease: float, sent: float, give_up: float
) -> None:
    clock = LeaseClock(lease, expires=lease, deadline=1000.0, renewed_at=0.0)
    assert clock.give_up_at(sent) == pytest.approx(give_up)


# -- outcomes -----------------------------------------------------------------------------------


class Refused(NonRetryableError):
    """A named non-retryable error."""


OUTCOMES: list[tuple[str, object, Completed | Failed]] = [
    ("dict", {"a": [1, "x", None]}, Completed({"a": [1, "x", None]})),
    ("empty", {}, Completed({})),
    ("none", None, Failed("invalid_output", "returned None", False)),
    ("list", [1], Failed("invalid_output", "returned list", False)),
    ("nan", {"x": float("nan")}, Failed("invalid_output", "not JSON", False)),
    ("object", {"x": object()}, Failed("invalid_output", "not JSON", False)),
]


@pytest.mark.parametrize(
    ("result", "expected"), [c[1:] for c in OUTCOMES], ids=[c[0] for c in OUTCOMES]
)
def test_a_return_value_becomes_complete_or_invalid_output(
    result: object, expected: Completed | Failed
) -> None:
    outcome = outcome_of(result)
    if isinstance(expected, Completed):
        assert outcome == expected
    else:
        assert isinstance(outcome, Failed)
        assert (outcome.code, outcome.retryable) == (expected.code, expected.retryable)
        assert expected.message in outcome.message


FAILURES: list[tuple[str, Exception, tuple[str, str, bool]]] = [
    ("value-error", ValueError("bad"), ("ValueError", "bad", True)),
    ("no-message", KeyError(), ("KeyError", "KeyError", True)),
    ("non-retryable", NonRetryableError("stop"), ("NonRetryableError", "stop", False)),
    ("subclass", Refused("no"), ("Refused", "no", False)),
    ("code", NonRetryableError("gone", code="doc_gone"), ("doc_gone", "gone", False)),
]


@pytest.mark.parametrize(
    ("exc", "expected"), [c[1:] for c in FAILURES], ids=[c[0] for c in FAILURES]
)
def test_an_exception_becomes_a_failure(exc: Exception, expected: tuple[str, str, bool]) -> None:
    failure = failure_of(exc)
    assert (failure.code, failure.message, failure.retryable) == expected


def test_messages_and_codes_are_bounded() -> None:
    failure = failure_of(ValueError("m" * 5000))
    assert len(failure.message) == 2000
    assert failure.message.endswith("…")
    named = type("E" * 300, (Exception,), {})
    assert failure_of(named()).code == "E" * 128


@pytest.mark.parametrize(
    ("name", "code"),
    [
        pytest.param("Ошибка", "______", id="another-script"),
        pytest.param("Bad\x1b[31m", "Bad__31m", id="escape"),
        pytest.param("ok.Err:v1-x_y", "ok.Err:v1-x_y", id="token-kept"),
    ],
)
def test_codes_are_what_the_api_accepts(name: str, code: str) -> None:
    """ADR 0023: an error code is 1-128 of A-Z a-z 0-9 . _ : -, whatever the class is named."""
    assert failure_of(type(name, (Exception,), {})()).code == code
    assert failure_of(NonRetryableError("m", code=name)).code == code


# -- the context ----------------------------------------------------------------------------------


def test_a_standalone_context_records_progress() -> None:
    ctx = Context.standalone(run_id="r", task_key="t", run_input={"a": 1}, upstream={"u": {}})
    assert (ctx.run_id, ctx.task_key, ctx.attempt, ctx.kind) == ("r", "t", 1, "task")
    assert (ctx.run_input, ctx.upstream) == ({"a": 1}, {"u": {}})
    assert ctx.idempotency_key == "r:t"
    ctx.heartbeat({"done": 2})
    ctx.heartbeat()
    assert ctx.progress == {"done": 2}
    assert not ctx.cancelled.is_set()
    assert ctx.cancel_reason is None
    with pytest.raises(TypeError):
        ctx.heartbeat([1, 2])  # type: ignore[arg-type]


def test_the_idempotency_key_is_the_same_for_every_attempt_of_a_task() -> None:
    first = Context(ClaimedAttempt.model_validate({**CLAIMED, "attempt": 1}))
    second = Context(ClaimedAttempt.model_validate({**CLAIMED, "attempt": 2, "attempt_id": "x"}))
    assert first.idempotency_key == second.idempotency_key == f"{CLAIMED['run_id']}:a"
    call = Context(ClaimedAttempt.model_validate({**CLAIMED, "tool_call_id": "c1"}))
    assert call.idempotency_key == f"{CLAIMED['run_id']}:a:c1"
