"""The SPEC §15 table: every figure, its ratio to the same run's PostgreSQL commit baseline, the
target, and whether it is met — read from the JSON the other benchmarks wrote.

``python -m benchmarks.spec15 DIR`` (``nox -s bench`` runs it last, on the directory it gave the
benchmarks as ``WORKLOAD_BENCH_RESULTS``). Each figure is set against the one-connection
single-row ``INSERT``+``COMMIT`` measured by the same benchmark on the same server just before
it (pgbench's when the wheel ships it, else psycopg's): a latency as a multiple of its p50, a
throughput as a fraction of its commits/s.

Targets relative to peers (× Prefect, × DBOS) are judged only when the peers' figures are given,
measured on the same machine by the side-by-side peer harness (distributed separately):

- ``WORKLOAD_BENCH_PEERS``: that harness's results directory (``prefect-api.json``,
  ``dbos.json``), or a JSON file with ``prefect_create_rps``, ``prefect_read_rps``,
  ``dbos_steps_ps``;
- or, overriding it, ``PREFECT_CREATE_RPS``, ``PREFECT_READ_RPS``, ``DBOS_STEPS_PS``.

Otherwise those rows say so; nothing is ever counted as met without a measurement.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

BENCHES = ("store_bench", "api_bench", "e2e_bench", "worker_bench", "ready_bench", "scaleout_bench")
PEER_KEYS = ("prefect_create_rps", "prefect_read_rps", "dbos_steps_ps")
PEER_ENV = {
    "prefect_create_rps": "PREFECT_CREATE_RPS",
    "prefect_read_rps": "PREFECT_READ_RPS",
    "dbos_steps_ps": "DBOS_STEPS_PS",
}
NO_PEER = "n/a (peer: run the peer harness)"
FULL_BACKLOG = 5000
SCALEOUT_RATIOS = (
    ("local", "scale-out: 10-task mock chains, tasks/s by replicas (0.25 CPU each)"),
    ("remote", "scale-out: remote zero-work tasks (8 workers), tasks/s by replicas"),
)
SCALEOUT_WRITES = "scale-out: write transactions per remote task − per local task"


@dataclass(frozen=True)
class Baseline:
    """One-connection INSERT+COMMIT of one benchmark's server."""

    p50_ms: float
    commits_per_s: float
    source: str

    def text(self) -> str:
        return f"{self.p50_ms:.3f} ms / {self.commits_per_s:,.0f}/s"


@dataclass(frozen=True)
class Row:
    """One line of the table."""

    figure: str
    value: str
    baseline: str
    ratio: str
    target: str
    met: str


def _median(value: Any) -> float | None:
    """A number, or the harness's ``{"median": …}``."""
    if isinstance(value, dict):
        value = value.get("median")
    return float(value) if isinstance(value, int | float) else None


