"""Watching a run through the API until it finishes: polls, shows progress, picks the exit code."""

from __future__ import annotations

import time

from workload_cli._exit import ExitCode, exit_code_for_run
from workload_cli._progress import progress_display
from workload_cli._session import Session

__all__ = ["DEFAULT_INTERVAL", "watch_run"]

DEFAULT_INTERVAL = 0.5
_TASK_PAGE = 200


def watch_run(
    current: Session,
    run_id: str,
    *,
    interval: float = DEFAULT_INTERVAL,
    timeout: float | None = None,
    quiet: bool = False,
) -> ExitCode:
    """Show a run's progress until it is terminal or ``timeout`` seconds have passed.

    Returns:
        0 succeeded, 10 failed, 11 canceled, 12 still running at the deadline.
    """
    client, out = current.client, current.out
    deadline = None if timeout is None else time.monotonic() + timeout
    with progress_display(out, quiet=quiet) as display:
        try:
            while True:
                # The run first: once it is terminal, every task read after it is too.
                run = client.runs.get(run_id)
                tasks = list(client.runs.tasks(run_id, limit=_TASK_PAGE))
                display.update(run, tasks)
                if run.is_terminal:
                    display.finish(run)
                    return exit_code_for_run(run.status)
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    display.finish(run)
                    out.say(
                        f"timed out after {timeout}s: run {run_id} is still {run.status.value} "
                        "(it goes on)"
                    )
                    return ExitCode.WAIT_TIMEOUT
                time.sleep(interval if remaining is None else min(interval, remaining))
        except KeyboardInterrupt:
            out.say(f"stopped watching; run {run_id} goes on (workload runs cancel {run_id})")
            raise
