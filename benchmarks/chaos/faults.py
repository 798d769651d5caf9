"""The fault schedule: which fault, when, and the window during which the service is broken.

Faults are injected one at a time, spread evenly over the soak, cycling through :data:`KINDS`.
Each one waits for the service to be ready first, is injected, and is then watched until the
service is *recovered*: ``/readyz`` answers 200 continuously for ``stable_ready_seconds`` from
the same process. Its window runs from injection to the start of that stretch plus a margin;
503s inside a window are expected, 5xx outside every window are defects. The recovery time of a
fault is injection → the start of that stretch.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from benchmarks.chaos.cluster import Cluster
from benchmarks.chaos.service import Launcher, Supervisor, free_port, is_ready
from benchmarks.chaos.settings import Settings

__all__ = ["KINDS", "Fault", "FaultSchedule"]

KINDS = (
    "sigkill",
    "sigterm",
    "sigstop",
    "pg_stop",
    "terminate_all_backends",
    "terminate_lock_backend",
    "terminate_pool_backends",
    "second_serve",
)
LOCK_APPLICATION = "workload-coordinator-lock"
POOL_APPLICATION = "workload-store"
SECOND_SERVE_BOUND_SECONDS = 30.0
_SIGNALS = {"sigkill": signal.SIGKILL, "sigterm": signal.SIGTERM}


@dataclass
class Fault:
    """One injected fault; times are ``time.monotonic()`` values."""

    kind: str
    injected_at: float
    injection_ended_at: float = 0.0
    recovered_at: float | None = None  # start of the stable-ready stretch; None: never
    window_end: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def recovery_seconds(self) -> float | None:
        """Injection → ``/readyz`` 200 again (for good)."""
        return None if self.recovered_at is None else self.recovered_at - self.injected_at

    def contains(self, start: float, end: float | None = None) -> bool:
        """Whether ``[start, end]`` overlaps this fault's window."""
        return start <= self.window_end and (end if end is not None else start) >= self.injected_at


class FaultSchedule:
    """Injects ``settings.fault_count`` faults over ``settings.fault_seconds``."""

    def __init__(
        self,
        cluster: Cluster,
        supervisor: Supervisor,
        launcher: Launcher,
        settings: Settings,
    ) -> None:
        self._cluster = cluster
        self._supervisor = supervisor
        self._launcher = launcher
        self._settings = settings
        self._rng = random.Random(settings.seed)
        self.faults: list[Fault] = []

    def run(self, started_at: float) -> None:
        """Inject every fault at its time; return when the schedule's duration is over."""
        interval = self._settings.fault_interval_seconds
        for index in range(self._settings.fault_count):
            due = started_at + (index + 0.5) * interval
            _sleep_until(due)
            kind = KINDS[index % len(KINDS)]
            _say(f"fault {index + 1}/{self._settings.fault_count}: {kind}")
            self.faults.append(self.inject(kind))
        _sleep_until(started_at + self._settings.fault_seconds)

    def inject(self, kind: str) -> Fault:
        """Wait until the service is ready, inject ``kind``, watch it recover."""
        settings = self._settings
        if not self._supervisor.wait_ready(settings.recovery_deadline_seconds):
            _say("the service is not ready before a fault: injecting anyway")
        _, process = self._supervisor.current()
        fault = Fault(kind, time.monotonic())
        if kind in _SIGNALS or kind == "sigstop":
            if process is None:
                fault.detail["skipped"] = "no service process was running"
            elif kind == "sigstop":
                self._freeze(process.pid, settings.sigstop_seconds)
            else:
                os.kill(process.pid, _SIGNALS[kind])
        elif kind == "pg_stop":
            fault.detail["down_seconds"] = self._postgres_down()
        elif kind == "second_serve":
            # The primary must not notice: its readiness is watched while the second one lives.
            second = _Second(self._launcher.serve(self._cluster.url, free_port(), "second"))
            fault.recovered_at = self._wait_recovered(fault.injected_at)
            fault.detail.update(second.outcome())
        else:
            application = {
                "terminate_lock_backend": LOCK_APPLICATION,
                "terminate_pool_backends": POOL_APPLICATION,
            }.get(kind)
            fault.detail["terminated"] = self._cluster.terminate_backends(application)
        fault.injection_ended_at = time.monotonic()
        if kind != "second_serve":
            fault.recovered_at = self._wait_recovered(fault.injection_ended_at)
        end = fault.recovered_at if fault.recovered_at is not None else time.monotonic()
        fault.window_end = end + settings.window_margin_seconds
        return fault

    def _freeze(self, pid: int, seconds: float) -> None:
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def _postgres_down(self) -> float:
        low, high = self._settings.pg_down_seconds
        seconds = round(self._rng.uniform(low, high), 2)
        self._cluster.stop_immediately()
        try:
            time.sleep(seconds)
        finally:
            self._cluster.start()
        return seconds

    def _wait_recovered(self, since: float) -> float | None:
        """The start of the first stretch of stable readiness after ``since``; None if none."""
        stable = self._settings.stable_ready_seconds
        deadline = since + self._settings.recovery_deadline_seconds
        streak: tuple[int, float] | None = None  # (generation, start)
        while time.monotonic() < deadline:
            generation, process = self._supervisor.current()
            ready = process is not None and is_ready(self._supervisor.base_url)
            now = time.monotonic()
            if not ready:
                streak = None
            elif streak is None or streak[0] != generation:
                streak = (generation, now)
            elif now - streak[1] >= stable:
                return streak[1]
            time.sleep(0.05)
        return None


class _Second:
    """A second ``workload serve`` on the same database, and when it exited (it must, with 3)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.began = time.monotonic()
        self.exited_at: float | None = None
        self._process = process
        self._waiter = threading.Thread(target=self._wait, name="second-serve", daemon=True)
        self._waiter.start()

    def _wait(self) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=SECOND_SERVE_BOUND_SECONDS)
            self.exited_at = time.monotonic()

    def outcome(self) -> dict[str, Any]:
        """Its exit code (None: it kept running, and was killed) and how long it took."""
        self._waiter.join(timeout=SECOND_SERVE_BOUND_SECONDS + 5)
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=10)
            return {"second_exit_code": None, "second_exit_seconds": None}
        took = None if self.exited_at is None else round(self.exited_at - self.began, 3)
        return {"second_exit_code": self._process.returncode, "second_exit_seconds": took}


def _sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.monotonic()))


def _say(message: str) -> None:
    print(f"[chaos] {message}", file=sys.stderr, flush=True)
