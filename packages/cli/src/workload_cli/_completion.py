"""``workload completion SHELL``: print the shell completion script.

The one completion mechanism (SPEC §8): the root command has no ``--install-completion`` /
``--show-completion`` (typer's ``add_completion`` is off), so typer's completion classes, which
answer the script's ``_WORKLOAD_COMPLETE=complete_<shell>`` calls, are registered here instead.
"""

from __future__ import annotations

import enum
from typing import Annotated

import typer
from typer._completion_classes import completion_init
from typer._completion_shared import get_completion_script

__all__ = ["Shell", "completion"]

PROG_NAME = "workload"
COMPLETE_VAR = "_WORKLOAD_COMPLETE"

completion_init()


class Shell(enum.StrEnum):
    """Shells with a completion script."""

    BASH = "bash"
    ZSH = "zsh"
    FISH = "fish"


def completion(
    shell: Annotated[Shell, typer.Argument(help="bash, zsh or fish.", case_sensitive=False)],
) -> None:
    """Print the completion script of a shell.

    bash: source <(workload completion bash) · zsh: workload completion zsh >
    "${fpath[1]}/_workload" · fish: workload completion fish >
    ~/.config/fish/completions/workload.fish
    """
    script = get_completion_script(
        prog_name=PROG_NAME, complete_var=COMPLETE_VAR, shell=shell.value
    )
    typer.echo(script)
