"""Scale-out benchmark (SPEC §15, §16): replicas that all execute, each held to 0.25 CPU.

``nox -s bench -- scaleout`` (not part of a bare ``nox -s bench``: it takes minutes). Every
``workload serve --replica`` runs in a cgroup of its own whose ``cpu`` controller limits it to
0.25 CPU (cgroup v1 ``cpu.cfs_quota_us`` 25000 / ``cpu.cfs_period_us`` 100000, or cgroup v2
``cpu.max`` "25000 100000"): the process enters its cgroup before it execs, and the cgroups are
removed at the end. Where that cannot be done (not root, no writable ``cpu`` controller), the
benchmark prints a JSON saying why and exits 0 without figures.

One embedded PostgreSQL (``WORKLOAD_BENCH_DATABASE_URL`` is not used: each configuration needs a
fresh database); for each workload and replica count (1, 2, 4) a new database, migrated with
``workload migrate up``, and that many replicas on it:

- **local**: runs of a 10-task chain of zero-work ``mock`` tasks, executed by the replicas;
- **remote**: runs of a 10-task chain of a zero-work remote action (``noop``), executed by 8
  worker processes (``benchmarks.worker_app``; worker ``i`` talks to replica ``i mod n``). Same
  shape as local, so that a task of each costs the same around it (creation, dependencies, run
  commits) and the difference per task is what remote execution adds: a claim and a report.

Per configuration: the replicas start, ``/readyz`` answers 200 on each, then the benchmark waits
until they are balanced (each replica's ``/readyz`` ``shards_owned`` is ⌊S/n⌋ or ⌈S/n⌉ and
``GET /api/v1/cluster`` lists n replicas owning every shard once). Then
``WORKLOAD_BENCH_SCALEOUT_WARMUP`` (20) runs go through unmeasured; the write transactions of the
idle cluster are counted for ``WORKLOAD_BENCH_SCALEOUT_STATS_S`` (11) seconds; then ``CLIENTS``
concurrent clients submit ``WORKLOAD_BENCH_SCALEOUT_RUNS`` (200, local) or
``WORKLOAD_BENCH_SCALEOUT_REMOTE_RUNS`` (100, remote: slower) runs round-robin through every
replica, and the clock runs from the first submission until the database says no run of the
workflow is unfinished. ``WORKLOAD_BENCH_SCALEOUT_REPLICAS`` (``1,2,4``) picks the replica
counts (the 4 : 1 ratio needs 1 and 4).

Measured over that window: tasks/s; write transactions (the transaction ids PostgreSQL handed out,
``pg_snapshot_xmax(pg_current_snapshot())`` before and after: a transaction takes one only when it
writes) per task, less the idle cluster's rate (lease renewals); the CPU seconds of each
component's process tree from ``/proc/<pid>/stat`` (replicas, PostgreSQL, workers, this load
generator) and of the whole machine (``/proc/stat``); the replicas' cgroup throttling; the rows
written per task by table (``pg_stat_user_tables``, read after ``STATS_SECONDS`` idle on both
sides: ``workers`` rows are the claim statements, each upserts its worker); the replicas' HTTP
requests per task by route and status (their access logs). Every loop is bounded in count and
time; every server binds 127.0.0.1; every process started is stopped by its pid. Prints JSON, and
writes it to ``$WORKLOAD_BENCH_RESULTS/scaleout_bench.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg

from benchmarks._cgroups import (
    CPU_PERIOD_US,
    CPU_QUOTA_US,
    CpuCgroups,
    NoCgroups,
    cgroup_of,
    enter,
)
from benchmarks.common import (
    ROOT,
    SMOKE,
    Serve,
    commit_baseline,
    database_server,
    emit,
    knob,
    next_xid,
)
from benchmarks.e2e_bench import chain

NAME = "scaleout_bench"
RUNS = {
    "local": knob("WORKLOAD_BENCH_SCALEOUT_RUNS", 200, 6),
    "remote": knob("WORKLOAD_BENCH_SCALEOUT_REMOTE_RUNS", 100, 6),
}
WARMUP = knob("WORKLOAD_BENCH_SCALEOUT_WARMUP", 20, 2)
STATS_SECONDS = knob("WORKLOAD_BENCH_SCALEOUT_STATS_S", 11, 1)
"""Idle time before and after the measured phase: the idle cluster's write transactions are
counted before it, and PostgreSQL's per-table counters (flushed by an idle backend within 10 s)
settle on both sides."""
REPLICA_COUNTS = tuple(
    int(n) for n in os.environ.get("WORKLOAD_BENCH_SCALEOUT_REPLICAS", "1,2,4").split(",")
)
WORKLOADS = ("local", "remote")
CHAIN = 10
CLIENTS = 8
WORKERS = 8
LOCK_CHECK_INTERVAL = "1"
READY_TIMEOUT_SECONDS = 120.0
BALANCE_TIMEOUT_SECONDS = 120.0
PHASE_TIMEOUT_SECONDS = 240.0
STOP_TIMEOUT_SECONDS = 60.0
POLL_SECONDS = 0.02
OPERATOR = "bench-operator-token"
WORKER = "bench-worker-token"
REMOTE_ACTION = "noop"  # benchmarks.worker_app's zero-work handler
_keys = itertools.count()
_TICK = os.sysconf("SC_CLK_TCK")


# --- processes ------------------------------------------------------------------------------


class Replica(Serve):
    """``workload serve --replica`` in its 0.25-CPU cgroup (entered before the exec)."""

    def __init__(self, database_url: str, log: Path, env: dict[str, str], cgroup: Path) -> None:
        super().__init__(database_url, log, env)
        self.cgroup = cgroup

    def start(self) -> Replica:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
        env.update(self.env)
        binary = Path(sys.executable).parent / "workload"
        with self.log.open("ab") as log:
            self.spawned = time.perf_counter()
            self.process = subprocess.Popen(
                [
                    str(binary),
                    "serve",
                    "--database-url",
                    self.database_url,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=enter(self.cgroup),  # noqa: PLW1509 - one write, then exec
            )
        return self

    def in_cgroup(self) -> bool:
        """Whether the process is in its cgroup (``/proc/<pid>/cgroup``)."""
        suffix = f"/{self.cgroup.parent.name}/{self.cgroup.name}"
        return any(line.endswith(suffix) for line in cgroup_of(self.pid).splitlines())


def _start_workers(urls: Sequence[str], logs: Path) -> list[subprocess.Popen[bytes]]:
    """``WORKERS`` processes of ``benchmarks.worker_app``, worker ``i`` on ``urls[i % n]``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
    started = []
    for i in range(WORKERS):
        env.update(
            {
                "WORKLOAD_URL": urls[i % len(urls)],
                "WORKLOAD_WORKER_TOKEN": WORKER,
                "BENCH_WORKER_ID": f"w{i}",
            }
        )
        with (logs / f"worker-{i}.log").open("ab") as log:
            started.append(
                subprocess.Popen(
                    [sys.executable, "-m", "benchmarks.worker_app"],
                    cwd=ROOT,
                    env=dict(env),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    return started


def _stop_all(processes: Sequence[subprocess.Popen[bytes]]) -> list[dict[str, Any]]:
    """SIGTERM to each pid at once, then wait for each; SIGKILL a pid that does not exit."""
    began = time.perf_counter()
    running = [process.poll() is None for process in processes]
    for process, alive in zip(processes, running, strict=True):
        if alive:
            process.send_signal(signal.SIGTERM)
    stopped: list[dict[str, Any]] = []
    for process, alive in zip(processes, running, strict=True):
        killed = False
        try:
            left = began + STOP_TIMEOUT_SECONDS - time.perf_counter()
            code = process.wait(timeout=max(1.0, left))
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait(timeout=10)
            killed = True
        stopped.append(
            {
                "exit_code": code,
                "killed": killed,
                "exited_before_stop": not alive,
                "stop_s": round(time.perf_counter() - began, 3),
            }
        )
    return stopped


def _migrate(database_url: str) -> None:
    """``workload migrate up`` (the default 64 shards)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
    binary = Path(sys.executable).parent / "workload"
    subprocess.run(
        [str(binary), "migrate", "up", "--database-url", database_url],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )


# --- CPU accounting -------------------------------------------------------------------------


def _processes() -> dict[int, tuple[int, float]]:
    """Every process: pid → (parent pid, CPU seconds of it and of its reaped children)."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        cpu = sum(int(f) for f in fields[11:15]) / _TICK  # utime stime cutime cstime
        table[int(entry.name)] = (int(fields[1]), cpu)
    return table


def _tree_cpu(table: dict[int, tuple[int, float]], roots: Sequence[int]) -> float:
    """CPU seconds of the processes under ``roots`` (those alive, and those they reaped)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, stack, seen = 0.0, [p for p in roots if p in table], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += table[pid][1]
        stack.extend(children.get(pid, []))
    return total


def _machine_cpu() -> tuple[float, float]:
    """Busy and total CPU seconds of the whole machine so far (``/proc/stat``)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / _TICK, sum(fields) / _TICK


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Components:
    """The pids whose CPU is accounted: replicas, PostgreSQL's postmaster, workers."""

    replicas: list[Replica]
    postmaster: int
    workers: list[subprocess.Popen[bytes]]
    cgroups: CpuCgroups

    def snapshot(self) -> dict[str, Any]:
        table = _processes()
        busy, total = _machine_cpu()
        return {
            "replicas": [_tree_cpu(table, [r.pid]) for r in self.replicas],
            "postgres": _tree_cpu(table, [self.postmaster]),
            "workers": _tree_cpu(table, [w.pid for w in self.workers]),
            "load_generator": _self_cpu(),
            "machine_busy": busy,
            "machine_total": total,
            "throttling": [self.cgroups.throttling(r.cgroup) for r in self.replicas],
            "at": time.perf_counter(),
        }


def _cpu_delta(before: dict[str, Any], after: dict[str, Any], tasks: int) -> dict[str, Any]:
    wall = after["at"] - before["at"]
    replicas = [b - a for a, b in zip(before["replicas"], after["replicas"], strict=True)]
    parts = {
        "replicas": sum(replicas),
        "postgres": after["postgres"] - before["postgres"],
        "workers": after["workers"] - before["workers"],
        "load_generator": after["load_generator"] - before["load_generator"],
    }
    busy = after["machine_busy"] - before["machine_busy"]
    cores = (after["machine_total"] - before["machine_total"]) / max(wall, 1e-9)
    throttling = []
    for a, b in zip(before["throttling"], after["throttling"], strict=True):
        periods = b["periods"] - a["periods"]
        throttled = b["throttled_periods"] - a["throttled_periods"]
        throttling.append(
            {
                "periods": int(periods),
                "throttled_periods": int(throttled),
                "throttled_share": round(throttled / periods, 3) if periods else None,
                "throttled_s": round(b["throttled_s"] - a["throttled_s"], 3),
            }
        )
    return {
        "cpu_s": {k: round(v, 3) for k, v in parts.items()},
        "cpu_ms_per_task": {k: round(v * 1000 / max(1, tasks), 3) for k, v in parts.items()},
        "cores_used": {k: round(v / wall, 3) for k, v in parts.items()},
        "replica_cpu_share_of_quota": [
            round(r / wall / (CPU_QUOTA_US / CPU_PERIOD_US), 3) for r in replicas
        ],
        "replica_throttling": throttling,
        "machine_cores_busy": round(busy / wall, 3),
        "machine_cores": round(cores, 2),
        "other_processes_cores": round((busy - sum(parts.values())) / wall, 3),
    }


# --- the cluster ----------------------------------------------------------------------------


def _fair_shares(total: int, n: int) -> list[int]:
    return sorted(total // n + (1 if i < total % n else 0) for i in range(n))


def _balanced(client: httpx.Client, replicas: Sequence[Replica]) -> tuple[bool, dict[str, Any]]:
    """Each replica's ``shards_owned`` fair, and ``/api/v1/cluster`` with every shard once."""
    try:
        owned = [
            int(client.get(f"{r.url}/readyz", timeout=5).json()["shards_owned"]) for r in replicas
        ]
        cluster = client.get(f"{replicas[0].url}/api/v1/cluster", timeout=5).json()
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return False, {}
    total = int(cluster["shards_total"])
    shards = [s for member in cluster["replicas"] for s in member["shards"]]
    detail = {"shards_owned": owned, "shards_total": total, "members": len(cluster["replicas"])}
    ok = (
        sorted(owned) == _fair_shares(total, len(replicas))
        and len(cluster["replicas"]) == len(replicas)
        and sorted(shards) == list(range(total))
    )
    return ok, detail


def _wait_balanced(client: httpx.Client, replicas: Sequence[Replica]) -> dict[str, Any]:
    began = time.perf_counter()
    deadline = began + BALANCE_TIMEOUT_SECONDS
    ok, detail = _balanced(client, replicas)
    while not ok:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"not balanced within {BALANCE_TIMEOUT_SECONDS} s: {detail}")
        time.sleep(0.2)
        ok, detail = _balanced(client, replicas)
    return {"balanced_s": round(time.perf_counter() - began, 3), **detail}


def _counts(conn: psycopg.Connection[Any], workflow: str) -> dict[str, int]:
    rows = conn.execute(
        "SELECT status, count(*) FROM workflow_runs WHERE workflow_id = %s GROUP BY status",
        (workflow,),
    ).fetchall()
    return {str(status): int(n) for status, n in rows}


def _unfinished(counts: dict[str, int]) -> int:
    return sum(n for s, n in counts.items() if s not in ("succeeded", "failed", "canceled"))


def _attempts(conn: psycopg.Connection[Any], workflow: str) -> dict[str, Any]:
    """Who executed the workflow's attempts (replica or worker), and any attempt not once."""
    rows = conn.execute(
        "SELECT coalesce(a.executed_by, a.worker_id, '?'), a.status, a.attempt > 1, count(*)"
        " FROM attempts a JOIN workflow_runs r ON r.run_id = a.run_id"
        " WHERE r.workflow_id = %s GROUP BY 1, 2, 3",
        (workflow,),
    ).fetchall()
    by: dict[str, int] = {}
    statuses: dict[str, int] = {}
    retried = 0
    for who, status, again, n in rows:
        by[str(who)] = by.get(str(who), 0) + int(n)
        statuses[str(status)] = statuses.get(str(status), 0) + int(n)
        retried += int(n) if again else 0
    return {"by": dict(sorted(by.items())), "statuses": statuses, "retries": retried}


def _workflow(name: str, workload: str) -> dict[str, Any]:
    tasks = chain(CHAIN)
    if workload == "remote":
        tasks = [
            {k: v for k, v in task.items() if k != "input"} | {"action": REMOTE_ACTION}
            for task in tasks
        ]
    return {"id": name, "tasks": tasks}


async def _submit(clients: Sequence[httpx.AsyncClient], workflow: str, n: int) -> dict[str, int]:
    """``CLIENTS`` callers start ``n`` runs between them, round-robin through the replicas."""
    remaining = n
    turn = itertools.count()
    errors: dict[str, int] = {}
    deadline = time.monotonic() + PHASE_TIMEOUT_SECONDS

    async def caller() -> None:
        nonlocal remaining
        while remaining > 0 and time.monotonic() < deadline:
            remaining -= 1
            client = clients[next(turn) % len(clients)]
            try:
                response = await client.post(
                    f"/api/v1/workflows/{workflow}/versions/1/runs",
                    headers={"Idempotency-Key": f"scaleout-{next(_keys)}"},
                )
                key = "" if response.status_code == 202 else str(response.status_code)
            except httpx.HTTPError as exc:
                key = type(exc).__name__
            if key:
                errors[key] = errors.get(key, 0) + 1

    await asyncio.gather(*(caller() for _ in range(CLIENTS)))
    return errors


async def _drive(
    replicas: Sequence[Replica], conn: psycopg.Connection[Any], workflow: str, n: int
) -> dict[str, Any]:
    """Submit ``n`` runs, then poll until none is unfinished; the wall time from the first."""
    headers = {"Authorization": f"Bearer {OPERATOR}"}
    per = max(2, CLIENTS // len(replicas) + 1)
    limits = httpx.Limits(max_connections=per, max_keepalive_connections=per)
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=r.url, headers=headers, limits=limits, timeout=60)
            )
            for r in replicas
        ]
        began = time.perf_counter()
        errors = await _submit(clients, workflow, n)
        submitted = time.perf_counter()
        deadline = time.monotonic() + PHASE_TIMEOUT_SECONDS
        counts = _counts(conn, workflow)
        while _unfinished(counts) and time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS)
            counts = _counts(conn, workflow)
        elapsed = time.perf_counter() - began
    return {
        "errors": errors,
        "statuses": counts,
        "drained": _unfinished(counts) == 0,
        "wall_s": round(elapsed, 3),
        "submit_s": round(submitted - began, 3),
    }


