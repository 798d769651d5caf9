"""Exit codes of the ``workload`` command: one meaning per number, across every command.

0, 2 and 3-5 are shared with ``serve`` / ``migrate`` (SPEC §7); the client commands add 6-13.
"""

from __future__ import annotations

import enum

from workload_sdk import (
    APIConnectionError,
    APIStatusError,
    DraftWaitTimeout,
    Forbidden,
    RunStatus,
    Unauthenticated,
    WaitTimeout,
    WorkloadError,
)

__all__ = [
    "CLIENT_CODES",
    "EXIT_CODES_HELP",
    "WATCHED_RUN",
    "ExitCode",
    "exit_code_for_error",
    "exit_code_for_run",
    "exit_codes_help",
]


class ExitCode(enum.IntEnum):
    """Every exit code the client commands use."""

    OK = 0
    """Done; for ``watch``, ``runs start --wait``, ``demo`` and ``run-local``: run succeeded."""
    ERROR = 1
    """An unexpected error (a bug: please report it)."""
    USAGE = 2
    """Bad usage: an unknown option, an unreadable file, a FILE or --input that is not JSON, a
    MODULE that does not import or an ATTRIBUTE that is not what the command takes; a decision
    to confirm with neither a terminal nor ``--yes``."""
    UNREACHABLE = 6
    """No answer from the server (connection refused, DNS, timeout)."""
    REJECTED = 7
    """The server rejected the request (4xx other than 401/403; invalid definition, not found,
    conflict, precondition failed …). ``run-local`` uses it for an invalid definition too."""
    UNAUTHORIZED = 8
    """401 (no or unknown token) or 403 (a viewer token writing)."""
    SERVER_ERROR = 9
    """5xx (including 503 unavailable), or a response that is not the documented resource."""
    RUN_FAILED = 10
    """The watched run finished ``failed``."""
    RUN_CANCELED = 11
    """The watched run finished ``canceled``."""
    WAIT_TIMEOUT = 12
    """``--timeout`` passed before the run finished (the run goes on), or before the draft was
    written (its generation goes on)."""
    DECLINED = 13
    """The answer at a confirmation prompt was not yes: the decision was not sent."""
    INTERRUPTED = 130
    """Ctrl-C (the run goes on; ``workload runs cancel`` cancels it)."""


_MEANINGS = {
    ExitCode.OK: "ok",
    ExitCode.ERROR: "unexpected error",
    ExitCode.USAGE: "usage",
    ExitCode.UNREACHABLE: "server unreachable",
    ExitCode.REJECTED: "request rejected (4xx)",
    ExitCode.UNAUTHORIZED: "unauthorized (401/403)",
    ExitCode.SERVER_ERROR: "server error (5xx)",
    ExitCode.RUN_FAILED: "run failed",
    ExitCode.RUN_CANCELED: "run canceled",
    ExitCode.WAIT_TIMEOUT: "wait timed out",
    ExitCode.DECLINED: "declined at the prompt",
    ExitCode.INTERRUPTED: "interrupted",
}
CLIENT_CODES = (
    ExitCode.OK,
    ExitCode.ERROR,
    ExitCode.USAGE,
    ExitCode.UNREACHABLE,
    ExitCode.REJECTED,
    ExitCode.UNAUTHORIZED,
    ExitCode.SERVER_ERROR,
    ExitCode.INTERRUPTED,
)
"""What any command that talks to the server may exit with."""
WATCHED_RUN = (ExitCode.RUN_FAILED, ExitCode.RUN_CANCELED)
"""What a command that follows a run to its end adds: how the run ended."""


def exit_codes_help(*codes: ExitCode, ok: str = "ok") -> str:
    """A command's help footer: only the exit codes that command can end with, by number."""
    meanings = {**_MEANINGS, ExitCode.OK: ok}
    return "Exit codes: " + " · ".join(f"{int(c)} {meanings[c]}" for c in sorted(set(codes))) + "."


EXIT_CODES_HELP = (
    exit_codes_help(*ExitCode, ok="ok (watched run succeeded)")
    + " serve/migrate: 3 lock held (or modes mixed) · 4 schema not migrated · 5 fail-stop."
)
"""The top-level help's footer: every code of every command."""


def exit_code_for_error(error: WorkloadError) -> ExitCode:
    """The exit code of an SDK error."""
    if isinstance(error, WaitTimeout | DraftWaitTimeout):
        return ExitCode.WAIT_TIMEOUT
    if isinstance(error, APIConnectionError):
        return ExitCode.UNREACHABLE
    if isinstance(error, Unauthenticated | Forbidden):
        return ExitCode.UNAUTHORIZED
    if isinstance(error, APIStatusError) and error.status is not None and error.status < 500:
        return ExitCode.REJECTED
    return ExitCode.SERVER_ERROR


def exit_code_for_run(status: RunStatus) -> ExitCode:
    """The exit code of a terminal run status (0, 10 or 11)."""
    if status is RunStatus.SUCCEEDED:
        return ExitCode.OK
    if status is RunStatus.CANCELED:
        return ExitCode.RUN_CANCELED
    return ExitCode.RUN_FAILED
