"""A process that abandons bounded operations, as a lock check or a lease renewal does.

``python -m tests.fault.abandoning URL COUNT``: on uvloop (the service's event loop), opens a
dedicated session (:class:`~workload_store_postgres._session.DedicatedSession`) ``COUNT``
times and runs a statement on it that outlasts its bound (``pg_sleep``), so that the operation
is abandoned; a busy task beside it makes due timers fire together, as on a loaded machine.
Prints ``abandoned N`` at the end. Before the fix, the process died with SIGABRT: libuv aborts
when it applies a watch to a descriptor closed behind its back, and abandoning closed the
connection under the running operation.
"""

from __future__ import annotations

import asyncio
import sys
import time

import uvloop

from workload_store_postgres._session import DedicatedSession

BUSY_SECONDS = 0.03
"""How long the busy task holds the event loop at each step."""


async def _busy(stop: asyncio.Event) -> None:
    while not stop.is_set():
        time.sleep(BUSY_SECONDS)  # noqa: ASYNC251 - blocks the loop on purpose: timers pile up
        await asyncio.sleep(0)


async def _abandon(url: str, count: int) -> int:
    session = DedicatedSession(url, application_name="abandoning", connect_timeout=5)
    stop = asyncio.Event()
    busy = asyncio.create_task(_busy(stop))
    abandoned = 0
    try:
        for i in range(count):
            conn = await session.connect(30)
            try:
                # Bounds of 0.1-0.4 s: psycopg wakes its wait every 0.1 s, so the bound often
                # expires in the event loop iteration where the wait re-registers its socket.
                await session.bounded(
                    conn, lambda c: c.execute("SELECT pg_sleep(5)"), 0.1 * (1 + i % 4)
                )
            except TimeoutError:
                abandoned += 1
            await session.close(conn)
        await session.settle()
    finally:
        stop.set()
        await busy
    return abandoned


def main() -> None:
    url, count = sys.argv[1], int(sys.argv[2])
    abandoned = uvloop.run(_abandon(url, count))
    print(f"abandoned {abandoned}", flush=True)


if __name__ == "__main__":
    main()
