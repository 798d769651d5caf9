"""The event loop the service runs on: uvloop (libuv's) where it is installed, ADR 0016.

The service is one event loop shared by HTTP, execution and every database round trip; the
standard loop's selector and handle bookkeeping were a quarter of its CPU under load. uvloop
implements the same asyncio API in C, so nothing else changes: anyio, psycopg and uvicorn run
on it as they are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run"]

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a new event loop (uvloop's if installed): ``asyncio.run``."""
    try:
        import uvloop  # noqa: PLC0415 - optional: absent on platforms it does not support
    except ImportError:  # pragma: no cover - installed wherever the service is supported
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
