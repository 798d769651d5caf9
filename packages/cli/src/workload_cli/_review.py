"""Showing what a person decides on, and asking them (``approvals approve``, ``drafts approve``).

A decision is sent only after a yes: ``--yes`` on the command line, or ``y`` typed at a prompt.
The prompt needs a person at a terminal, so with neither a terminal on standard input nor
``--yes`` the command refuses (exit 2) rather than decide for nobody. The prompt and what it is
about go to standard error; standard output keeps only the decided resource.

What is shown was written by a model (a tool call's arguments, a draft's definition), so it is
shown unambiguously: JSON with every non-ASCII character escaped (no control sequence reaches
the terminal, no look-alike or right-to-left character hides what the digest covers), and names
quoted unless they are plain visible ASCII.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, NoReturn

import typer
from rich.text import Text

from workload_cli._exit import ExitCode, exit_code_for_error
from workload_cli._output import Output, visible
from workload_cli._session import UsageError
from workload_sdk import WorkloadError

__all__ = ["confirm", "exact_json", "not_as_shown", "shown"]

_VISIBLE_ASCII = re.compile(r"[\x21-\x7e]+")


def shown(value: object) -> str:
    """A name (a tool, a task key, an action) as is if plain visible ASCII, else JSON-quoted."""
    text = str(value)
    return text if _VISIBLE_ASCII.fullmatch(text) else json.dumps(text)


def exact_json(value: Any) -> list[str]:
    """A JSON value as indented lines, every non-ASCII character escaped."""
    return json.dumps(value, indent=2, ensure_ascii=True).splitlines()


def confirm(out: Output, question: str, *, yes: bool) -> None:
    """Go on only if the person said yes (``--yes``, or ``y`` / ``yes`` at the prompt).

    Raises:
        UsageError: standard input is not a terminal and ``--yes`` was not given (exit 2).
        typer.Exit: any other answer, or none (end of input): exit 13, nothing sent.
    """
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(
            "nobody can confirm: standard input is not a terminal; review the above and pass "
            "--yes to decide without a prompt"
        )
    out.stderr.print(Text(f"{visible(question)} [y/N] ", style="bold"), end="", soft_wrap=True)
    answer = sys.stdin.readline()
    if answer.strip().lower() not in {"y", "yes"}:
        out.say("declined: nothing was sent")
        raise typer.Exit(ExitCode.DECLINED)


def not_as_shown(out: Output, exc: WorkloadError, outcome: str, what: str) -> NoReturn:
    """The server refused: its ``what`` is no longer what was shown (409, exit 7).

    Args:
        out: Where to say it.
        exc: The refusal (``approval_changed``, ``draft_changed``).
        outcome: What did not happen (``decided``, ``created``).
        what: What changed (``approval``, ``draft``).
    """
    out.problem(exc)
    out.say(
        f"nothing was {outcome}: the {what} is not what was shown above; run the command again "
        "to review it"
    )
    raise typer.Exit(exit_code_for_error(exc)) from None
