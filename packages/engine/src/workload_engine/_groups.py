"""Exception groups from task groups, reduced to the one error a caller must handle."""

from __future__ import annotations

__all__ = ["first_error"]


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first real error of a group, preferring errors over cancellations."""
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        error = stack.pop(0)
        if isinstance(error, BaseExceptionGroup):
            stack[:0] = error.exceptions
        else:
            leaves.append(error)
    return next((e for e in leaves if isinstance(e, Exception)), leaves[0])
