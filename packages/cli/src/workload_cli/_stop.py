"""SIGTERM and SIGINT over a service command's whole life: a stop, exit 0, never death by signal.

``workload serve`` and ``workload worker`` install :class:`StopSignals` as their first act, before
their imports, and keep it until the process exits, so no signal ever meets the default action
(killed by the signal: −15, or 130 for SIGINT). What the first signal does depends on the phase
the process is in:

- a synchronous step of start-up (imports, configuration, loading the user's module):
  :class:`Interrupted` is raised where the process is, and the command exits 0 once what it took
  is released;
- a step that must finish before it can be undone (the embedded PostgreSQL starting:
  :meth:`StopSignals.deferred`): the stop is kept and raised when the step ends;
- an asynchronous phase (:meth:`StopSignals.routed`): the phase's own stop is called in its
  event loop (the coordinator interrupts its start-up or stops serving, and logs a repeat);
- the clean-up after it (:meth:`StopSignals.closing`): nothing more to stop.

A repeated signal (a second Ctrl-C, or the same one twice when the signal goes to a process
group and ``uv run`` forwards it too) is logged and changes nothing: the stop under way is bounded
(the shutdown grace period); SIGKILL remains for a hard stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

__all__ = ["STOP_SIGNALS", "Interrupted", "StopSignals", "own_the_process"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_process: list[bool] = []


def own_the_process() -> None:
    """The ``workload`` script runs: once a command is done, stop signals are ignored.

    Put back at the command's end, the default action would kill the process if a signal came
    while it exits. An in-process caller (a test's CliRunner) gets its own handlers back.
    """
    _process.append(True)


class Interrupted(BaseException):
    """A stop signal arrived during a synchronous step of start-up.

    A BaseException, as KeyboardInterrupt is, so that no ``except Exception`` swallows it.
    """

    def __init__(self, signum: signal.Signals) -> None:
        super().__init__(f"stopped on {signum.name}")
        self.signum = signum


class StopSignals:
    """Receives SIGTERM and SIGINT for a command, from its first line to its exit."""

    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self.received: signal.Signals | None = None
        """The first stop signal, once one arrived."""
        self._stop: Callable[[signal.Signals], None] | None = None
        self._deferring = False
        self._closing = False

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Handle SIGTERM and SIGINT inside the block (main thread only).

        The previous handlers come back after it; when the ``workload`` script owns the process
        (:func:`own_the_process`), the signals are ignored instead while it exits.
        """
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach the main thread only; its caller handles them
            return
        previous = {signum: signal.signal(signum, self._on_signal) for signum in STOP_SIGNALS}
        try:
            yield
        finally:
            self.closing()
            for signum, handler in previous.items():
                # The process exits next, and the interpreter's finalization puts the default
                # action back in place of a Python handler (not of SIG_IGN): a late repeat
                # would kill it after all.
                signal.signal(signum, signal.SIG_IGN if _process else handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        received = signal.Signals(signum)
        first = self.received is None and not self._closing
        if first:
            self.received = received
        if self._stop is not None:
            self._stop(received)  # the phase tells a repeat from the first
        elif not first:
            first_name = (self.received or received).name
            self._log.warning("%s again: already stopping on %s", received.name, first_name)
        elif not self._deferring:
            raise Interrupted(received)

    def check(self) -> None:
        """Raise :class:`Interrupted` if a stop signal arrived (at the end of a deferred step)."""
        if self.received is not None and not self._closing:
            raise Interrupted(self.received)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """A step that a signal must not cut in half: a stop is raised when it ends.

        The stop signals are blocked during the step (in the main thread), and the programs it
        runs inherit that: a signal sent to the whole process group — Ctrl-C in a terminal, a
        supervisor stopping a control group — waits for the step's end instead of killing its
        ``initdb`` or ``pg_ctl`` half-way (a data directory half made would refuse every later
        start). Unblocked, it is handled as any other.
        """
        main = threading.current_thread() is threading.main_thread()
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS) if main else None
        self._deferring = True
        try:
            yield
        finally:
            if previous is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # a pending one runs now
            self._deferring = False
        self.check()

    @contextlib.contextmanager
    def routed(self, stop: Callable[[signal.Signals], None]) -> Iterator[None]:
        """Inside a running event loop: each signal calls ``stop(signal)`` in that loop.

        ``stop`` gets every signal, the first and any repeat. It runs as one of the loop's
        callbacks, so never before the code that enters this block first awaits.
        """
        loop = asyncio.get_running_loop()

        def in_loop(received: signal.Signals) -> None:
            # The handler runs between two bytecodes of whatever the loop was doing: the stop
            # runs as the loop's next callback instead.
            loop.call_soon_threadsafe(stop, received)

        self._stop = in_loop
        if self.received is not None and not self._closing:
            # A signal came between the previous phase's end and this one: this phase stops.
            in_loop(self.received)
        try:
            yield
        finally:
            self._stop = None

    def closing(self) -> None:
        """The command is cleaning up: a signal from now on is logged, and stops nothing."""
        self._closing = True
