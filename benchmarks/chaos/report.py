"""The soak's one JSON summary, and whether it passed.

It folds together the fault log (kind, times, recovery, the exit codes seen inside each
window), the clients' ledger (acknowledged runs, every answer classified as inside or outside
a fault window), the supervisor's exits, and the findings of :mod:`.verify`. It fails when
anything was lost, duplicated or stuck, an invariant was violated, or a 5xx came outside every
fault window.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from benchmarks.chaos.faults import KINDS, Fault
from benchmarks.chaos.load import Ledger, Response
from benchmarks.chaos.service import Exit
from benchmarks.chaos.verify import Findings

__all__ = ["EXAMPLES", "log_digest", "service_findings", "summarize"]

EXAMPLES = 3


def _window_of(faults: list[Fault], start: float, end: float | None = None) -> Fault | None:
    return next((f for f in faults if f.contains(start, end)), None)


def service_findings(faults: list[Fault], exits: list[Exit], final_code: int | None) -> Findings:
    """What the service did that it must not.

    An exit outside every fault window, a second coordinator not refused with exit 3, a fault
    never recovered from, a final SIGTERM that did not exit 0.
    """
    findings: Findings = defaultdict(list)
    for item in exits:
        if _window_of(faults, item.at) is None:
            findings["service_exit_outside_fault_window"].append([item.pid, item.code])
    for fault in faults:
        if fault.kind == "second_serve" and fault.detail.get("second_exit_code") != 3:
            findings["second_serve_not_refused"].append(fault.detail)
        if fault.recovered_at is None:
            findings["not_recovered"].append(fault.kind)
    if final_code != 0:
        findings["final_sigterm_exit_not_0"].append(final_code)
    return findings


def log_digest(paths: list[Path]) -> dict[str, Any]:
    """Error-level log messages of every service process (grouped), and stray tracebacks."""
    errors: Counter[str] = Counter()
    tracebacks = 0
    for path in paths:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            tracebacks += line.startswith("Traceback")
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("level") in ("error", "critical"):
                errors[str(record.get("message", ""))[:72]] += 1
    return {"error_messages": dict(errors.most_common(12)), "tracebacks": tracebacks}


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "min": round(min(values), 3),
        "median": round(statistics.median(values), 3),
        "max": round(max(values), 3),
    }


def _faults(faults: list[Fault], exits: list[Exit], t0: float) -> dict[str, Any]:
    by_kind: dict[str, Any] = {}
    for kind in KINDS:
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
        by_kind[kind] = {
            "count": len(mine),
            "exit_codes": {str(code): n for code, n in sorted(codes.items())},
            "recovery_seconds": _spread(recoveries),
        }
    log = [
        {
            "kind": f.kind,
            "injected_at_s": round(f.injected_at - t0, 2),
            "injection_ended_at_s": round(f.injection_ended_at - t0, 2),
            "ready_again_at_s": None if f.recovered_at is None else round(f.recovered_at - t0, 2),
            "window_end_s": round(f.window_end - t0, 2),
            **f.detail,
        }
        for f in faults
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


def summarize(
    *,
    settings: dict[str, Any],
    t0: float,
    ended: float,
    ledger: Ledger,
    faults: list[Fault],
    exits: list[Exit],
    starts: int,
    logs: dict[str, Any],
    database: dict[str, Any],
    stuck: list[str],
    violations: Findings,
) -> dict[str, Any]:
    """The summary; ``summary["passed"]`` says whether the soak found nothing wrong."""
    requests = _requests(ledger.responses, faults, t0)
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
        "faults": _faults(faults, exits, t0),
        "service": {
            "starts": starts,
            "log": logs,
            "exit_codes": {str(c): n for c, n in sorted(Counter(e.code for e in exits).items())},
        },
    }
    failures = {
        "lost": summary["lost"],
        "duplicated": summary["duplicated"],
        "stuck": summary["stuck"],
        "invariant_violations": sum(v["count"] for v in summary["invariant_violations"].values()),
        "5xx_outside_fault_windows": requests["5xx_outside_fault_windows"],
    }
    summary["failures"] = {k: v for k, v in failures.items() if v}
    summary["passed"] = not summary["failures"]
    return summary
