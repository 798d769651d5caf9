"""Reaching the worker's event loop from any thread (sync handlers, signal-free stops)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

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
        run again, or be closed). ``func`` runs with anyio's backend set, as ``call``'s does.
        """
        if threading.get_ident() == self._thread:
            func()
            return
        token = self._token
        # RuntimeError: the loop is closed (anyio's RunFinishedError is one).
        with contextlib.suppress(RuntimeError):
            token.backend_class.run_sync_soon(func, (), token.native_token)
