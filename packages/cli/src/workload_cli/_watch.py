"""Watching a run through the API until it finishes: live progress, then the exit code.

The run's event stream (``GET /runs/{run_id}/events/stream``, SPEC §13) says *when* the run
changed; the display then reads the run and its tasks again — at most once per ``interval``
however fast events come, and not at all while nothing happens. A stream refused for now (429,
too many open: ADR 0025) is not an error: the run is read again every ``Retry-After`` seconds
until a stream opens. The stream is followed in a
thread of its own so that the deadline (``--timeout``) and Ctrl-C stay with the main thread.
"""

from __future__ import annotations

import threading
import time

from workload_cli._exit import ExitCode, exit_code_for_run
from workload_cli._output import OutputFormat
from workload_cli._progress import progress_display
from workload_cli._session import Session
from workload_sdk import APITimeoutError, Client, TooManyRequests

__all__ = ["DEFAULT_INTERVAL", "watch_run"]

DEFAULT_INTERVAL = 0.5
_TASK_PAGE = 200
_BUSY_WAIT = 5.0
"""Seconds between reads of the run while the server refuses a stream (no ``Retry-After``)."""
_MAX_BUSY_WAIT = 30.0


class _Follower:
    """Follows the run's event stream in a thread; ``changed`` is set by every event."""

    def __init__(self, client: Client, run_id: str, timeout: float | None) -> None:
        self.changed = threading.Event()
        self.ended = threading.Event()
        self.error: Exception | None = None
        self._thread = threading.Thread(
            target=self._follow, args=(client, run_id, timeout), name="watch", daemon=True
        )
        self._thread.start()

    def _follow(self, client: Client, run_id: str, timeout: float | None) -> None:
        try:
            while True:
                try:
                    for _ in client.runs.stream_events(run_id, timeout=timeout):
                        self.changed.set()
                except TooManyRequests as busy:
                    # The server holds as many streams as it allows (ADR 0025): read the run
                    # again every Retry-After seconds, and open the stream again then.
                    self.changed.set()
                    time.sleep(min(busy.retry_after or _BUSY_WAIT, _MAX_BUSY_WAIT))
                else:
                    return
        except APITimeoutError:
            pass  # the main thread reports the deadline
        except Exception as exc:  # handed to the main thread, which raises it
            self.error = exc
        finally:
            self.ended.set()
            self.changed.set()


def watch_run(
    current: Session,
    run_id: str,
    *,
    interval: float = DEFAULT_INTERVAL,
    timeout: float | None = None,
    quiet: bool = False,
    show_output: bool = False,
) -> ExitCode:
    """Show a run's progress until it is terminal or ``timeout`` seconds have passed.

    With ``show_output``, a run that succeeded has its ``output`` printed after the progress,
    as JSON on standard output: one line in plain text, indented in a table (JSON output
    prints the final run, which carries it anyway).

    Returns:
        0 succeeded, 10 failed, 11 canceled, 12 still running at the deadline.
    """
    client, out = current.client, current.out
    deadline = None if timeout is None else time.monotonic() + timeout
    follower = _Follower(client, run_id, timeout)
    with progress_display(out, quiet=quiet) as display:
        try:
            while True:
                follower.changed.clear()  # before reading: a change from now on is seen
                # The run first: once it is terminal, every task read after it is too.
                run = client.runs.get(run_id)
                tasks = list(client.runs.tasks(run_id, limit=_TASK_PAGE))
                display.update(run, tasks)
                if run.is_terminal:
                    display.finish(run)
                    if show_output and run.output is not None and not out.is_json:
                        # One line in plain text (for `tail -n 1`), indented on a terminal.
                        out.json(run.output, indent=2 if out.format is OutputFormat.TABLE else None)
                    return exit_code_for_run(run.status)
                if follower.error is not None:
                    raise follower.error
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    display.finish(run)
                    out.say(
                        f"timed out after {timeout}s: run {run_id} is still {run.status.value} "
                        "(it goes on)"
                    )
                    return ExitCode.WAIT_TIMEOUT
                follower.changed.wait(remaining)
                # At most one redraw per interval, however fast the events come.
                pause = interval if deadline is None else min(interval, deadline - time.monotonic())
                time.sleep(max(pause, 0.0))
        except KeyboardInterrupt:
            out.say(f"stopped watching; run {run_id} goes on (workload runs cancel {run_id})")
            raise
