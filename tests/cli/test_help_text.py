"""Every command's ``--help`` (SPEC §8): flags show no ``<bool>``-like metavar."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer

from tests.cli.conftest import Cli
from workload_cli.main import app

# What click or typer print for a boolean option that takes a value instead of being a flag.
BOOLEAN_METAVAR = re.compile(r"BOOLEAN|<bool>|\[true\|false\]|TRUE\|FALSE", re.IGNORECASE)


def command_paths() -> list[tuple[str, ...]]:
    """Every command and group of ``workload``, as the arguments that reach it."""
    found: list[tuple[str, ...]] = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        found.append(path)
        for name, sub in sorted(getattr(command, "commands", {}).items()):  # a group's
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


PATHS = command_paths()


def test_every_command_is_walked() -> None:
    assert ("runs", "rerun") in PATHS
    assert ("runs", "list") in PATHS
    assert len(PATHS) > 40


@pytest.mark.parametrize("path", PATHS, ids=[" ".join(p) or "workload" for p in PATHS])
def test_no_flag_shows_a_boolean_metavar(offline_cli: Cli, path: tuple[str, ...]) -> None:
    result = offline_cli(*path, "--help", env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert not BOOLEAN_METAVAR.search(result.stdout), result.stdout
