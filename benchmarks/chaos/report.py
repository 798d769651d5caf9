"""The soak's one JSON summary, and whether it passed.

It folds together the fault log (kind, times, recovery, the exit codes seen inside each
window), the clients' ledger (acknowledged runs, every answer classified as inside or outside
a fault window), the supervisor's exits, and the findings of :mod:`.verify`. It fails when
anything was lost, duplicated or stuck, an invariant was violated, or a 5xx came outside every
fault window.
"""

from __future__ import annotations

import json
import signal
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from benchmarks.chaos.faults import Fault
from benchmarks.chaos.load import Ledger, Response
from benchmarks.chaos.monitor import Monitor
from benchmarks.chaos.service import Exit
from benchmarks.chaos.verify import Findings

__all__ = ["EXAMPLES", "error_line_findings", "log_digest", "service_findings", "summarize"]

EXAMPLES = 3


def _window_of(faults: list[Fault], start: float, end: float | None = None) -> Fault | None:
    return next((f for f in faults if f.contains(start, end)), None)


def service_findings(
    faults: list[Fault], exits: list[Exit], final_codes: dict[str, int | None]
) -> Findings:
    """What the processes did that they must not.

    An exit outside every fault window, a death by any signal but the soak's own SIGKILL (a
    crash: SIGABRT, SIGSEGV, or a SIGTERM not handled), a second coordinator not refused with
    exit 3, a fault never recovered from, a final SIGTERM that did not exit 0, a frozen
    worker's late report (the probe's) that was not refused with 409 ``lease_lost``, or a probe
    run not finished.
    """
    findings: Findings = defaultdict(list)
    for item in exits:
        if _window_of(faults, item.at) is None:
            findings["exit_outside_fault_window"].append([item.name, item.pid, item.code])
        if item.code is not None and item.code < 0 and item.code != -signal.SIGKILL:
            findings["killed_by_a_signal_the_soak_did_not_send"].append(
                [item.name, item.pid, item.code]
            )
    for fault in faults:
        if fault.kind == "second_serve" and fault.detail.get("second_exit_code") != 3:
            findings["second_serve_not_refused"].append(fault.detail)
        if fault.recovered_at is None:
            findings["not_recovered"].append(fault.kind)
        if fault.kind == "worker_sigstop" and "skipped" not in fault.detail:
            late = (fault.detail.get("late_report_status"), fault.detail.get("late_report_code"))
            if late != (409, "lease_lost"):
                findings["late_report_not_refused"].append(fault.detail)
            elif fault.detail.get("retry_report_status") != 200:
                findings["probe_retry_not_recorded"].append(fault.detail)
    for name, code in sorted(final_codes.items()):
        if code != 0:
            findings["final_sigterm_exit_not_0"].append([name, code])
    return findings


def error_line_findings(digest: dict[str, Any]) -> Findings:
    """Error-level lines of the service: each is a bug (ADR 0021: what faults cause is a warning).

    Workers' are only reported: a worker whose replica is down logs its lost reports as errors.
    """
    errors = digest["error_messages"]
    return {"service_error_lines": [[m, n] for m, n in errors.items()]} if errors else {}


def log_digest(paths: list[Path]) -> dict[str, Any]:
    """Error-level log messages of these processes (grouped), lost leases, stray tracebacks.

    A service logs JSON lines (``level``, ``message``); a worker, ``<time> LEVEL name: text``.
    """
    errors: Counter[str] = Counter()
    tracebacks = leases_lost = 0
    for path in paths:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            tracebacks += line.startswith("Traceback")
            leases_lost += "lease lost" in line
            level, message = _level_and_message(line)
            if level in ("error", "critical"):
                errors[message[:72]] += 1
    return {
        "error_messages": dict(errors.most_common(12)),
        "tracebacks": tracebacks,
        "lease_lost_lines": leases_lost,
    }


def _level_and_message(line: str) -> tuple[str, str]:
    try:
        record = json.loads(line)
    except ValueError:
        parts = line.split(" ", 3)  # date, time, LEVEL, "name: message"
        if len(parts) == 4 and parts[2].isupper():
            return parts[2].lower(), parts[3]
        return "", ""
    if isinstance(record, dict):
        return str(record.get("level", "")), str(record.get("message", ""))
    return "", ""


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "min": round(min(values), 3),
        "median": round(statistics.median(values), 3),
        "max": round(max(values), 3),
    }


def _faults(
    kinds: tuple[str, ...], faults: list[Fault], exits: list[Exit], monitor: Monitor, t0: float
) -> dict[str, Any]:
    by_kind: dict[str, Any] = {}
    takeovers: dict[int, float] = {}
    for index, fault in enumerate(faults):
        if fault.pid is not None and not fault.kind.startswith("worker_"):
            at = monitor.takeover(fault.pid, fault.injected_at, fault.window_end)
            if at is not None:
                takeovers[index] = at - fault.injected_at
    for kind in kinds:
        mine = [f for f in faults if f.kind == kind]
        codes: Counter[int] = Counter()
        for item in exits:
            window = _window_of(faults, item.at)
            if window is not None and window.kind == kind:
                codes[item.code] += 1
        for fault in mine:
            if fault.kind == "second_serve":
                codes[fault.detail.get("second_exit_code", -1000)] += 1
        recoveries = [f.recovery_seconds for f in mine if f.recovery_seconds is not None]
        taken = [t for i, t in takeovers.items() if faults[i].kind == kind]
        by_kind[kind] = {
            "count": len(mine),
            # A second serve that kept running has no exit code (None): sorted as text.
            "exit_codes": {str(c): n for c, n in sorted(codes.items(), key=lambda i: str(i[0]))},
            "recovery_seconds": _spread(recoveries),
            "takeovers": len(taken),
            "takeover_seconds": _spread(taken),
        }
    log = [
        {
            "kind": f.kind,
            "injected_at_s": round(f.injected_at - t0, 2),
            "injection_ended_at_s": round(f.injection_ended_at - t0, 2),
            "ready_again_at_s": None if f.recovered_at is None else round(f.recovered_at - t0, 2),
            "window_end_s": round(f.window_end - t0, 2),
            "takeover_s": round(takeovers[i], 2) if i in takeovers else None,
            **f.detail,
        }
        for i, f in enumerate(faults)
    ]
    return {"by_kind": by_kind, "log": log}


