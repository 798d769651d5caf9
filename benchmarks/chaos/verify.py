"""After the drain: what the database and the API hold, against what the clients were told.

*Lost*: an acknowledged run id the database does not have. *Duplicated*: more than one run for
one idempotency key — a key whose answers named different runs, a run named under two keys, a
key whose stored record names another run than the one acknowledged, or a run that no
run-creation record names (its creation did not save its key). *Stuck*: an acknowledged run
that is not terminal after the drain. Invariant violations come from :mod:`.invariants` (SQL)
and from the API: each acknowledged run read back over HTTP must agree with its row, a sample
of event histories read page by page must be exactly 1..last_sequence, a sample of starts sent
again with their keys must replay the acknowledged run, an acknowledged cancel must have ended
in ``canceled``, and no request the clients sent (always a valid one) may have been refused
with another 4xx than a cancel's 409 ``run_finished``.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from typing import Any

import httpx
import psycopg

from benchmarks.chaos.invariants import EXERCISED, INVARIANTS
from benchmarks.chaos.load import Ledger
from benchmarks.chaos.settings import OPERATOR_TOKEN, VIEWER_TOKEN
from benchmarks.chaos.worker_app import worker

__all__ = ["Findings", "check_api", "check_database", "check_executions", "wait_terminal"]

Findings = dict[str, list[Any]]
"""Violation kind → every violating row (the report keeps a count and a few examples)."""

_TERMINAL = ("succeeded", "failed", "canceled")
_EVENT_SAMPLE = 100
_REPLAY_SAMPLE = 100


def _rows(conn: psycopg.Connection[Any], statement: str, params: Any = None) -> list[Any]:
    return conn.execute(statement, params).fetchall()


def wait_terminal(url: str, run_ids: list[str], deadline_seconds: float) -> list[str]:
    """Poll until every run is terminal (bounded); return those that are not."""
    deadline = time.monotonic() + deadline_seconds
    pending = list(run_ids)
    while pending and time.monotonic() < deadline:
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
                rows = _rows(
                    conn,
                    "SELECT run_id::text FROM workflow_runs"
                    " WHERE run_id::text = ANY(%s) AND status IN ('succeeded','failed','canceled')",
                    (pending,),
                )
        except psycopg.Error:
            rows = []
        done = {r[0] for r in rows}
        pending = [r for r in pending if r not in done]
        if pending:
            time.sleep(0.5)
    return pending


def check_database(url: str, ledger: Ledger) -> tuple[dict[str, Any], Findings]:
    """Lost, duplicated and run counts, and every SQL invariant's violations."""
    acknowledged = ledger.acknowledged
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        stored = dict(_rows(conn, "SELECT run_id::text, status FROM workflow_runs"))
        records = _rows(
            conn,
            "SELECT principal, idempotency_key, response->>'run_id' FROM idempotency_records"
            " WHERE operation = 'start_run'",
        )
        violations: Findings = {k: _rows(conn, q) for k, q in INVARIANTS.items()}
        exercised = {t: {"events": n, "runs": runs} for t, n, runs in _rows(conn, EXERCISED)}
    lost = sorted(r for r in acknowledged.values() if r not in stored)

    duplicated: Findings = defaultdict(list)
    for key, seen in ledger.run_ids_by_key.items():
        if len(seen) > 1:
            duplicated["several_runs_for_one_key"].append([key, sorted(seen)])
    keys_by_run: dict[str, list[str]] = defaultdict(list)
    for key, run_id in acknowledged.items():
        keys_by_run[run_id].append(key)
    for run_id, keys in keys_by_run.items():
        if len(keys) > 1:
            duplicated["one_run_for_several_keys"].append([run_id, keys])
    per_key = Counter((principal, key) for principal, key, _ in records)
    duplicated["several_records_for_one_key"] = [k for k, n in per_key.items() if n > 1]
    recorded = {key: run_id for _, key, run_id in records}
    duplicated["record_names_another_run"] = [
        [key, run_id, recorded[key]]
        for key, run_id in acknowledged.items()
        if key in recorded and recorded[key] != run_id
    ]
    duplicated["acknowledged_key_without_record"] = sorted(set(acknowledged) - set(recorded))
    duplicated["run_without_creation_record"] = sorted(set(stored) - set(recorded.values()))

    summary = {
        "runs_in_database": len(stored),
        "runs_by_status": dict(Counter(stored.values())),
        "creation_records": len(records),
        "events_exercised": exercised,
        "lost": len(lost),
        "lost_examples": lost[:5],
        "duplicated": sum(len(v) for v in duplicated.values()),
        "duplicated_by_kind": {k: len(v) for k, v in duplicated.items() if v},
        "duplicated_examples": {k: v[:3] for k, v in duplicated.items() if v},
    }
    return summary, violations


