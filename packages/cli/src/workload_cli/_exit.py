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

__all__ = ["EXIT_CODES_HELP", "ExitCode", "exit_code_for_error", "exit_code_for_run"]


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


EXIT_CODES_HELP = (
    "Exit codes: 0 ok (watched run succeeded) · 1 unexpected error · 2 usage · "
    "6 server unreachable · 7 request rejected (4xx) · 8 unauthorized (401/403) · "
    "9 server error (5xx) · 10 run failed · 11 run canceled · 12 wait timed out · "
    "13 declined at the prompt · 130 interrupted. "
    "serve/migrate: 3 lock held (or modes mixed) · 4 schema not migrated · 5 fail-stop."
)


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
