"""Task groups without exception groups where only one error can happen."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["single_errors"]


@asynccontextmanager
async def single_errors(alike: type[BaseException] | None = None) -> AsyncIterator[None]:
    """Let a lone exception out of a task group as itself, not inside a group.

    For task groups whose other tasks never raise (they watch, or fail-stop on their own): a
    group of one is the body's exception (a domain error, a test's assertion), which callers
    handle by type. With ``alike``, a group whose exceptions are all ``alike`` is its first:
    tasks that fail together for one cause (the connection they share is gone) say it once.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1 or (
            alike is not None and all(isinstance(e, alike) for e in group.exceptions)
        ):
            raise group.exceptions[0] from None
        raise
