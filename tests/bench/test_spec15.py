"""The SPEC §15 summary of ``nox -s bench``: its ratios, targets and table on fixed figures.

Nothing is timed here: the benchmarks' JSON is given, and only the arithmetic and the verdicts
are checked (a peer target is judged only when the peer's figure is given).
"""

from __future__ import annotations

from typing import Any

from benchmarks.spec15 import NO_PEER, load_peers, render, rows


def _baseline(p50_ms: float, commits_per_s: float) -> dict[str, Any]:
    return {
        "psycopg": {"p50_ms": 9.0, "commits_per_s": 1.0},
        "pgbench": {"p50_ms": p50_ms, "commits_per_s": commits_per_s},
        "ceiling": "pgbench",
    }


RESULTS: dict[str, dict[str, Any]] = {
    "api_bench": {
        "serial": {"create_run": {"p50_ms": 1.5}, "get_run": {"p50_ms": 1.2}},
        "serial_raw_client": {"create_run": {"p50_ms": 2.6}, "get_run": {"p50_ms": 0.7}},
        "concurrent_8_clients": {
            "create_run": {"throughput_per_s": 700.0},
            "get_run": {"throughput_per_s": 1000.0},
        },
        "commit_baseline": _baseline(0.5, 2000.0),
    },
    "e2e_bench": {
        "summary": {"tasks_1": {"tasks_per_s": 300.0}, "tasks_10": {"tasks_per_s": 600.0}},
        "commit_baseline": _baseline(0.4, 3000.0),
        "machine": {"cpus": 2, "loadavg_1m_start": 0.4, "loadavg_1m_end": 0.9},
    },
    "worker_bench": {
        "throughput": [{"workers": 1, "tasks_per_s": 100.0}, {"workers": 4, "tasks_per_s": 900.0}],
        "latency_idle_worker": {"queued_to_claimed_p50_ms": 12.0},
        "commit_baseline": _baseline(0.4, 3000.0),
    },
    "ready_bench": {
        "unfinished_at_restart": 5000,
        "ready_s_with_backlog": 1.8,
        "ready_s_empty": 1.0,
        "memory_kb_per_active_run": 20.5,
        "memory_kb_per_recovered_run": 8.0,
        "commit_baseline": _baseline(0.4, 3000.0),
    },
}


def test_spec15_table_ratios_and_verdicts() -> None:
    peers = load_peers({"PREFECT_CREATE_RPS": "63", "DBOS_STEPS_PS": "400"})
    assert peers == {"prefect_create_rps": 63.0, "dbos_steps_ps": 400.0}

    table = {(r.figure, r.target): r for r in rows(RESULTS, peers)}
    create = table["create run (1 task), 8 clients, req/s", "≥ 10 × Prefect create-flow-run"]
    assert (create.value, create.ratio) == ("700.0", "0.350 × commits/s")
    assert create.baseline == "0.500 ms / 2,000/s"  # pgbench's, not psycopg's
    assert create.met.startswith("yes")  # 700 ≥ 10 × 63
    serial = table["create run, serial p50, ms", "≤ 5 × INSERT+COMMIT p50"]
    assert (serial.ratio, serial.met) == ("3.0 × p50", "yes")
    assert table["read run, serial p50, ms", "≤ 1 ms"].met == "no"
    raw_create = table[
        "create run, serial p50, ms (raw HTTP/1.1 client)", "≤ 5 × INSERT+COMMIT p50"
    ]
    assert (raw_create.value, raw_create.ratio, raw_create.met) == ("2.600", "5.2 × p50", "no")
    assert table["read run, serial p50, ms (raw HTTP/1.1 client)", "≤ 1 ms"].met == "yes"
    assert table["read run, 8 clients, req/s", "≥ 10 × Prefect read-flow-run"].met == NO_PEER
    chain = "10-task chain end to end, 8 clients, tasks/s"
    assert table[chain, "≥ 0.25 × commit ceiling"].ratio == "0.200 × commits/s"
    assert table[chain, "≥ 0.25 × commit ceiling"].met == "no"
    assert table[chain, "≥ 5 × DBOS steps/s"].met.startswith("no")  # 600 < 2,000
    assert table["remote workers (4 processes), tasks/s", "≥ 2 × DBOS steps/s"].met.startswith(
        "yes"
    )
    assert table["queued → claimed p50, ms (idle worker)", "≤ 20 ms"].met == "yes"
    ready = table["ready after restart, 5,000 non-terminal runs, s", "< 1 s with 5,000 runs"]
    assert ready.met == "no"
    assert table["service memory per active run, KB", "< 10 KB"].met == "no"

    # A smoke-sized backlog is not judged, and a benchmark not run is reported missing.
    small = {**RESULTS, "ready_bench": {**RESULTS["ready_bench"], "unfinished_at_restart": 40}}
    del small["worker_bench"]
    small["ready_bench"]["machine"] = {"cpus": 2, "loadavg_1m_start": 3.5, "loadavg_1m_end": 1.0}
    # An older api_bench, with no raw-client figures: those rows are left out.
    small["api_bench"] = {k: v for k, v in RESULTS["api_bench"].items() if k != "serial_raw_client"}
    text = render(small, {})
    assert "raw HTTP/1.1 client" not in text
    assert "load 0.4 → 0.9 on 2 cores" in text
    assert "WARNING: the machine was busier than its cores during ready_bench:" in text
    assert "n/a (only 40 runs, not 5,000)" in text
    assert "missing (worker_bench not run)" in text
    assert "| figure | value | baseline p50 / commits/s | ratio | target | met |" in text
    assert "yes (Prefect" not in text  # no peer figures given: no peer target is met
