"""``python -m benchmarks.chaos``: run the soak end to end and print its JSON summary.

The order is the whole story: a fresh cluster, ``workload migrate up``, the ownership monitor,
the supervised processes (services, each through its own proxy, then workers), the workflows,
the load, the fault schedule; then the drain (load stopped, every acknowledged run awaited until
terminal, bounded), the checks, a final SIGTERM of every process (each must exit 0), the summary
on stdout. Progress goes to stderr. Exit status: 0 when nothing was found, 1
when something was, 2 when the soak could not run (settings, PostgreSQL binaries, start-up).
Whatever happens, every process the soak started is ended by pid and its directory removed
(unless ``CHAOS_KEEP=1``).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.chaos.cluster import Cluster, ClusterError
from benchmarks.chaos.faults import FaultSchedule
from benchmarks.chaos.fleet import Fleet
from benchmarks.chaos.load import Load
from benchmarks.chaos.monitor import Monitor
from benchmarks.chaos.probe import PROBE_PATH
from benchmarks.chaos.report import error_line_findings, log_digest, service_findings, summarize
from benchmarks.chaos.service import Launcher
from benchmarks.chaos.settings import Settings, SettingsError, parse_settings
from benchmarks.chaos.verify import check_api, check_database, check_executions, wait_terminal
from benchmarks.chaos.worker_app import read_executions

START_DEADLINE_SECONDS = 60.0
API_CHECK_DEADLINE_SECONDS = 120.0


def _say(message: str) -> None:
    print(f"[chaos] {message}", file=sys.stderr, flush=True)


def soak(settings: Settings, root: Path) -> int:
    """Run one soak in ``root``; return the process exit status."""
    began = time.monotonic()
    cluster = Cluster(root / "pg")
    fleet: Fleet | None = None
    monitor: Monitor | None = None
    try:
        _say(f"PostgreSQL cluster in {cluster.root}")
        cluster.create()
        launcher = Launcher(root / "logs", settings.lock_check_interval_seconds)
        launcher.migrate(cluster.url)
        monitor = Monitor(cluster.url, settings.replica_mode)
        monitor.start()
        fleet = Fleet(launcher, cluster.sockets, settings)
        if not fleet.start(START_DEADLINE_SECONDS):
            _say(f"the processes are not ready after {START_DEADLINE_SECONDS:g} s (logs: {root})")
            return 2
        _say(f"ready: {', '.join(fleet.base_urls)}; {settings.describe()}")
        load = Load(fleet.base_urls, settings)
        load.setup()
        schedule = FaultSchedule(
            cluster,
            fleet,
            launcher,
            settings,
            lambda key, run: load.acknowledge(key, PROBE_PATH, run),
        )
        t0 = time.monotonic()
        load.start()
        schedule.run(t0)

        _say("schedule over: stopping the load, draining")
        load_stopped = load.stop(settings.request_deadline_seconds + 30)
        fleet.wait_ready(settings.recovery_deadline_seconds)
        acknowledged = sorted(set(load.ledger.acknowledged.values()))
        stuck = wait_terminal(cluster.url, acknowledged, settings.drain_deadline_seconds)
        _say(f"drained: {len(acknowledged)} acknowledged runs, {len(stuck)} not terminal")
        database, violations = check_database(cluster.url, load.ledger)
        violations.update(
            check_api(fleet.base_urls[0], cluster.url, load.ledger, API_CHECK_DEADLINE_SECONDS)
        )
        executions, found = check_executions(cluster.url, read_executions(launcher.executions))
        violations.update(found)
        ended = time.monotonic()
        final_codes = fleet.stop()
        monitor.stop()
        exits = fleet.exits
        violations.update(service_findings(schedule.faults, exits, final_codes))
        logs = {
            "services": log_digest(launcher.logs("serve")),
            "workers": log_digest(launcher.logs("worker")),
        }
        violations.update(error_line_findings(logs["services"]))
        if not load_stopped:
            violations["client_thread_outlived_the_load"] = ["a request never got an answer"]
        summary = summarize(
            settings=settings.describe(),
            t0=t0,
            ended=ended,
            ledger=load.ledger,
            kinds=schedule.kinds,
            faults=schedule.faults,
            exits=exits,
            starts={s.name: s.starts for s in fleet.replicas + fleet.workers},
            monitor=monitor,
            logs=logs,
            database=database,
            executions=executions,
            stuck=stuck,
            violations=violations,
        )
        summary["total_seconds"] = round(time.monotonic() - began, 1)
        text = json.dumps(summary, indent=2, default=str)
        print(text, flush=True)
        if settings.summary_path:
            Path(settings.summary_path).write_text(text + "\n", encoding="utf-8")
        return 0 if summary["passed"] else 1
    finally:
        if fleet is not None:
            fleet.stop()
        if monitor is not None:
            monitor.stop()
        with contextlib.suppress(ClusterError):
            if cluster.running():
                cluster.stop()


def main(argv: list[str] | None = None) -> int:
    """Parse the settings, run the soak in a temporary directory, clean up."""
    try:
        settings = parse_settings(argv)
    except SettingsError as exc:
        _say(str(exc))
        return 2
    # A SIGTERM (a CI timeout) unwinds like Ctrl-C, so that the cleanup below still runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # Short (the Unix socket path is limited) and traversable by the postgres user.
    root = Path(tempfile.mkdtemp(prefix="wlchaos-"))
    root.chmod(0o711)
    try:
        return soak(settings, root)
    except ClusterError as exc:
        _say(str(exc))
        return 2
    finally:
        if settings.keep:
            _say(f"kept {root} (CHAOS_KEEP=1)")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
