"""SIGTERM and SIGINT for :meth:`Worker.run`: handled from its first line until it returns.

An event loop's own signal handling lasts only while a task listens: before (the loop starting,
the client being made) and after (the worker stopped, the loop closing) the default action
applies, and a signal kills the process (−15, or 130 for SIGINT). A second signal sent while an
idle worker stops — a process group signalled through ``uv run`` gets it twice — met exactly that.
:class:`RunSignals` keeps Python-level handlers for the whole of ``run()`` instead and routes
each signal into the worker's loop: one that arrives before the worker serves stops it as soon as
it starts (it claims nothing); one after it stopped is only logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Iterator
from types import FrameType

__all__ = ["STOP_SIGNALS", "RunSignals"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

logger = logging.getLogger("workload.worker")

Deliver = Callable[[signal.Signals], None]


class RunSignals:
    """SIGTERM and SIGINT while :meth:`Worker.run` runs, handed to the serving worker."""

    def __init__(self) -> None:
        self._deliver: Deliver | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._early: list[signal.Signals] = []
        self._done = False

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Handle the signals inside the block (main thread); the previous handlers after it."""
        previous = {signum: signal.signal(signum, self._on_signal) for signum in STOP_SIGNALS}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    @contextlib.contextmanager
    def serving(self, deliver: Deliver) -> Iterator[None]:
        """While serving (in its loop): each signal calls ``deliver``, those before it first."""
        self._loop = asyncio.get_running_loop()
        self._deliver = deliver
        try:
            for received in self._early:
                deliver(received)
            self._early.clear()
            yield
        finally:
            self._loop = None
            self._deliver = None
            self._done = True

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        received = signal.Signals(signum)
        if self._loop is not None and self._deliver is not None:
            # The handler runs between two bytecodes of whatever the loop was doing: the stop
            # runs as the loop's next callback instead.
            self._loop.call_soon_threadsafe(self._deliver, received)
        elif self._done:
            logger.warning("%s: the worker has stopped already", received.name)
        else:
            logger.warning("%s: stopping as soon as the worker starts", received.name)
            self._early.append(received)
