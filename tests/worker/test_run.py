"""``Worker.run()``: blocking, in the main thread, stopped by SIGTERM / SIGINT."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.waiting import wait_until
from tests.worker.conftest import MakeWorker
from tests.worker.fake_server import FakeControlPlane
from workload_worker import Context


@pytest.fixture
def safe_signals() -> Iterator[None]:
    """A signal that arrives before the worker listens must not kill the test run."""
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def _send_when(condition: Callable[[], object], *signals: signal.Signals) -> threading.Thread:
    """From another thread: once ``condition`` holds, send ``signals`` to this process."""

    def send() -> None:
        for sig in signals:
            wait_until(condition, message="the worker listens")
            os.kill(os.getpid(), sig)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


@pytest.mark.usefixtures("safe_signals")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_worker_after_its_handlers(
    fake: FakeControlPlane,
    make_worker: MakeWorker,
    sig: signal.Signals,
    caplog: pytest.LogCaptureFixture,
) -> None:
    worker = make_worker(grace_seconds=30)
    started = threading.Event()
    release = threading.Event()

    @worker.action("hold")
    def hold(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        started.set()
        wait_until(release.is_set, message="released")
        return {"done": True}

    attempt = fake.add("hold")
    sender = _send_when(started.is_set, sig)

    def release_once_stopping() -> None:
        wait_until(lambda: f"{sig.name}: stopping" in caplog.text, message="stopping")
        release.set()

    threading.Thread(target=release_once_stopping, daemon=True).start()
    worker.run()  # returns once the handler finished: drained, not cut off
    sender.join(5)
    assert attempt.output == {"done": True}
    assert f"{sig.name}: stopping" in caplog.text


@pytest.mark.usefixtures("safe_signals")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_an_idle_worker_without_waiting_for_its_claim(
    fake: FakeControlPlane,
    make_worker: MakeWorker,
    sig: signal.Signals,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The defaults: a claim waits 20 s on the server, running handlers get 30 s.
    worker = make_worker(wait_seconds=20, grace_seconds=30)
    worker.action("never")(lambda ctx, input: {})
    sender = _send_when(lambda: len(fake.claims) == 1, sig)  # the claim waits on the server
    worker.run()  # returns once stopped
    sender.join(5)
    assert not worker.is_serving
    assert f"{sig.name}: stopping" in caplog.text
    # The waiting claim was cut off, not answered after its 20 s: no claim answer was processed.
    assert (fake.hung_up, fake.answered) == (1, [])
    assert len(fake.claims) == 1


@pytest.mark.usefixtures("safe_signals")
def test_a_second_signal_stops_at_once(
    fake: FakeControlPlane, make_worker: MakeWorker, caplog: pytest.LogCaptureFixture
) -> None:
    worker = make_worker(grace_seconds=600)
    started = threading.Event()

    @worker.action("forever")
    def forever(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        started.set()
        wait_until(ctx.cancelled.is_set, timeout=60, message="cancelled")
        return {}

    attempt = fake.add("forever")
    _send_when(started.is_set, signal.SIGTERM, signal.SIGINT)
    worker.run()
    assert attempt.error is not None
    assert (attempt.error["code"], attempt.error["retryable"]) == ("worker_shutdown", True)
    # Two signals pending at once are handled in signal-number order (SIGINT first): whichever
    # came second stops the worker at once.
    stops = [r.getMessage() for r in caplog.records if "again: stopping now" in r.getMessage()]
    assert len(stops) == 1
    assert stops[0] in {"SIGINT again: stopping now", "SIGTERM again: stopping now"}


@pytest.mark.usefixtures("safe_signals")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_the_same_signal_delivered_twice_at_once_keeps_the_grace_period(
    fake: FakeControlPlane,
    make_worker: MakeWorker,
    sig: signal.Signals,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A process group signalled through `uv run` gets the signal directly and forwarded,
    # milliseconds apart: one stop, not "again: stop now" (the handlers keep their grace).
    worker = make_worker(grace_seconds=30)
    started = threading.Event()
    release = threading.Event()

    @worker.action("hold")
    def hold(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        started.set()
        wait_until(release.is_set, message="released")
        return {"done": True}

    attempt = fake.add("hold")
    _send_when(started.is_set, sig)
    _send_when(lambda: f"{sig.name}: stopping" in caplog.text, sig)

    def release_once_repeated() -> None:
        wait_until(lambda: "the same stop" in caplog.text, message="the repeat")
        release.set()

    threading.Thread(target=release_once_repeated, daemon=True).start()
    worker.run()
    assert attempt.output == {"done": True}
    assert "again: stopping now" not in caplog.text


def test_run_outside_the_main_thread_is_stopped_by_stop(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker()
    worker.action("ok")(lambda ctx, input: {"ok": True})
    attempt = fake.add("ok")
    thread = threading.Thread(target=worker.run)
    thread.start()
    wait_until(lambda: attempt.status == "succeeded", message="served")
    worker.stop()
    thread.join(10)
    assert not thread.is_alive()


def test_stop_now_from_another_thread_cancels_a_running_handler(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    # Worker.stop runs Serving.stop in the worker's loop: the handler is cancelled at once and
    # reported worker_shutdown (not left to finish, nor the drain to wait for ever).
    worker = make_worker(grace_seconds=30)
    started = threading.Event()

    @worker.action("long")
    def long(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        started.set()
        for _ in range(2000):  # 20 s at most, as a sync handler checks its cancellation
            if ctx.cancelled.is_set():
                break
            time.sleep(0.01)
        return {"finished": True}

    attempt = fake.add("long")
    thread = threading.Thread(target=worker.run)
    thread.start()
    assert started.wait(10)
    worker.stop(now=True)
    thread.join(15)
    assert not thread.is_alive()
    report = fake.recorded(attempt.attempt_id)
    assert report is not None
    assert (report.route, report.body["error"]["code"]) == ("fail", "worker_shutdown")


@pytest.mark.usefixtures("safe_signals")
def test_serve_with_handle_signals_stops_on_sigterm_after_its_handler(
    fake: FakeControlPlane, make_worker: MakeWorker, caplog: pytest.LogCaptureFixture
) -> None:
    # `await worker.serve(handle_signals=True)` in an application's own loop: its own signal
    # receiver, from serve()'s start until it returns.
    worker = make_worker(grace_seconds=30)
    started = threading.Event()

    @worker.action("hold")
    def hold(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        started.set()
        wait_until(lambda: "SIGTERM: stopping" in caplog.text, message="stopping")
        return {"done": True}

    attempt = fake.add("hold")
    sender = _send_when(started.is_set, signal.SIGTERM)
    asyncio.run(worker.serve(handle_signals=True))  # returns once the handler finished
    sender.join(5)
    assert attempt.output == {"done": True}
    assert not worker.is_serving