EXPECTED_LINES = ("SIGTERM: stopping",)
"""Plain lines that say nothing is wrong (a worker's stop on the benchmark's SIGTERM)."""


def _log_problems(paths: Sequence[Path]) -> dict[str, Any]:
    """Log records at WARNING or above, and lines that are not JSON (tracebacks), by file."""
    found: dict[str, Any] = {}
    for path in paths:
        if not path.exists():
            continue
        levels: dict[str, int] = {}
        messages: dict[str, int] = {}
        other: list[str] = []
        for raw in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(raw)
            except json.JSONDecodeError:
                if raw.strip() and not raw.startswith(EXPECTED_LINES) and len(other) < 5:
                    other.append(raw.strip()[:300])
                continue
            if not isinstance(record, dict):
                continue
            level = str(record.get("level", "")).upper()
            if level in ("WARNING", "ERROR", "CRITICAL"):
                levels[level] = levels.get(level, 0) + 1
                text = f"{level} {record.get('logger', '')}: {record.get('message', '')}"
                messages[text[:300]] = messages.get(text[:300], 0) + 1
        if levels or other:
            found[path.name] = {"levels": levels, "messages": messages, "other_lines": other}
    return found


# --- one configuration ----------------------------------------------------------------------


def _check(ok: bool, failure: str) -> None:
    if not ok:
        raise RuntimeError(failure)


