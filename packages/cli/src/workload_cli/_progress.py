"""Live progress of a run: a rich Live table on a terminal, one line per change otherwise.

Fed by reads the run's event stream triggers (``watch``, ``runs start --wait``, ``demo``) or by
the in-process engine (``run-local``), always with SDK models, so every caller shows progress
the same way. Redraws are throttled, so a change undone before the next redraw may not show;
``runs events`` has every transition.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime

from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from workload_cli._output import Output, OutputFormat, status_style, visible
from workload_cli._views import error_text, task_counts_text
from workload_sdk import Run, TaskRun, TaskStatus

__all__ = ["ProgressDisplay", "progress_display"]


class ProgressDisplay(abc.ABC):
    """Shows the state of one run as it changes (:func:`progress_display` starts and stops it)."""

    def __init__(self, out: Output) -> None:
        self.out = out

    @abc.abstractmethod
    def update(self, run: Run, tasks: Sequence[TaskRun]) -> None:
        """Show the latest state."""

    @abc.abstractmethod
    def finish(self, run: Run) -> None:
        """The run is terminal (or the watch gave up): leave the last state shown."""

    def start(self) -> None:
        """Take the terminal, if the display redraws it (before the first update)."""
        return

    def stop(self) -> None:
        """Give the terminal back (once the watching ends, however it ends)."""
        return


@contextmanager
def progress_display(out: Output, *, quiet: bool = False) -> Iterator[ProgressDisplay]:
    """The display for the output format: live table, lines, or (JSON) the final run only.

    With ``quiet``, nothing at all: the exit code tells how the run ended. The display is
    started on entering the context and stopped on leaving it.
    """
    display: ProgressDisplay
    if quiet:
        display = _Nothing(out)
    elif out.format is OutputFormat.TABLE:
        display = _LiveTable(out)
    elif out.format is OutputFormat.PLAIN:
        display = _Lines(out)
    else:
        display = _FinalJson(out)
    display.start()
    try:
        yield display
    finally:
        display.stop()


def _elapsed(run: Run) -> float:
    start = run.started_at or run.created_at
    end = run.finished_at or datetime.now(UTC)
    return max(0.0, (end - start).total_seconds())


def _detail(task: TaskRun) -> str:
    """Why a task waits or failed (a running retry still carries its last error: not shown)."""
    text = error_text(task.error)
    reason = None if text is None else visible(text)  # a worker's text: no terminal controls
    if task.status is TaskStatus.WAITING_RETRY and task.next_attempt_at is not None:
        wait = (task.next_attempt_at - datetime.now(UTC)).total_seconds()
        return f"retry in {max(wait, 0):.1f}s" + (f" after {reason}" if reason else "")
    if task.status is TaskStatus.FAILED and reason:
        return reason
    return ""


class _LiveTable(ProgressDisplay):
    """A table redrawn in place (rich Live) on stdout; a summary on stderr at the end."""

    def __init__(self, out: Output) -> None:
        super().__init__(out)
        self._live = Live(console=out.stdout, refresh_per_second=8, transient=False)

    def start(self) -> None:
        self._live.start()

    def stop(self) -> None:
        self._live.stop()

    def update(self, run: Run, tasks: Sequence[TaskRun]) -> None:
        self._live.update(self._render(run, tasks), refresh=True)

    def finish(self, run: Run) -> None:
        self._live.stop()
        self.out.say(
            f"run {run.run_id} {run.status.value} in {_elapsed(run):.1f}s",
            style=status_style(run.status),
        )

    @staticmethod
    def _render(run: Run, tasks: Sequence[TaskRun]) -> Group:
        title = Text.assemble(
            f"run {run.run_id} · {run.workflow_id} v{run.version} · ",
            (run.status.value, status_style(run.status)),
            f" · {_elapsed(run):.1f}s",
        )
        table = Table(box=None, header_style="bold", pad_edge=False)
        for header in ("TASK", "STATUS", "ATTEMPTS", "DETAIL"):
            table.add_column(header, overflow="fold")
        for task in tasks:
            table.add_row(
                task.task_key,
                Text(task.status.value, style=status_style(task.status)),
                f"{task.attempt_count}/{task.max_attempts}",
                _detail(task),
            )
        return Group(title, table, Text(task_counts_text(run), style="dim"))


class _Lines(ProgressDisplay):
    """One plain line per change of the run's or a task's status or attempt count."""

    def __init__(self, out: Output) -> None:
        super().__init__(out)
        self._run_status: str | None = None
        self._tasks: dict[str, tuple[str, int]] = {}

    def _line(self, text: str) -> None:
        self.out.echo(f"{datetime.now().astimezone():%H:%M:%S} {text}")

    def update(self, run: Run, tasks: Sequence[TaskRun]) -> None:
        if run.status.value != self._run_status and not run.is_terminal:
            self._line(f"run {run.run_id} {run.status.value}")
        self._run_status = run.status.value
        for task in tasks:
            state = (task.status.value, task.attempt_count)
            before = self._tasks.get(task.task_key)
            self._tasks[task.task_key] = state
            if state == before or (before is None and task.status is TaskStatus.PENDING):
                continue
            detail = _detail(task)
            self._line(
                f"task {task.task_key} {task.status.value} "
                f"attempt {task.attempt_count}/{task.max_attempts}"
                + (f" {detail}" if detail else "")
            )

    def finish(self, run: Run) -> None:
        self._line(f"run {run.run_id} {run.status.value} in {_elapsed(run):.1f}s")


class _FinalJson(ProgressDisplay):
    """Nothing while the run goes on; the final run as a JSON object."""

    def update(self, run: Run, tasks: Sequence[TaskRun]) -> None:
        return None

    def finish(self, run: Run) -> None:
        self.out.json(run.model_dump(mode="json"))


class _Nothing(ProgressDisplay):
    """Shows nothing."""

    def update(self, run: Run, tasks: Sequence[TaskRun]) -> None:
        return None

    def finish(self, run: Run) -> None:
        return None
