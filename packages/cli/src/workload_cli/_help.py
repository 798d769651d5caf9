"""The help screens' one repair: no type beside a flag (a flag takes no value: no `<bool>` shown).

typer 0.29 shows ``<bool>`` in the type column of every flag, ``--help`` included, as if it
took a value. :class:`RootGroup`, the class of the ``workload`` group, clears the type of every
flag of a command before typer renders or runs it: each command is reached through the root
(its help too), so one class covers them all. Flags that take no value are the only ones
changed; ``tests/cli/test_help_text.py`` checks every command's help.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperGroup, TyperOption

__all__ = ["RootGroup"]


def _untyped(command: Any, ctx: Any) -> None:
    """Give every flag of ``command`` and of its subcommands an empty type column."""
    options = [*command.params, command.get_help_option(ctx)]
    for option in options:
        if isinstance(option, TyperOption) and option.is_flag and option.metavar is None:
            option.metavar = ""  # typer shows a metavar, when there is one, in place of the type
    for sub in getattr(command, "commands", {}).values():
        _untyped(sub, ctx)


class RootGroup(TyperGroup):
    """The ``workload`` group: its commands' flags show no type."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """Render the root's help, its flags untyped."""
        _untyped(self, ctx)
        super().format_help(ctx, formatter)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """A command of the root, with every flag of its tree untyped."""
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _untyped(command, ctx)
        return command
