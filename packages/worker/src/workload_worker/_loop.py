"""Reaching the worker's event loop from any thread (sync handlers, signal-free stops)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import anyio.from_thread
import anyio.lowlevel

__all__ = ["LoopCaller"]


class LoopCaller:
    """Calls a function in the event loop it was created in, from that loop or any thread.

    Create it inside the loop. A call made after the loop has closed is dropped: whoever calls
    late (a sync handler still running after its attempt was abandoned) has nobody to tell.
    """

    def __init__(self) -> None:
        self._token = anyio.lowlevel.current_token()
        self._thread = threading.get_ident()

    def call(self, func: Callable[[], None]) -> None:
        """Run ``func`` in the loop: at once from the loop's thread, else wait for the loop."""
        if threading.get_ident() == self._thread:
            func()
            return
        # RuntimeError: the loop is gone (the worker stopped), nobody is left to notify.
        with contextlib.suppress(RuntimeError):
            anyio.from_thread.run_sync(func, token=self._token)

    def call_soon(self, func: Callable[[], None]) -> None:
        """Have the loop run ``func`` soon, without waiting for it (from any thread).

        For a wake-up: a thread must not wait on a loop its application has stopped (it may
        run again, or be closed). ``func`` must need nothing of anyio's context (setting an
        ``anyio.Event`` does not): it is handed to the loop itself — asyncio's
        ``call_soon_threadsafe``, trio's ``run_sync_soon`` — as anyio has no public call for it.
        """
        if threading.get_ident() == self._thread:
            func()
            return
        native: Any = self._token.native_token  # an asyncio loop, or a trio token
        soon = getattr(native, "call_soon_threadsafe", None) or native.run_sync_soon
        # RuntimeError: the loop is closed (asyncio's "Event loop is closed", trio's
        # RunFinishedError): nobody is left to wake.
        with contextlib.suppress(RuntimeError):
            soon(func)
