"""Forwarding to PostgreSQL that a test cuts: a partition of one client from the database.

Both cuttable proxies of the suite forward through :class:`CutForwarding`: the store's own test
runs one in its event loop (``tests/store_postgres/test_store_down.py``), the fault tests one in
a thread of its own beside real processes (``tests/fault/test_standby_outage.py``). Cut, it
aborts every connection it carries and closes each new one at once (a client sees its connection
refused by the server) and counts them; restored, it forwards again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

__all__ = ["Connect", "CutForwarding"]

Connect = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]
"""Opens a connection to the server (a Unix socket or TCP)."""


class CutForwarding:
    """Forwards each accepted connection to a new one to the server, until cut."""

    def __init__(self, connect: Connect) -> None:
        self._connect = connect
        self._writers: set[asyncio.StreamWriter] = set()
        self.cut = False
        self.refused = 0
        """Connections turned away while cut."""

    def sever(self) -> None:
        """Abort every connection; turn new ones away (call it in the forwarding's loop)."""
        self.cut = True
        for writer in list(self._writers):
            writer.transport.abort()

    def restore(self) -> None:
        """Forward new connections again."""
        self.cut = False

    async def accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        """Forward one client connection (an ``asyncio.start_server`` callback) until it ends."""
        if self.cut:
            self.refused += 1
            client_w.transport.abort()
            return
        try:
            server_r, server_w = await self._connect()
        except OSError:
            client_w.transport.abort()
            return
        pair = {client_w, server_w}
        self._writers |= pair
        try:
            await asyncio.gather(_pipe(client_r, server_w), _pipe(server_r, client_w))
        finally:
            self._writers -= pair
            for writer in pair:
                writer.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.transport.abort()  # either direction ending ends the connection