def _dig(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _load_json(path: Path) -> Any:
    """A JSON document, or the last line of a file of JSON lines (the harness's step files)."""
    text = path.read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(text.strip().splitlines()[-1])


def load_peers(env: Mapping[str, str]) -> dict[str, float]:
    """Peer figures from ``WORKLOAD_BENCH_PEERS`` and the single-figure variables."""
    peers: dict[str, float] = {}
    source = env.get("WORKLOAD_BENCH_PEERS")
    if source:
        path = Path(source)
        if path.is_dir():
            prefect = path / "prefect-api.json"
            dbos = path / "dbos.json"
            if prefect.exists():
                data = _load_json(prefect)
                create = _median(_dig(data, "summary", "create_flow_run", "c8_req_per_s"))
                read = _median(_dig(data, "summary", "read_flow_run", "c8_req_per_s"))
                if create is not None:
                    peers["prefect_create_rps"] = create
                if read is not None:
                    peers["prefect_read_rps"] = read
            if dbos.exists():
                steps = _median(_dig(_load_json(dbos), "summary", "wf_10", "c8_steps_per_s"))
                if steps is not None:
                    peers["dbos_steps_ps"] = steps
        elif path.exists():
            data = _load_json(path)
            for key in PEER_KEYS:
                number = _median(data.get(key)) if isinstance(data, dict) else None
                if number is not None:
                    peers[key] = number
    for key, name in PEER_ENV.items():
        if env.get(name):
            peers[key] = float(env[name])
    return peers


def load_results(directory: Path) -> dict[str, dict[str, Any]]:
    """Each benchmark's JSON in the directory, by name (missing ones are left out)."""
    results = {}
    for name in BENCHES:
        path = directory / f"{name}.json"
        if path.exists():
            results[name] = _load_json(path)
    return results


def baseline_of(result: Mapping[str, Any]) -> Baseline | None:
    """The commit baseline a benchmark measured on its server."""
    measured = result.get("commit_baseline")
    if isinstance(measured, dict):
        source = str(measured.get("ceiling", "psycopg"))
        numbers = measured.get(source)
        if isinstance(numbers, dict):
            return Baseline(float(numbers["p50_ms"]), float(numbers["commits_per_s"]), source)
    old = result.get("baseline_insert_commit")  # api_bench's own psycopg baseline
    if isinstance(old, dict) and "p50_ms" in old:
        return Baseline(float(old["p50_ms"]), float(old["throughput_per_s"]), "psycopg")
    return None


def _yes(ok: bool) -> str:
    return "yes" if ok else "no"


def _number(value: float, digits: int = 1) -> str:
    return f"{value:,.{digits}f}"


class _Table:
    def __init__(self) -> None:
        self.rows: list[Row] = []

    def missing(self, figure: str, bench: str, target: str) -> None:
        self.rows.append(Row(figure, f"missing ({bench} not run)", "—", "—", target, "n/a"))

    def throughput(
        self, figure: str, value: float, base: Baseline | None, target: str, met: str
    ) -> None:
        ratio = f"{value / base.commits_per_s:.3f} × commits/s" if base else "—"
        self.rows.append(
            Row(figure, _number(value), base.text() if base else "—", ratio, target, met)
        )

    def latency(
        self, figure: str, value_ms: float, base: Baseline | None, target: str, met: str
    ) -> None:
        ratio = f"{value_ms / base.p50_ms:.1f} × p50" if base else "—"
        self.rows.append(
            Row(figure, _number(value_ms, 3), base.text() if base else "—", ratio, target, met)
        )

    def versus_peer(self, value: float, factor: float, peer: float | None, name: str) -> str:
        if peer is None:
            return NO_PEER
        return f"{_yes(value >= factor * peer)} ({name} {peer:,.1f} → need {factor * peer:,.0f})"


def rows(results: Mapping[str, Mapping[str, Any]], peers: Mapping[str, float]) -> list[Row]:
    """The table's rows from the benchmarks' JSON and whatever peer figures were given."""
    table = _Table()
    prefect_create = peers.get("prefect_create_rps")
    prefect_read = peers.get("prefect_read_rps")
    dbos = peers.get("dbos_steps_ps")

    api = results.get("api_bench")
    if api is None:
        for figure, target in (
            ("create run (1 task), 8 clients, req/s", "≥ 10 × Prefect create-flow-run"),
            ("create run, serial p50, ms", "≤ 5 × INSERT+COMMIT p50"),
            ("read run, serial p50, ms", "≤ 1 ms"),
            ("read run, 8 clients, req/s", "≥ 10 × Prefect read-flow-run"),
        ):
            table.missing(figure, "api_bench", target)
    else:
        base = baseline_of(api)
        concurrent = api["concurrent_8_clients"]
        serial = api["serial"]
        create = float(concurrent["create_run"]["throughput_per_s"])
        table.throughput(
            "create run (1 task), 8 clients, req/s",
            create,
            base,
            "≥ 10 × Prefect create-flow-run",
            table.versus_peer(create, 10, prefect_create, "Prefect"),
        )
        # The serial figures by httpx, then (when measured) by a minimal client
        # (benchmarks.rawhttp): httpx's share of the first rows is the difference.
        clients = [("", serial)]
        if "serial_raw_client" in api:
            clients.append((" (raw HTTP/1.1 client)", api["serial_raw_client"]))
        for suffix, figures in clients:
            p50 = float(figures["create_run"]["p50_ms"])
            table.latency(
                f"create run, serial p50, ms{suffix}",
                p50,
                base,
                "≤ 5 × INSERT+COMMIT p50",
                _yes(p50 <= 5 * base.p50_ms) if base else "n/a (no baseline)",
            )
            read_p50 = float(figures["get_run"]["p50_ms"])
            table.latency(
                f"read run, serial p50, ms{suffix}", read_p50, base, "≤ 1 ms", _yes(read_p50 <= 1.0)
            )
        read = float(concurrent["get_run"]["throughput_per_s"])
        table.throughput(
            "read run, 8 clients, req/s",
            read,
            base,
            "≥ 10 × Prefect read-flow-run",
            table.versus_peer(read, 10, prefect_read, "Prefect"),
        )

    e2e = results.get("e2e_bench")
    chain = "10-task chain end to end, 8 clients, tasks/s"
    if e2e is None:
        table.missing(chain, "e2e_bench", "≥ 0.25 × commit ceiling")
        table.missing(chain, "e2e_bench", "≥ 5 × DBOS steps/s")
    else:
        base = baseline_of(e2e)
        ten = float(e2e["summary"]["tasks_10"]["tasks_per_s"])
        table.throughput(
            chain,
            ten,
            base,
            "≥ 0.25 × commit ceiling",
            _yes(ten >= 0.25 * base.commits_per_s) if base else "n/a (no baseline)",
        )
        table.throughput(
            chain, ten, base, "≥ 5 × DBOS steps/s", table.versus_peer(ten, 5, dbos, "DBOS")
        )
        one = float(e2e["summary"]["tasks_1"]["tasks_per_s"])
        table.throughput("1-task runs end to end, 8 clients, runs/s", one, base, "— (context)", "—")

    worker = results.get("worker_bench")
    if worker is None:
        table.missing("remote workers (4 processes), tasks/s", "worker_bench", "≥ 2 × DBOS")
        table.missing("queued → claimed p50, ms (idle worker)", "worker_bench", "≤ 20 ms")
    else:
        base = baseline_of(worker)
        four = [r for r in worker["throughput"] if r["workers"] == 4]
        if four:
            tasks = float(four[0]["tasks_per_s"])
            table.throughput(
                "remote workers (4 processes), tasks/s",
                tasks,
                base,
                "≥ 2 × DBOS steps/s",
                table.versus_peer(tasks, 2, dbos, "DBOS"),
            )
        else:
            table.missing("remote workers (4 processes), tasks/s", "4 workers", "≥ 2 × DBOS")
        claimed = float(worker["latency_idle_worker"]["queued_to_claimed_p50_ms"])
        table.latency(
            "queued → claimed p50, ms (idle worker)", claimed, base, "≤ 20 ms", _yes(claimed <= 20)
        )

    ready = results.get("ready_bench")
    if ready is None:
        table.missing("ready after restart with 5,000 runs, s", "ready_bench", "< 1 s")
        table.missing("service memory per active run, KB", "ready_bench", "< 10 KB")
    else:
        base = baseline_of(ready)
        backlog = int(ready["unfinished_at_restart"])
        scale = f"only {backlog:,} runs, not {FULL_BACKLOG:,}"
        seconds = float(ready["ready_s_with_backlog"])
        empty = float(ready["ready_s_empty"])
        table.rows.append(
            Row(
                f"ready after restart, {backlog:,} non-terminal runs, s",
                f"{seconds:.3f} (empty db: {empty:.3f})",
                base.text() if base else "—",
                "— (not a commit figure)",
                "< 1 s with 5,000 runs",
                _yes(seconds < 1.0) if backlog >= FULL_BACKLOG else f"n/a ({scale})",
            )
        )
        for figure, key, target in (
            ("service memory per active run, KB", "memory_kb_per_active_run", "< 10 KB"),
            (
                "memory per run recovered at restart, KB",
                "memory_kb_per_recovered_run",
                "< 10 KB (second method)",
            ),
        ):
            kb = float(ready[key])
            table.rows.append(
                Row(
                    figure,
                    _number(kb, 2),
                    base.text() if base else "—",
                    "— (not a commit figure)",
                    target,
                    _yes(kb < 10) if backlog >= FULL_BACKLOG else f"n/a ({scale})",
                )
            )

    _scaleout_rows(table, results.get("scaleout_bench"))
    return table.rows


def _scaleout_rows(table: _Table, result: Mapping[str, Any] | None) -> None:
    """SPEC §15's scale-out bullet: 4 : 1 replicas for both workloads, and the write cost."""
    ratio_target = "≥ 3 × 1 replica (4 : 1)"
    writes_target = "≤ 1 more per remote task"
    if result is None:
        for _, figure in SCALEOUT_RATIOS:
            table.missing(figure, "scaleout_bench", ratio_target)
        table.missing(SCALEOUT_WRITES, "scaleout_bench", writes_target)
        return
    if "skipped" in result:
        why = f"skipped: {result['skipped']}"
        for figure, target in [(f, ratio_target) for _, f in SCALEOUT_RATIOS] + [
            (SCALEOUT_WRITES, writes_target)
        ]:
            table.rows.append(Row(figure, why, "—", "—", target, "n/a"))
        return
    base = baseline_of(result)
    summary = result["summary"]
    for workload, figure in SCALEOUT_RATIOS:
        rates = summary[workload]["tasks_per_s"]
        ratio = summary[workload]["ratio_4_to_1"]
        value = ", ".join(f"{n}: {_number(float(v))}" for n, v in rates.items()) or "—"
        table.rows.append(
            Row(
                figure,
                value,
                base.text() if base else "—",
                f"{float(ratio):.2f} × (4 : 1)" if ratio is not None else "—",
                ratio_target,
                _yes(float(ratio) >= 3) if ratio is not None else "n/a (needs 1 and 4 replicas)",
            )
        )
    local = summary["local"]["write_transactions_per_task"]
    remote = summary["remote"]["write_transactions_per_task"]
    both = [n for n in local if n in remote]
    differences = [float(remote[n]) - float(local[n]) for n in both]
    value = (
        " / ".join(f"{d:+.2f}" for d in differences)
        + f" at {' / '.join(both)} replicas (local "
        + " / ".join(f"{float(local[n]):.2f}" for n in both)
        + ", remote "
        + " / ".join(f"{float(remote[n]):.2f}" for n in both)
        + ")"
        if both
        else "—"
    )
    met = _yes(max(differences) <= 1) if differences else "n/a"
    table.rows.append(
        Row(SCALEOUT_WRITES, value, base.text() if base else "—", "—", writes_target, met)
    )


def busy_benchmarks(results: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The benchmarks whose 1-minute load average, at start or end, exceeded the core count."""
    busy = []
    for name in BENCHES:
        machine = (results.get(name) or {}).get("machine")
        if isinstance(machine, dict) and machine.get("cpus"):
            load = max(float(machine["loadavg_1m_start"]), float(machine["loadavg_1m_end"]))
            if load > float(machine["cpus"]):
                busy.append(name)
    return busy


def render(
    results: Mapping[str, Mapping[str, Any]], peers: Mapping[str, float], directory: str = ""
) -> str:
    """The printed report: a header, the baselines, the Markdown table, and notes."""
    lines = [f"SPEC §15 figures{f' ({directory})' if directory else ''}"]
    if any(r.get("smoke") for r in results.values()):
        lines.append("SMOKE MODE (WORKLOAD_BENCH_SMOKE=1): tiny counts, not a measurement.")
    lines.append("")
    lines.append("Baselines (one-connection single-row INSERT+COMMIT, p50 / commits per second):")
    for name in BENCHES:
        result = results.get(name)
        base = baseline_of(result) if result is not None else None
        if name == "store_bench" and result is not None:
            store = _dig(result, "connections_1", "baseline_insert_commit")
            if isinstance(store, dict):
                base = Baseline(float(store["p50_ms"]), float(store["throughput_per_s"]), "psycopg")
        state = f"{base.text()} ({base.source})" if base else "not measured"
        machine = result.get("machine") if result is not None else None
        if isinstance(machine, dict):
            state += (
                f"; load {machine['loadavg_1m_start']} → {machine['loadavg_1m_end']}"
                f" on {machine['cpus']} cores"
            )
        lines.append(f"- {name}: {state}" if result is not None else f"- {name}: not run")
    busy = busy_benchmarks(results)
    if busy:
        lines.append(
            f"WARNING: the machine was busier than its cores during {', '.join(busy)}: their "
            "figures and their commit baselines are depressed, by different amounts, so even "
            "the ratios are unreliable. Re-run on a quiet machine before judging a target."
        )
    lines.append("")
    header = Row("figure", "value", "baseline p50 / commits/s", "ratio", "target", "met")
    table = [header, *rows(results, peers)]
    lines.extend("| " + " | ".join(astuple(row)) + " |" for row in table[:1])
    lines.append("|" + "---|" * len(astuple(header)))
    lines.extend("| " + " | ".join(astuple(row)) + " |" for row in table[1:])
    lines.append("")
    given = ", ".join(f"{k} = {v:,.1f}" for k, v in sorted(peers.items()))
    lines.append(f"Peer figures: {given or 'none given (WORKLOAD_BENCH_PEERS, see README)'}.")
    lines.append(
        "Each ratio uses the baseline of the benchmark that measured the figure (same server, "
        "minutes apart). On a shared machine only ratios from one run mean anything."
    )
    return "\n".join(lines)


def main() -> None:
    directory = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ["WORKLOAD_BENCH_RESULTS"])
    results = load_results(directory)
    text = render(results, load_peers(os.environ), str(directory))
    print(text)
    (directory / "spec15.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