def check_api(base_url: str, url: str, ledger: Ledger, deadline_seconds: float) -> Findings:
    """Read every acknowledged run (and a sample of event histories) over HTTP, bounded."""
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        rows = _rows(
            conn, "SELECT run_id::text, status, revision, last_sequence FROM workflow_runs"
        )
    database = {r[0]: (r[1], r[2], r[3]) for r in rows}
    findings: Findings = defaultdict(list)
    deadline = time.monotonic() + deadline_seconds
    headers = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
    run_ids = sorted(set(ledger.acknowledged.values()) & set(database))
    with httpx.Client(base_url=base_url, headers=headers, timeout=10) as client:
        for run_id in run_ids:
            if time.monotonic() > deadline:
                findings["api_check_incomplete"].append(run_id)
                break
            status, revision, _ = database[run_id]
            answer = client.get(f"/api/v1/runs/{run_id}")
            seen = (answer.status_code, _field(answer, "status"), answer.headers.get("etag"))
            if seen != (200, status, f'"{revision}"'):
                findings["api_disagrees_with_database"].append([run_id, status, revision, seen])
        for run_id in _sample(run_ids, _EVENT_SAMPLE):
            sequences = _event_sequences(client, run_id)
            if sequences != list(range(1, database[run_id][2] + 1)):
                findings["api_events_not_contiguous"].append([run_id, database[run_id][2]])
    with httpx.Client(base_url=base_url, timeout=10) as client:
        client.headers["Authorization"] = f"Bearer {OPERATOR_TOKEN}"
        for key in _sample(sorted(ledger.acknowledged), _REPLAY_SAMPLE):
            answer = client.post(ledger.paths[key], headers={"Idempotency-Key": key})
            replayed = answer.headers.get("idempotent-replayed")
            seen = (answer.status_code, _field(answer, "run_id"), replayed)
            if seen != (202, ledger.acknowledged[key], "true"):
                findings["start_not_replayed"].append([key, ledger.acknowledged[key], seen])
    for key, code in ledger.rejected.items():
        findings["start_refused"].append([key, code])
    for run_id, code in ledger.cancels.items():
        status = database.get(run_id, ("missing",))[0]
        if code in (200, 202) and status != "canceled":
            findings["acknowledged_cancel_not_canceled"].append([run_id, code, status])
        if code == 409 and status not in ("succeeded", "failed"):
            findings["cancel_refused_but_not_finished"].append([run_id, code, status])
        if code not in (200, 202, 409):
            findings["cancel_refused"].append([run_id, code, status])
    return findings


def _sample(items: list[str], size: int) -> list[str]:
    """Up to ``size`` items spread evenly over ``items``."""
    return items[:: max(1, len(items) // size)][:size]


def _field(answer: httpx.Response, name: str) -> Any:
    try:
        body = answer.json()
    except ValueError:
        return None
    return body.get(name) if isinstance(body, dict) else None


def _event_sequences(client: httpx.Client, run_id: str) -> list[int]:
    sequences: list[int] = []
    cursor: str | None = None
    for _ in range(100):  # pages of 200: far more than any run here has
        params: dict[str, Any] = {"limit": 200, **({"cursor": cursor} if cursor else {})}
        answer = client.get(f"/api/v1/runs/{run_id}/events", params=params)
        if answer.status_code != 200:
            return [-answer.status_code]
        page = answer.json()
        sequences += [int(e["sequence"]) for e in page["items"]]
        cursor = page.get("next_cursor")
        if not cursor:
            break
    return sequences


def check_executions(url: str, lines: list[dict[str, Any]]) -> tuple[dict[str, Any], Findings]:
    """The workers' handler executions (:mod:`.worker_app`) against the attempts recorded.

    An attempt id is executed by one handler call at most (a second one would mean a claim
    handed out twice); every remote attempt recorded ``succeeded`` was executed. A task executed
    by several attempts — after a killed or frozen worker, or a replica whose lease lapsed — is
    the at-least-once the retry policy allows: counted, not a violation.
    """
    starts = Counter(line["attempt_id"] for line in lines if line.get("phase") == "start")
    ends = Counter(line["attempt_id"] for line in lines if line.get("phase") == "end")
    per_task: dict[tuple[str, str], set[str]] = defaultdict(set)
    kinds: Counter[str] = Counter()
    for line in lines:
        if line.get("phase") == "start":
            per_task[(line["run_id"], line["task_key"])].add(line["attempt_id"])
            kinds[str(line.get("kind"))] += 1
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        succeeded = _rows(
            conn,
            "SELECT attempt_id::text, run_id::text, task_key, attempt FROM attempts"
            " WHERE status = 'succeeded' AND action = ANY(%s)",
            (sorted(worker.actions),),
        )
    findings: Findings = defaultdict(list)
    findings["handler_executed_twice_for_one_attempt"] = [
        [attempt_id, n] for attempt_id, n in starts.items() if n > 1
    ]
    findings["succeeded_remote_attempt_never_executed"] = [
        list(row) for row in succeeded if row[0] not in starts
    ]
    reexecuted = {task: ids for task, ids in per_task.items() if len(ids) > 1}
    summary = {
        "executions": sum(starts.values()),
        "executions_by_kind": dict(kinds),
        "executions_cut_short": sum(n for a, n in starts.items() if a not in ends),
        "attempts_executed": len(starts),
        "tasks_executed_by_several_attempts": len(reexecuted),
        "most_attempts_executed_for_one_task": max(map(len, per_task.values()), default=0),
        "remote_attempts_succeeded": len(succeeded),
    }
    return summary, findings
