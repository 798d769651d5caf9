"""The one way tests wait: poll a condition until it holds, with a deadline (STYLE 16).

``wait_until`` for plain (blocking) tests, ``await_until`` for async ones (``anyio.fail_after``).
Both return the condition's first truthy value and fail with a message naming what was awaited
— never a bare sleep standing in for an assertion.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

__all__ = ["await_until", "wait_until"]

T = TypeVar("T")
Message = str | Callable[[], str]


def _text(message: Message) -> str:
    return message() if callable(message) else message


def wait_until(
    check: Callable[[], T | None],
    *,
    timeout: float = 20,
    interval: float = 0.02,
    message: Message = "the condition did not hold",
) -> T:
    """Call ``check`` until it returns a truthy value; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"after {timeout:g} s: {_text(message)}")
        time.sleep(interval)


async def await_until(
    check: Callable[[], Awaitable[T | None]],
    *,
    within: float = 20,
    interval: float = 0.01,
    message: Message = "the condition did not hold",
) -> T:
    """Await ``check`` until it returns a truthy value; fail after ``within`` seconds."""
    try:
        with anyio.fail_after(within):
            while True:
                value = await check()
                if value:
                    return value
                await anyio.sleep(interval)
    except TimeoutError:
        raise AssertionError(f"after {within:g} s: {_text(message)}") from None
