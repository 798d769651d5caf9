"""The event loop the service runs on: uvloop (libuv's) where it is installed, ADR 0016.

The service is one event loop shared by HTTP, execution and every database round trip; the
standard loop's selector and handle bookkeeping were a quarter of its CPU under load. uvloop
implements the same asyncio API in C, so nothing else changes: anyio, psycopg and uvicorn run
on it as they are.

:func:`serve` runs a service process's main: it first moves what start-up built (modules,
classes, functions, the wiring: about 140,000 objects) into the collector's permanent
generation with :func:`gc.freeze`, so that a full collection no longer walks them every time
(ADR 0016), and makes the young generation's threshold :data:`YOUNG_THRESHOLD`.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["YOUNG_THRESHOLD", "run", "serve"]

T = TypeVar("T")

YOUNG_THRESHOLD = 10_000
"""Objects allocated (net of those freed) before a young collection; CPython's default is 700.

Under load the service kept 700 new objects alive at once several times a run, and the young
and middle collections this set off took about 0.2 ms of CPU a run (8 %; a ``gc.callbacks``
timer, 8 clients creating runs). At 10,000 they take about 0.02 ms. A run leaves no cyclic
garbage (ADR 0016), so what waits longer for a collection is at most this many objects.
"""


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a new event loop (uvloop's if installed): ``asyncio.run``."""
    try:
        import uvloop  # noqa: PLC0415 - optional: absent on platforms it does not support
    except ImportError:  # pragma: no cover - installed wherever the service is supported
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


def serve(main: Coroutine[Any, Any, T]) -> T:
    """Run a service process's ``main`` (as :func:`run`), after freezing start-up's objects.

    A full collection walks every tracked object; in a service most of them are start-up's and
    live as long as the process. Frozen, they are never walked again: a full collection of the
    service under load fell from 75–90 ms to 5–12 ms (ADR 0016). Objects made later are collected
    as usual. Only for a process that runs one service: frozen garbage is never collected.
    The young generation's threshold becomes :data:`YOUNG_THRESHOLD` (the older ones' stay).
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    return run(main)
