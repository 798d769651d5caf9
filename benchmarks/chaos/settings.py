"""Every knob of the soak (environment, then command line) and the workflows the load runs.

``CHAOS_MINUTES`` (5–15, default 5) is how long faults are injected; ``CHAOS_SMOKE=1`` (or
``--smoke``) replaces it by a short schedule that injects each fault kind once, for development.
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
    "VIEWER_TOKEN",
    "WORKFLOWS",
    "Settings",
    "SettingsError",
    "parse_settings",
]

OPERATOR_TOKEN = "chaos-operator-token-0123456789"
VIEWER_TOKEN = "chaos-viewer-token-9876543210"
MIN_MINUTES, MAX_MINUTES, DEFAULT_MINUTES = 5, 15, 5
# One fault every this many seconds in a full soak: room for the fault, the recovery and a
# stretch of load with nothing broken (which is where 5xx would be a defect).
FULL_FAULT_INTERVAL_SECONDS = 25.0
SMOKE_FAULT_INTERVAL_SECONDS = 12.0

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
    args = parser.parse_args(argv)
    try:
        minutes, seed = int(args.minutes), int(args.seed)
    except ValueError as exc:
        raise SettingsError(f"CHAOS_MINUTES and CHAOS_SEED must be integers: {exc}") from None
    if args.smoke:
        # Each kind once (see faults.KINDS: eight of them), one every few seconds.
        smoke_seconds = 8 * SMOKE_FAULT_INTERVAL_SECONDS
        return Settings(
            smoke_seconds, SMOKE_FAULT_INTERVAL_SECONDS, True, seed, args.keep, args.summary
        )
    if not MIN_MINUTES <= minutes <= MAX_MINUTES:
        raise SettingsError(
            f"CHAOS_MINUTES must be between {MIN_MINUTES} and {MAX_MINUTES}, not {minutes}"
        )
    return Settings(
        minutes * 60.0, FULL_FAULT_INTERVAL_SECONDS, False, seed, args.keep, args.summary
    )
