"""Every knob of the soak (environment, then command line) and the workflows the load runs.

``CHAOS_MINUTES`` (5–15, default 5) is how long faults are injected; ``CHAOS_SMOKE=1`` (or
``--smoke``) replaces it by a short schedule that injects each fault kind once, for development.
``--workers N`` adds N worker processes (remote tasks, agents whose tool a worker serves, and
the worker faults); ``--replicas N`` runs N service processes, a standby pair or more
(``--standby``), or with ``--replica`` replicas that all execute (SPEC §16).
``CHAOS_SEED`` fixes the random choices (which runs are canceled, how long PostgreSQL stays
down); ``CHAOS_KEEP=1`` keeps the temporary directory (cluster, service logs) for a post-mortem;
``CHAOS_SUMMARY=path`` also writes the JSON summary to ``path`` (under nox, stdout carries the
progress lines too).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

__all__ = [
    "OPERATOR_TOKEN",
    "PROBE_QUEUE",
    "PROBE_WORKFLOW",
    "REMOTE_WORKFLOWS",
    "SERVICE_KINDS",
    "VIEWER_TOKEN",
    "WORKER_KINDS",
    "WORKER_TOKEN",
    "WORKFLOWS",
    "Settings",
    "SettingsError",
    "fault_kinds",
    "parse_settings",
]

OPERATOR_TOKEN = "chaos-operator-token-0123456789"
VIEWER_TOKEN = "chaos-viewer-token-9876543210"
WORKER_TOKEN = "chaos-worker-token-5647382910"
MIN_MINUTES, MAX_MINUTES, DEFAULT_MINUTES = 5, 15, 5
MAX_WORKERS, MAX_REPLICAS = 16, 4
# One fault every this many seconds in a full soak: room for the fault, the recovery and a
# stretch of load with nothing broken (which is where 5xx would be a defect).
FULL_FAULT_INTERVAL_SECONDS = 20.0
SMOKE_FAULT_INTERVAL_SECONDS = 12.0
# The lease of a remote attempt: a frozen worker loses it after this long without a heartbeat.
REMOTE_HEARTBEAT_TIMEOUT_SECONDS = 4.0
# The lock check interval (a lease is three of them, SPEC §14, §16): 0.2 s for one process, so
# that recoveries are quick; 0.5 s when several processes share the machine's two cores, where
# a process can wait longer than 0.6 s for a core and lose a 0.6 s lease with no fault at all.
SINGLE_LOCK_CHECK_SECONDS = 0.2
SHARED_LOCK_CHECK_SECONDS = 0.5

_RETRY = {"max_attempts": 4, "initial_backoff_seconds": 0.1, "max_backoff_seconds": 1}
WORKFLOWS: tuple[dict[str, Any], ...] = (
    {
        "id": "chaos-diamond",
        "description": "a fans out to b and c, which fan in to d; short sleeps",
        "tasks": [
            {"key": "a", "action": "mock", "input": {"sleep_ms": 100}, "retry": _RETRY},
            {"key": "b", "action": "mock", "depends_on": ["a"], "input": {"sleep_ms": 150}},
            {
                "key": "c",
                "action": "mock",
                "depends_on": ["a"],
                "input": {"sleep_ms": 50},
                "retry": _RETRY,
            },
            {"key": "d", "action": "mock", "depends_on": ["b", "c"], "retry": _RETRY},
        ],
    },
    {
        "id": "chaos-retry",
        "description": "fails its first attempt, succeeds after a short backoff",
        "tasks": [
            {
                "key": "flaky",
                "action": "mock",
                "input": {"fail_first": 1, "sleep_ms": 50},
                "retry": {"max_attempts": 4, "initial_backoff_seconds": 0.2},
            }
        ],
    },
    {
        "id": "chaos-single",
        "description": "one task, one attempt: an interruption fails it",
        "tasks": [{"key": "only", "action": "mock", "input": {"sleep_ms": 20}}],
    },
)
"""Task ``b`` of the diamond and the single task have one attempt: an interruption fails them
(and skips what is downstream), so failed and skipped states occur under faults too."""

_REMOTE = {"queue": "chaos", "heartbeat_timeout_seconds": REMOTE_HEARTBEAT_TIMEOUT_SECONDS}
_NOTE_TOOL = {
    "name": "note",
    "action": "mock",
    "description": "echo a note (runs in the control plane)",
    "parameters": {"type": "object", "properties": {"output": {"type": "object"}}},
}
_LENGTH_TOOL = {
    "name": "length",
    "action": "chaos_tool",
    "description": "the length of a text (a worker serves it)",
    "parameters": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}
REMOTE_WORKFLOWS: tuple[dict[str, Any], ...] = (
    {
        "id": "chaos-remote",
        "description": "a mock task, a remote one on a worker, a mock one after it",
        "tasks": [
            {"key": "prepare", "action": "mock", "input": {"sleep_ms": 20}, "retry": _RETRY},
            {
                "key": "work",
                "action": "chaos_quick",
                "depends_on": ["prepare"],
                "input": {"sleep_ms": 30},
                "retry": _RETRY,
                **_REMOTE,
            },
            {"key": "store", "action": "mock", "depends_on": ["work"], "retry": _RETRY},
        ],
    },
    {
        "id": "chaos-heartbeat",
        "description": "a remote task that heartbeats for about a second",
        "tasks": [
            {
                "key": "long",
                "action": "chaos_heartbeat",
                "input": {"steps": 8, "step_ms": 120},
                "retry": _RETRY,
                **_REMOTE,
            }
        ],
    },
    {
        "id": "chaos-agent",
        "description": "an agent calls a mock tool and a worker's tool, then answers",
        "tasks": [
            {
                "key": "agent",
                "action": "agent",
                "queue": "chaos",
                "retry": _RETRY,
                "input": {
                    "model": "mock",
                    "prompt": "measure the word four",
                    "tools": [_NOTE_TOOL, _LENGTH_TOOL],
                    "script": [
                        {
                            "tool_calls": [
                                {"name": "note", "arguments": {"output": {"plan": "measure"}}},
                                {"name": "length", "arguments": {"text": "four"}},
                            ]
                        },
                        {"content": "the text has four characters"},
                    ],
                    "budget": {"max_model_calls": 4, "max_tool_calls": 4},
                },
            }
        ],
    },
)
"""The workflows added with ``--workers``: remote tasks (a short one and a heartbeating one)
and an agent whose tool a worker serves; every remote task can be retried, so that a killed or
frozen worker costs a retry, never a run."""

PROBE_QUEUE = "chaos-probe"
PROBE_WORKFLOW: dict[str, Any] = {
    "id": "chaos-probe",
    "description": "one remote task no worker serves: the soak claims it itself, reports late",
    "tasks": [
        {
            "key": "probe",
            "action": "chaos_probe",
            "queue": PROBE_QUEUE,
            "heartbeat_timeout_seconds": 2,
            "retry": {"max_attempts": 3, "initial_backoff_seconds": 0.1},
        }
    ],
}
"""A frozen worker's late report, played by the soak: it claims the attempt with the worker
token, lets the lease run out, then completes it — which must be refused (409 ``lease_lost``)."""


class SettingsError(ValueError):
    """A knob has a value the soak refuses."""


@dataclass(frozen=True)
class Settings:
    """What one soak does and how long each part may take."""

    fault_seconds: float
    fault_interval_seconds: float
    smoke: bool
    seed: int
    keep: bool
    summary_path: str | None = None
    clients: int = 4
    cancel_fraction: float = 0.05
    client_pause_seconds: float = 0.15
    request_timeout_seconds: float = 5.0
    request_deadline_seconds: float = 120.0
    max_runs_per_client: int = 20_000
    lock_check_interval_seconds: float = 0.2
    stable_ready_seconds: float = 1.5
    window_margin_seconds: float = 1.0
    recovery_deadline_seconds: float = 90.0
    drain_deadline_seconds: float = 180.0
    sigstop_seconds: float = 5.0
    pg_down_seconds: tuple[float, float] = (5.0, 8.0)
    workers: int = 0
    replicas: int = 1
    replica_mode: bool = False
    worker_freeze_seconds: float = 3 * REMOTE_HEARTBEAT_TIMEOUT_SECONDS
    partition_seconds: tuple[float, float] = (8.0, 12.0)
    latency_seconds: float = 8.0
    latency_ms: float = 40.0

    @property
    def workflows(self) -> tuple[dict[str, Any], ...]:
        """The workflows the load starts runs of."""
        return WORKFLOWS + (REMOTE_WORKFLOWS if self.workers else ())

    @property
    def serve_flag(self) -> str | None:
        """How each service process is started: ``--replica``, ``--standby`` or alone."""
        if self.replica_mode:
            return "--replica"
        return "--standby" if self.replicas > 1 else None

    @property
    def lifetime_seconds(self) -> float:
        """A hard bound on how long the load and the supervisor may run at all."""
        return self.fault_seconds + 1_200.0

    @property
    def fault_count(self) -> int:
        """How many faults the schedule injects (the kinds are cycled)."""
        return max(1, int(self.fault_seconds // self.fault_interval_seconds))

    def describe(self) -> dict[str, Any]:
        """The settings worth printing in the summary."""
        return {
            "mode": "smoke" if self.smoke else "full",
            "fault_seconds": self.fault_seconds,
            "fault_interval_seconds": self.fault_interval_seconds,
            "clients": self.clients,
            "cancel_fraction": self.cancel_fraction,
            "lock_check_interval_seconds": self.lock_check_interval_seconds,
            "seed": self.seed,
            "workers": self.workers,
            "replicas": self.replicas,
            "processes": "replicas"
            if self.replica_mode
            else ("standby" if self.replicas > 1 else "single"),
            "workflows": [w["id"] for w in self.workflows],
        }


def parse_settings(argv: list[str] | None = None, env: dict[str, str] | None = None) -> Settings:
    """Settings from ``env`` (default: the process environment) and ``argv`` (which wins).

    Raises:
        SettingsError: minutes outside 5–15, or a value that is not a number.
    """
    env = dict(os.environ if env is None else env)
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chaos", description=__doc__)
    parser.add_argument("--minutes", default=env.get("CHAOS_MINUTES", str(DEFAULT_MINUTES)))
    parser.add_argument("--smoke", action="store_true", default=env.get("CHAOS_SMOKE") == "1")
    parser.add_argument("--seed", default=env.get("CHAOS_SEED", "1"))
    parser.add_argument("--keep", action="store_true", default=env.get("CHAOS_KEEP") == "1")
    parser.add_argument("--summary", default=env.get("CHAOS_SUMMARY") or None)
    parser.add_argument("--workers", default=env.get("CHAOS_WORKERS", "0"))
    parser.add_argument("--replicas", default=env.get("CHAOS_REPLICAS", "1"))
    parser.add_argument(
        "--replica", action="store_true", default=env.get("CHAOS_REPLICA_MODE") == "1"
    )
    parser.add_argument("--lock-check", default=env.get("CHAOS_LOCK_CHECK_SECONDS"))
    args = parser.parse_args(argv)
    try:
        minutes, seed = int(args.minutes), int(args.seed)
        workers, replicas = int(args.workers), int(args.replicas)
        lock_check = None if args.lock_check is None else float(args.lock_check)
    except ValueError as exc:
        raise SettingsError(
            f"CHAOS_MINUTES, CHAOS_SEED, --workers and --replicas must be integers, and"
            f" --lock-check a number: {exc}"
        ) from None
    if lock_check is None:
        alone = replicas == 1 and workers == 0 and not args.replica
        lock_check = SINGLE_LOCK_CHECK_SECONDS if alone else SHARED_LOCK_CHECK_SECONDS
    if not 0.1 <= lock_check <= 5:
        raise SettingsError(f"--lock-check must be between 0.1 and 5 seconds, not {lock_check}")
    if not 0 <= workers <= MAX_WORKERS:
        raise SettingsError(f"--workers must be between 0 and {MAX_WORKERS}, not {workers}")
    if not 1 <= replicas <= MAX_REPLICAS:
        raise SettingsError(f"--replicas must be between 1 and {MAX_REPLICAS}, not {replicas}")
    shape = {
        "workers": workers,
        "replicas": replicas,
        "replica_mode": args.replica,
        "lock_check_interval_seconds": lock_check,
    }
    if args.smoke:
        # Each kind once (see faults.kinds), one every few seconds.
        kinds = len(fault_kinds(workers=workers, replicas=replicas))
        smoke_seconds = kinds * SMOKE_FAULT_INTERVAL_SECONDS
        return Settings(
            smoke_seconds,
            SMOKE_FAULT_INTERVAL_SECONDS,
            True,
            seed,
            args.keep,
            args.summary,
            **shape,
        )
    if not MIN_MINUTES <= minutes <= MAX_MINUTES:
        raise SettingsError(
            f"CHAOS_MINUTES must be between {MIN_MINUTES} and {MAX_MINUTES}, not {minutes}"
        )
    return Settings(
        minutes * 60.0,
        FULL_FAULT_INTERVAL_SECONDS,
        False,
        seed,
        args.keep,
        args.summary,
        **shape,
    )


SERVICE_KINDS = (
    "sigkill",
    "sigterm",
    "sigstop",
    "pg_stop",
    "terminate_all_backends",
    "terminate_lock_backend",
    "terminate_pool_backends",
    "second_serve",
    "partition",
    "db_latency",
)
"""Faults of a service process (the target: the leader, or each replica in turn) or of
PostgreSQL; ``partition`` and ``db_latency`` act on the target's own path to PostgreSQL."""
WORKER_KINDS = ("worker_sigkill", "worker_sigstop")
"""Faults of a worker process (each worker in turn), with ``--workers``."""


def fault_kinds(*, workers: int, replicas: int) -> tuple[str, ...]:
    """The kinds a soak of this shape cycles through, in order."""
    del replicas  # every kind applies to one process as to several
    return SERVICE_KINDS + (WORKER_KINDS if workers else ())
