"""Reaching the worker's event loop from any thread (sync handlers, signal-free stops)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable

import anyio.from_thread
import anyio.lowlevel

__all__ = ["LoopCaller"]


class LoopCaller:
    """Calls a function in the event loop it was created in, from that loop or any thread.

    Create it inside the loop. From another thread the call is handed to the loop and not
    waited for: a sync handler still running after its attempt was abandoned may call after
    the loop stopped, and must neither wait for it for ever (its thread would never end, nor
    the process) nor be told anything; a call made after the loop has closed is dropped.
    """

    def __init__(self) -> None:
        self._token = anyio.lowlevel.current_token()
        self._thread = threading.get_ident()
        try:
            self._asyncio: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # another anyio backend (trio)
            self._asyncio = None

    def call(self, func: Callable[[], None]) -> None:
        """Run ``func`` in the loop: at once from the loop's thread, else soon, unwaited."""
        if threading.get_ident() == self._thread:
            func()
            return
        # RuntimeError: the loop is gone (the worker stopped), nobody is left to notify.
        with contextlib.suppress(RuntimeError):
            if self._asyncio is not None:
                self._asyncio.call_soon_threadsafe(func)
            else:
                anyio.from_thread.run_sync(func, token=self._token)
