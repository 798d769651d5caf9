"""Finding the user's objects that ``MODULE[:ATTRIBUTE]`` names (``worker``, ``workflows apply``).

The module is imported from the current directory too, as ``python -m`` would; an attribute may
be dotted (``pipelines:etl.daily``). What went wrong is a :class:`UsageError` (exit 2) that names
the module, never a traceback, except where the caller asks for the import's own error (the
worker command shows where a module's own missing import is).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import traceback
from types import ModuleType

from workload_cli._session import UsageError

__all__ = ["import_target", "resolve", "split_target"]


def split_target(target: str) -> tuple[str, str]:
    """``(module, attribute)`` of ``MODULE[:ATTRIBUTE]`` (the attribute may be empty).

    Raises:
        UsageError: no module is named.
    """
    module_name, _, attribute = target.partition(":")
    if not module_name:
        raise UsageError(f"{target!r} names no module (expected MODULE:ATTRIBUTE)")
    return module_name, attribute


def import_target(module_name: str, *, keep_import_errors: bool = False) -> ModuleType:
    """Import the user's module (from the current directory too), its prints on stderr.

    Args:
        module_name: A dotted module name.
        keep_import_errors: Let an error raised while the module imports propagate as it is
            (a traceback shows where); by default it becomes a :class:`UsageError` with its
            message and place.

    Raises:
        UsageError: there is no such module (or, by default, it failed to import).
    """
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # the user's module, like `python -m`
    try:
        # Standard output is the command's data (JSON with -o json): a module that prints as it
        # loads writes on standard error instead.
        with contextlib.redirect_stdout(sys.stderr):
            return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and _names(module_name, exc.name):
            raise UsageError(f"no module named {module_name!r} (from {os.getcwd()})") from None
        if keep_import_errors:
            raise  # the module exists but imports something missing: show where
        raise UsageError(f"module {module_name!r} does not import: {_why(exc)}") from None
    except Exception as exc:
        if keep_import_errors:
            raise
        raise UsageError(f"module {module_name!r} does not import: {_why(exc)}") from None


def resolve(module: ModuleType, module_name: str, attribute: str) -> object:
    """The object a (dotted) attribute names in the module.

    Raises:
        UsageError: the module has no such attribute.
    """
    found: object = module
    for part in attribute.split("."):
        if not part or not hasattr(found, part):
            raise UsageError(f"module {module_name!r} has no attribute {attribute!r}")
        found = getattr(found, part)
    return found


def _names(module_name: str, missing: str) -> bool:
    """Whether the missing module is the one asked for (or a package on its way)."""
    return module_name == missing or module_name.startswith(f"{missing}.")


def _why(exc: BaseException) -> str:
    """``Type: message`` of an import's error, and where in the user's code it was raised."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError) and exc.filename:
        return text  # its message names the file and the line already
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")]
    if frames:
        text += f" ({frames[-1].filename}, line {frames[-1].lineno})"
    return text
