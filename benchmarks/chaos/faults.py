"""The fault schedule: which fault, on which process, when, and the window it breaks things in.

Faults are injected one at a time, spread evenly over the soak, cycling through the kinds of
:func:`~benchmarks.chaos.settings.fault_kinds`. A service fault's target is the leader (a
standby pair: the process that executes) or each service process in turn (replicas); a worker
fault's, each worker in turn. Each fault waits for every process to be ready first, is
injected, and is then watched until everything is *recovered*: every service's ``/readyz``
answers 200 and every worker runs, continuously for ``stable_ready_seconds`` with no process
restarted. Its window runs from injection to the start of that stretch plus a margin; 503s
inside a window are expected, 5xx outside every window are defects. The recovery time of a
fault is injection → the start of that stretch; its takeover time (from the monitor) is
injection → execution wholly in other processes' hands.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.chaos.cluster import Cluster
from benchmarks.chaos.fleet import Fleet
from benchmarks.chaos.probe import late_report
from benchmarks.chaos.service import Launcher, Supervisor, free_port
from benchmarks.chaos.settings import Settings, fault_kinds

__all__ = ["Fault", "FaultSchedule"]

LOCK_APPLICATION = "workload-coordinator-lock"
MEMBERSHIP_APPLICATION = "workload-replica"  # a replica's lock: its membership and leases
POOL_APPLICATION = "workload-store"
SECOND_SERVE_BOUND_SECONDS = 30.0
_SIGNALS = {"sigkill": signal.SIGKILL, "sigterm": signal.SIGTERM}
_ON_A_SERVICE = ("sigkill", "sigterm", "sigstop", "partition", "db_latency")


@dataclass
class Fault:
    """One injected fault; times are ``time.monotonic()`` values."""

    kind: str
    injected_at: float
    injection_ended_at: float = 0.0
    recovered_at: float | None = None  # start of the stable-ready stretch; None: never
    window_end: float = 0.0
    pid: int | None = None  # the process it was done to, if one
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def recovery_seconds(self) -> float | None:
        """Injection → every process ready again (for good)."""
        return None if self.recovered_at is None else self.recovered_at - self.injected_at

    def contains(self, start: float, end: float | None = None) -> bool:
        """Whether ``[start, end]`` overlaps this fault's window."""
        return start <= self.window_end and (end if end is not None else start) >= self.injected_at