def _requests(responses: list[Response], faults: list[Fault], t0: float) -> dict[str, Any]:
    by_status: Counter[str] = Counter()
    inside: Counter[str] = Counter()
    outside: list[Response] = []
    transport_outside = 0
    errors: Counter[str] = Counter()
    for r in responses:
        by_status[str(r.status) if r.status is not None else "no_answer"] += 1
        if r.error is not None:
            errors[r.error] += 1
        in_window = _window_of(faults, r.sent, r.received) is not None
        if r.status is None and not in_window:
            transport_outside += 1
        if r.status is not None and r.status >= 500:
            if in_window:
                inside[str(r.status)] += 1
            else:
                outside.append(r)
    examples = [
        {
            "at_s": round(r.sent - t0, 2),
            "operation": r.operation,
            "status": r.status,
            "body": r.body,
        }
        for r in outside[:EXAMPLES]
    ]
    return {
        "total": len(responses),
        "by_status": dict(sorted(by_status.items())),
        "5xx_in_fault_windows": dict(inside),
        "5xx_outside_fault_windows": len(outside),
        "5xx_outside_examples": examples,
        "no_answer_by_error": dict(errors.most_common()),
        "no_answer_outside_fault_windows": transport_outside,
    }


def _processes(exits: list[Exit], starts: dict[str, int], t0: float) -> dict[str, Any]:
    return {
        name: {
            "starts": count,
            "exit_codes": dict(
                sorted(Counter(str(e.code) for e in exits if e.name == name).items())
            ),
            "exits": [[e.pid, e.code, round(e.at - t0, 2)] for e in exits if e.name == name],
        }
        for name, count in starts.items()
    }


def summarize(
    *,
    settings: dict[str, Any],
    t0: float,
    ended: float,
    ledger: Ledger,
    kinds: tuple[str, ...],
    faults: list[Fault],
    exits: list[Exit],
    starts: dict[str, int],
    monitor: Monitor,
    logs: dict[str, Any],
    database: dict[str, Any],
    executions: dict[str, Any],
    stuck: list[str],
    violations: Findings,
) -> dict[str, Any]:
    """The summary; ``summary["passed"]`` says whether the soak found nothing wrong."""
    requests = _requests(ledger.responses, faults, t0)
    violations = {**violations, "epoch_went_back": monitor.regressions()}
    found = {k: v for k, v in violations.items() if v}
    other = {status: n for status, n in requests["5xx_in_fault_windows"].items() if status != "503"}
    if other:  # a fault is no excuse for an unmapped error: the store's failures are 503s
        found["non_503_5xx_in_fault_window"] = sorted(other.items())
    cancel_codes = Counter(str(code) for code in ledger.cancels.values())
    summary: dict[str, Any] = {
        "settings": settings,
        "elapsed_seconds": round(ended - t0, 1),
        "runs": {
            "acknowledged": len(ledger.acknowledged),
            "rejected_4xx": len(ledger.rejected),
            "never_answered": len(ledger.undetermined),
            "cancels_by_status": dict(cancel_codes),
            **database,
        },
        "lost": database["lost"],
        "duplicated": database["duplicated"],
        "stuck": len(stuck),
        "stuck_examples": stuck[:EXAMPLES],
        "invariant_violations": {
            kind: {"count": len(rows), "examples": [list(map(str, r)) for r in rows[:EXAMPLES]]}
            if rows and isinstance(rows[0], (list, tuple))
            else {"count": len(rows), "examples": [str(r) for r in rows[:EXAMPLES]]}
            for kind, rows in sorted(found.items())
        },
        "requests": requests,
        "faults": _faults(kinds, faults, exits, monitor, t0),
        "processes": _processes(exits, starts, t0),
        "logs": logs,
        "executions": executions,
        "ownership": monitor.summary(),
    }
    failures = {
        "lost": summary["lost"],
        "duplicated": summary["duplicated"],
        "stuck": summary["stuck"],
        "invariant_violations": sum(v["count"] for v in summary["invariant_violations"].values()),
        "5xx_outside_fault_windows": requests["5xx_outside_fault_windows"],
    }
    too_few = [k for k, v in summary["faults"]["by_kind"].items() if v["count"] < 1]
    if too_few:
        failures["fault_kinds_not_injected"] = len(too_few)
    summary["failures"] = {k: v for k, v in failures.items() if v}
    summary["passed"] = not summary["failures"]
    return summary