def configuration(
    new_database: Callable[[str], str], cgroups: CpuCgroups, workload: str, n: int, logs: Path
) -> dict[str, Any]:
    """``n`` replicas on a fresh database, warmed up, balanced, then one measured phase."""
    database_url = new_database(f"scaleout_{workload}_{n}")
    env = {
        "WORKLOAD_REPLICA": "true",
        "WORKLOAD_OPERATOR_TOKENS": OPERATOR,
        "WORKLOAD_WORKER_TOKENS": WORKER,
        "WORKLOAD_LOCK_CHECK_INTERVAL_SECONDS": LOCK_CHECK_INTERVAL,
    }
    replicas = [
        Replica(
            database_url,
            logs / f"{workload}-{n}-r{i}.log",
            {**env, "WORKLOAD_REPLICA_ID": f"r{i}"},
            cgroups.children[i],
        )
        for i in range(n)
    ]
    workers: list[subprocess.Popen[bytes]] = []
    worker_logs = logs / f"{workload}-{n}-workers"
    worker_logs.mkdir()
    result: dict[str, Any] = {"workload": workload, "replicas": n}
    window: list[float] = []  # the measured phase's start and end (the epoch's seconds)
    try:
        _migrate(database_url)
        for replica in replicas:
            replica.start()
        result["ready_s"] = [round(r.wait_ready(READY_TIMEOUT_SECONDS), 3) for r in replicas]
        result["in_cgroup"] = all(r.in_cgroup() for r in replicas)
        _check(result["in_cgroup"], "a replica is not in its cgroup")
        headers = {"Authorization": f"Bearer {OPERATOR}"}
        with (
            httpx.Client(headers=headers, timeout=30) as client,
            psycopg.connect(database_url, autocommit=True) as conn,
        ):
            result["balance"] = _wait_balanced(client, replicas)
            for name in ("warm", "measured"):
                client.post(
                    f"{replicas[0].url}/api/v1/workflows",
                    json=_workflow(name, workload),
                    headers={"Idempotency-Key": f"wf-{name}"},
                ).raise_for_status()
            if workload == "remote":
                workers = _start_workers([r.url for r in replicas], worker_logs)
            warm = asyncio.run(_drive(replicas, conn, "warm", WARMUP))
            _check(warm["drained"], f"the warm-up did not drain: {warm}")
            result["warmup"] = {"runs": WARMUP, "wall_s": warm["wall_s"]}

            xid = next_xid(conn)
            time.sleep(STATS_SECONDS)
            idle_per_s = (next_xid(conn) - xid) / STATS_SECONDS
            writes_before = _table_writes(conn)

            postmaster = _postmaster(conn)
            components = Components(replicas, postmaster, workers, cgroups)
            load_start = os.getloadavg()[0]
            xid_before = next_xid(conn)
            before = components.snapshot()
            window.append(time.time())
            phase = asyncio.run(_drive(replicas, conn, "measured", RUNS[workload]))
            window.append(time.time())
            result["replicas_alive_after_phase"] = [
                r.process.poll() is None for r in replicas if r.process
            ]
            after = components.snapshot()
            xids = next_xid(conn) - xid_before
            attempts = _attempts(conn, "measured")
            time.sleep(STATS_SECONDS)
            writes = _table_writes(conn)
        succeeded = phase["statuses"].get("succeeded", 0)
        tasks = succeeded * CHAIN
        wall = phase["wall_s"]
        renewals = idle_per_s * wall
        per_task = {
            table: round((count - writes_before.get(table, 0)) / max(1, tasks), 3)
            for table, count in sorted(writes.items())
            if count != writes_before.get(table, 0)
        }
        result.update(
            runs=RUNS[workload],
            tasks=tasks,
            tasks_per_s=round(tasks / wall, 1),
            **phase,
            attempts=attempts,
            write_transactions={
                "xids_in_window": xids,
                "idle_xids_per_s": round(idle_per_s, 2),
                "per_task_raw": round(xids / max(1, tasks), 3),
                "per_task": round((xids - renewals) / max(1, tasks), 3),
                "per_task_without_run_creation": round(
                    (xids - renewals - succeeded) / max(1, tasks), 3
                ),
            },
            row_writes_per_task=per_task,
            cpu=_cpu_delta(before, after, tasks),
            loadavg_1m={"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)},
        )
    except Exception as exc:  # reported in the JSON; the other configurations still run
        result["error"] = repr(exc)
        if isinstance(exc, subprocess.CalledProcessError) and exc.stderr:
            result["error_output"] = exc.stderr.decode(errors="replace").splitlines()[-10:]
    finally:
        result["workers_stop"] = _stop_all(workers)
        started = [r for r in replicas if r.process]
        result["replicas_stop"] = _stop_all([r.process for r in started if r.process])
        for replica, stop in zip(started, result["replicas_stop"], strict=True):
            if stop["exited_before_stop"] or stop["exit_code"] != 0:
                stop["log_tail"] = replica.log.read_text(errors="replace").splitlines()[-10:]
        result["log_problems"] = _log_problems(
            [r.log for r in replicas] + sorted(worker_logs.glob("*.log"))
        )
    if len(window) == 2:
        requests = _requests([r.log for r in replicas], window[0], window[1])
        result["requests_per_task"] = {
            route: round(count / max(1, result["tasks"]), 3) for route, count in requests.items()
        }
    return result


def _table_writes(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """Rows inserted, updated or deleted so far, by table (PostgreSQL's cumulative counters)."""
    rows = conn.execute(
        "SELECT relname, n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables"
    ).fetchall()
    return {str(name): int(count) for name, count in rows}


def _requests(paths: Sequence[Path], start: float, end: float) -> dict[str, int]:
    """The replicas' access-log lines between ``start`` and ``end``, by route and status."""
    counts: dict[str, int] = {}
    for path in paths:
        if not path.exists():
            continue
        for raw in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if not isinstance(record, dict) or record.get("logger") != "workload.access":
                continue
            with contextlib.suppress(KeyError, TypeError, ValueError):
                at = datetime.fromisoformat(str(record["time"]).replace("Z", "+00:00"))
                if start <= at.timestamp() <= end:
                    key = f"{record['method']} {record['route']} {record['status']}"
                    counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def _postmaster(conn: psycopg.Connection[Any]) -> int:
    """PostgreSQL's postmaster: the parent of this connection's backend."""
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    stat = Path(f"/proc/{int(row[0])}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


# --- the whole benchmark --------------------------------------------------------------------


def _summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for workload in WORKLOADS:
        mine = {r["replicas"]: r for r in rows if r["workload"] == workload and "tasks_per_s" in r}
        rates = {str(n): r["tasks_per_s"] for n, r in sorted(mine.items())}
        ratio = (
            round(mine[4]["tasks_per_s"] / mine[1]["tasks_per_s"], 2)
            if 1 in mine and 4 in mine and mine[1]["tasks_per_s"]
            else None
        )
        summary[workload] = {
            "tasks_per_s": rates,
            "ratio_4_to_1": ratio,
            "target": "≥ 3",
            "met": None if ratio is None else ratio >= 3,
            "write_transactions_per_task": {
                str(n): r["write_transactions"]["per_task"] for n, r in sorted(mine.items())
            },
        }
    local = summary["local"]["write_transactions_per_task"]
    remote = summary["remote"]["write_transactions_per_task"]
    difference = {n: round(remote[n] - local[n], 3) for n in local if n in remote}
    summary["remote_minus_local_write_transactions_per_task"] = {
        "by_replicas": difference,
        "target": "≤ 1",
        "met": all(d <= 1 for d in difference.values()) if difference else None,
    }
    return summary


NOTES = {
    "cgroups": "each replica alone in a cgroup limited to 0.25 CPU; PostgreSQL, the 8 workers "
    "and this load generator are not limited (they share the machine's cores)",
    "tasks_per_s": "tasks of succeeded runs ÷ seconds from the first submission until the "
    "database said no run of the workflow was unfinished",
    "write_transactions": "transaction ids handed out during the window (a transaction takes "
    "one only when it writes), less the idle cluster's rate measured just before (lease "
    "renewals: one per replica per lock check; idle workers' claims) × the window; what "
    "remains includes the run creations (1 per run, 0.1 per task: "
    "per_task_without_run_creation leaves them out), the runners' commits, workers' claims "
    "and reports, and anything else on the server (autovacuum's analyze: rare)",
    "cpu": "user + system CPU of each process tree (/proc/<pid>/stat, reaped children "
    "included) over the window; machine_cores_busy from /proc/stat; other_processes_cores "
    "is what the rest of the machine used meanwhile",
    "workers": f"{WORKERS} processes of benchmarks.worker_app (16 slots, batched claims), "
    "worker i on replica i mod n",
    "row_writes_per_task": "rows inserted + updated + deleted by table (pg_stat_user_tables) "
    "from before the window to STATS_SECONDS after it, ÷ tasks: rows, not transactions; "
    "'shards' and 'replicas' are the lease renewals (every held shard's row at every lock "
    "check), 'workers' one per claim statement (each upserts its worker, found work or not)",
    "requests_per_task": "the replicas' access-log lines in the window by method, route and "
    "status, ÷ tasks",
}


def run() -> dict[str, Any]:
    try:
        cgroups = CpuCgroups.create(max(REPLICA_COUNTS))
    except NoCgroups as exc:
        return {"skipped": str(exc)}
    rows: list[dict[str, Any]] = []
    try:
        with (
            tempfile.TemporaryDirectory(prefix="workload-scaleout-bench-") as scratch,
            database_server("workload-scaleout-bench") as new_database,
        ):
            baseline = commit_baseline(new_database("scaleout_baseline"))
            for n in REPLICA_COUNTS:
                for workload in WORKLOADS:
                    try:
                        row = configuration(new_database, cgroups, workload, n, Path(scratch))
                    except Exception as exc:  # reported; the other configurations still run
                        row = {"workload": workload, "replicas": n, "error": repr(exc)}
                    rows.append(row)
                    figure = row.get("tasks_per_s", row.get("error"))
                    print(f"scaleout: {workload} × {n}: {figure}", file=sys.stderr, flush=True)
    finally:
        cgroup_errors = cgroups.remove()
    return {
        "runs_per_configuration": RUNS,
        "tasks_per_run": CHAIN,
        "clients": CLIENTS,
        "workers": WORKERS,
        "warmup_runs": WARMUP,
        "lock_check_interval_s": float(LOCK_CHECK_INTERVAL),
        "cgroups": {**cgroups.describe(), "removal_errors": cgroup_errors},
        "commit_baseline": baseline,
        "summary": _summary(rows),
        "configurations": rows,
        "notes": NOTES,
        "server": "workload serve --replica on 127.0.0.1, embedded PostgreSQL over a Unix socket",
    }


def main() -> None:
    result = run()
    if SMOKE:
        result["note"] = "smoke counts: a check that it runs, not a measurement"
    emit(NAME, result)


if __name__ == "__main__":
    main()