class FaultSchedule:
    """Injects ``settings.fault_count`` faults over ``settings.fault_seconds``.

    ``on_probe(key, run_id)`` is told of every probe run started (the load's ledger keeps it).
    """

    def __init__(
        self,
        cluster: Cluster,
        fleet: Fleet,
        launcher: Launcher,
        settings: Settings,
        on_probe: Callable[[str, str], None],
    ) -> None:
        self._cluster = cluster
        self._fleet = fleet
        self._launcher = launcher
        self._settings = settings
        self._on_probe = on_probe
        self._rng = random.Random(settings.seed)
        self._turns: dict[str, int] = {}
        self.kinds = fault_kinds(workers=settings.workers, replicas=settings.replicas)
        self.faults: list[Fault] = []

    def run(self, started_at: float) -> None:
        """Inject every fault at its time; return when the schedule's duration is over."""
        interval = self._settings.fault_interval_seconds
        for index in range(self._settings.fault_count):
            due = started_at + (index + 0.5) * interval
            _sleep_until(due)
            kind = self.kinds[index % len(self.kinds)]
            _say(f"fault {index + 1}/{self._settings.fault_count}: {kind}")
            self.faults.append(self.inject(kind))
        _sleep_until(started_at + self._settings.fault_seconds)

    def inject(self, kind: str) -> Fault:
        """Wait until everything is ready, inject ``kind``, watch everything recover."""
        settings = self._settings
        if not self._fleet.wait_ready(settings.recovery_deadline_seconds):
            _say("a process is not ready before a fault: injecting anyway")
        fault = Fault(kind, time.monotonic())
        if kind in _ON_A_SERVICE:
            self._on_service(fault, self._service_target(kind))
        elif kind.startswith("worker_"):
            self._on_worker(fault, self._next(kind, self._fleet.workers))
        elif kind == "pg_stop":
            fault.detail["down_seconds"] = self._postgres_down()
        elif kind == "second_serve":
            # The others must not notice: their readiness is watched while the second one lives.
            second = _Second(self._launcher.serve(self._cluster.url, free_port(), "second"))
            fault.recovered_at = self._wait_recovered(fault.injected_at)
            fault.detail.update(second.outcome())
        else:
            lock = MEMBERSHIP_APPLICATION if settings.replica_mode else LOCK_APPLICATION
            application = {
                "terminate_lock_backend": lock,
                "terminate_pool_backends": POOL_APPLICATION,
            }.get(kind)
            fault.detail["terminated"] = self._cluster.terminate_backends(application)
        fault.injection_ended_at = time.monotonic()
        if kind != "second_serve":
            fault.recovered_at = self._wait_recovered(fault.injection_ended_at)
        end = fault.recovered_at if fault.recovered_at is not None else time.monotonic()
        fault.window_end = end + settings.window_margin_seconds
        return fault

    # -- targets ------------------------------------------------------------------------------

    def _service_target(self, kind: str) -> int:
        """The leader of a standby pair (the process that executes), else each in turn."""
        if not self._settings.replica_mode and len(self._fleet.replicas) > 1:
            leader = self._fleet.leader()
            if leader is not None:
                return leader
        return self._next(kind, self._fleet.replicas)

    def _next(self, kind: str, among: list[Supervisor]) -> int:
        turn = self._turns.get(kind, 0)
        self._turns[kind] = turn + 1
        return turn % len(among)

    # -- injections ---------------------------------------------------------------------------

    def _on_service(self, fault: Fault, index: int) -> None:
        process = _target(fault, self._fleet.replicas[index])
        if process is None:
            return
        settings, proxy = self._settings, self._fleet.proxies[index]
        if fault.kind == "sigstop":
            _freeze(process.pid, settings.sigstop_seconds)
        elif fault.kind in _SIGNALS:
            os.kill(process.pid, _SIGNALS[fault.kind])
        elif fault.kind == "partition":
            seconds = round(self._rng.uniform(*settings.partition_seconds), 2)
            fault.detail["partition_seconds"] = seconds
            proxy.partition()
            try:
                time.sleep(seconds)
            finally:
                proxy.heal()
        else:  # db_latency
            fault.detail["latency_ms"] = settings.latency_ms
            proxy.delay(settings.latency_ms / 1000)
            try:
                time.sleep(settings.latency_seconds)
            finally:
                proxy.heal()

    def _on_worker(self, fault: Fault, index: int) -> None:
        process = _target(fault, self._fleet.workers[index])
        if process is None:
            return
        if fault.kind == "worker_sigkill":
            os.kill(process.pid, signal.SIGKILL)
            return
        # Frozen past its leases: they lapse, its attempts are retried elsewhere; on waking its
        # heartbeats and reports are refused. The probe plays one such late report meanwhile.
        freeze = self._settings.worker_freeze_seconds
        os.kill(process.pid, signal.SIGSTOP)
        try:
            began = time.monotonic()
            key = f"chaos-probe-{self._settings.seed}-{len(self.faults)}"
            fault.detail.update(late_report(self._fleet.base_urls[0], key))
            if "probe_run" in fault.detail:
                self._on_probe(key, str(fault.detail["probe_run"]))
            time.sleep(max(0.0, freeze - (time.monotonic() - began)))
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)
        fault.detail["frozen_seconds"] = round(time.monotonic() - began, 2)

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
        streak: tuple[tuple[int, ...], float] | None = None  # (generations, start)
        while time.monotonic() < deadline:
            generations = self._fleet.ready_generations()
            now = time.monotonic()
            if generations is None:
                streak = None
            elif streak is None or streak[0] != generations:
                streak = (generations, now)
            elif now - streak[1] >= stable:
                return streak[1]
            time.sleep(0.05)
        return None


def _target(fault: Fault, supervisor: Supervisor) -> subprocess.Popen[bytes] | None:
    """The supervised process a fault is done to (recorded in the fault), or None if down."""
    _, process = supervisor.current()
    fault.detail["target"] = supervisor.name
    if process is None:
        fault.detail["skipped"] = "the process was not running"
        return None
    fault.pid = process.pid
    return process


def _freeze(pid: int, seconds: float) -> None:
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


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
