"""A loopback TCP proxy in front of PostgreSQL that can lose the answer to a run's COMMIT.

The fault tests run PostgreSQL on a Unix socket. :class:`PgProxy` listens on an ephemeral port of
127.0.0.1, connects every client it accepts to that socket, and forwards bytes both ways while
reading the wire protocol (PostgreSQL "Frontend/Backend Protocol", v3) on the way:

- from the client, the untyped start-up packet, then typed messages (a type byte, an int32
  length that counts itself, the body). ``Parse`` names a statement's text, ``Bind`` executes a
  named (or the unnamed) statement, ``Query`` is the simple protocol. That is all psycopg 3
  sends: ``BEGIN``/``COMMIT`` as simple queries, statements through the extended protocol
  (``Parse`` then ``Bind``; a statement run five times is prepared once and then only bound;
  ``executemany`` runs in pipeline mode, many ``Bind``/``Execute`` before one ``Sync``);
- from the server, typed messages only. The start-up, each simple ``Query`` and each ``Sync``
  are answered by exactly one ``ReadyForQuery`` (``Z``), whatever happened before it: counting
  them tells which answer belongs to which request.

:meth:`PgProxy.lose_next_run_commit` arms the fault: the next transaction, on any connection,
that executes ``INSERT INTO workflow_runs`` has its commit forwarded to the server, but the
server's answer to it is never forwarded. The commit is the ``COMMIT`` of an explicit
transaction block (``BEGIN`` … ``COMMIT``), or — for a statement sent outside one, on an
autocommit connection — the ``Sync`` after it, which ends (and commits) its implicit
transaction. When that answer has arrived in full (the transaction is committed, or refused),
the proxy closes both sides of that one connection: the client sees a connection that died
after it sent its commit. Every other connection (the coordinator lock's, the pool's others)
and every other answer pass untouched.

SSL and GSS encryption requests are refused by the proxy itself (``N``), as a server without
them does, so the proxy always reads plain text; :meth:`PgProxy.url` also asks for neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import struct
import threading
import time
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

__all__ = ["LostCommit", "PgProxy", "unix_socket_of"]

_T = TypeVar("_T")

_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104
_RUN_INSERT = re.compile(r"\binsert\s+into\s+workflow_runs\b", re.IGNORECASE)
_BEGIN = re.compile(r"^\s*(begin|start\s+transaction)\b", re.IGNORECASE)
_COMMIT = re.compile(r"^\s*(commit|end)\b", re.IGNORECASE)
_ROLLBACK = re.compile(r"^\s*(rollback|abort)\b", re.IGNORECASE)


def unix_socket_of(socket_dir: Path) -> Path:
    """The one PostgreSQL socket (``.s.PGSQL.<port>``) in ``socket_dir``."""
    found = [p for p in socket_dir.glob(".s.PGSQL.*") if p.suffix != ".lock"]
    if len(found) != 1:
        raise RuntimeError(f"expected one PostgreSQL socket in {socket_dir}, found {found}")
    return found[0]


@dataclass(frozen=True)
class LostCommit:
    """One commit whose answer the proxy withheld."""

    connection: int
    """The proxy's number of the client connection (1, 2 … in accept order)."""
    committed: bool
    """Whether the withheld answer committed: ``COMMIT`` for a block, or a statement that
    succeeded and left the connection idle for an implicit transaction (it is durable)."""
    at: float
    """``time.monotonic()`` when the answer arrived and the connection was closed."""


def _cstring(body: bytes, start: int) -> tuple[str, int]:
    end = body.index(b"\x00", start)
    return body[start:end].decode("utf-8", errors="replace"), end + 1


@dataclass
class _Connection:
    """What one proxied connection has said so far (touched by the loop's thread only)."""

    number: int
    statements: dict[str, str] = field(default_factory=dict)
    requests: int = 0
    """The start-up, simple queries and Syncs sent: how many ReadyForQuery the server owes."""
    answers: int = 0
    """ReadyForQuery forwarded or withheld so far."""
    run_inserted: bool = False
    in_block: bool = False
    """Whether the client has opened a transaction block (``BEGIN``) it has not ended."""
    lose_from: int | None = None
    """The ReadyForQuery number that ends the answer to withhold (set when the commit is seen)."""
    implicit: bool = False
    """Whether the commit to lose is an implicit transaction's (its statement's ``Sync``)."""
    commit_tag: bytes = b""
    failed: bool = False
    """Whether the withheld answer holds an ``ErrorResponse``."""


async def _read_message(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One typed message: its type byte and its whole raw bytes."""
    head = await reader.readexactly(5)
    (length,) = struct.unpack("!i", head[1:])
    return head[:1], head + await reader.readexactly(length - 4)


class PgProxy:
    """A TCP proxy on 127.0.0.1 to a PostgreSQL Unix socket, run on its own thread.

    Use it as a context manager, or call :meth:`start` and :meth:`close`.
    """

    def __init__(self, unix_socket: Path) -> None:
        self.unix_socket = unix_socket
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pg-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._numbers = itertools.count(1)
        self._guard = threading.Lock()
        self._armed = 0
        self._lost: list[LostCommit] = []
        self._executed: Counter[str] = Counter()
        self._accepted = 0
        self.port = 0

    # -- the test's side --------------------------------------------------------------------------

    def start(self) -> None:
        """Listen on an ephemeral port of 127.0.0.1."""
        self._thread.start()
        self._server = self._call(
            asyncio.start_server(self._accept, host="127.0.0.1", port=0, reuse_address=True)
        )
        self.port = self._server.sockets[0].getsockname()[1]

    def url(self, database: str, user: str = "postgres") -> str:
        """A libpq URL of ``database`` through the proxy (plain text, no encryption asked)."""
        return (
            f"postgresql://{user}@127.0.0.1:{self.port}/{database}"
            "?sslmode=disable&gssencmode=disable"
        )

    def lose_next_run_commit(self, count: int = 1) -> None:
        """Withhold the answer to the COMMIT of the next ``count`` run-creating transactions."""
        with self._guard:
            self._armed += count

    @property
    def armed(self) -> int:
        """How many run COMMITs are still to be lost."""
        with self._guard:
            return self._armed

    @property
    def lost(self) -> list[LostCommit]:
        """Every COMMIT answer withheld so far, in order."""
        with self._guard:
            return list(self._lost)

    @property
    def accepted(self) -> int:
        """How many client connections the proxy accepted."""
        with self._guard:
            return self._accepted

    def executions(self, pattern: str) -> int:
        """How many statements matching the regular expression ``pattern`` clients executed."""
        wanted = re.compile(pattern, re.IGNORECASE | re.DOTALL)
        with self._guard:
            return sum(n for text, n in self._executed.items() if wanted.search(text))

    def close(self) -> None:
        """Close every connection and the listener; stop the thread."""
        if not self._thread.is_alive():
            self._loop.close()
            return
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, work: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout=30)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    # -- the loop's side --------------------------------------------------------------------------

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        with self._guard:
            self._accepted += 1
        conn = _Connection(next(self._numbers))
        server_w: asyncio.StreamWriter | None = None
        try:
            server_r, server_w = await asyncio.open_unix_connection(str(self.unix_socket))
            async with asyncio.TaskGroup() as tg:
                upstream = tg.create_task(
                    self._client_to_server(conn, client_r, client_w, server_w)
                )
                downstream = tg.create_task(self._server_to_client(conn, server_r, client_w))
                # Either direction ending ends the connection (no half-open sessions).
                await asyncio.wait({upstream, downstream}, return_when=asyncio.FIRST_COMPLETED)
                upstream.cancel()
                downstream.cancel()
        except (OSError, asyncio.IncompleteReadError):
            pass  # the server is gone (stopped, refused): the client sees its connection close
        except asyncio.CancelledError:
            pass  # the proxy is closing (its own cancellation: nothing awaits this task)
        finally:
            for writer in (client_w, server_w):
                if writer is not None:
                    writer.close()
                    with contextlib.suppress(OSError, asyncio.CancelledError):
                        await writer.wait_closed()
            self._tasks.discard(task)

    async def _client_to_server(
        self,
        conn: _Connection,
        reader: asyncio.StreamReader,
        client_w: asyncio.StreamWriter,
        server_w: asyncio.StreamWriter,
    ) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            await self._start_up(reader, client_w, server_w)
            conn.requests = 1  # the start-up is answered by a ReadyForQuery too
            while True:
                kind, raw = await _read_message(reader)
                self._observe(conn, kind, raw[5:])
                server_w.write(raw)
                await server_w.drain()

    async def _start_up(
        self,
        reader: asyncio.StreamReader,
        client_w: asyncio.StreamWriter,
        server_w: asyncio.StreamWriter,
    ) -> None:
        """Forward the untyped start-up packet; refuse encryption requests ourselves."""
        while True:
            head = await reader.readexactly(8)
            (length, code) = struct.unpack("!ii", head)
            packet = head + await reader.readexactly(length - 8)
            if code in (_SSL_REQUEST, _GSSENC_REQUEST):
                client_w.write(b"N")
                await client_w.drain()
                continue
            server_w.write(packet)
            await server_w.drain()
            return

    def _observe(self, conn: _Connection, kind: bytes, body: bytes) -> None:
        if kind == b"P":  # Parse: statement name, query text, …
            name, at = _cstring(body, 0)
            conn.statements[name], _ = _cstring(body, at)
        elif kind == b"B":  # Bind: portal name, statement name, …
            _, at = _cstring(body, 0)
            name, _ = _cstring(body, at)
            self._executing(conn, conn.statements.get(name, ""), next_answer=conn.requests + 1)
        elif kind == b"Q":  # a simple query; its own ReadyForQuery ends its answer
            conn.requests += 1
            text, _ = _cstring(body, 0)
            self._executing(conn, text, next_answer=conn.requests)
        elif kind == b"S":  # Sync
            conn.requests += 1

    def _executing(self, conn: _Connection, text: str, *, next_answer: int) -> None:
        with self._guard:
            self._executed[text] += 1
            if _BEGIN.match(text):
                conn.in_block = True
            elif _RUN_INSERT.search(text):
                if conn.in_block:
                    conn.run_inserted = True
                elif self._armed > 0 and conn.lose_from is None:
                    # Outside a block the statement is its own transaction, committed when the
                    # server reaches the next Sync (or, as a simple query, at its own end).
                    self._armed -= 1
                    conn.lose_from = next_answer
                    conn.implicit = True
            elif _COMMIT.match(text):
                if conn.run_inserted and self._armed > 0 and conn.lose_from is None:
                    self._armed -= 1
                    conn.lose_from = next_answer
                conn.run_inserted = False
                conn.in_block = False
            elif _ROLLBACK.match(text):
                conn.run_inserted = False
                conn.in_block = False

    async def _server_to_client(
        self, conn: _Connection, reader: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                kind, raw = await _read_message(reader)
                # Answers before the one to lose pass; the COMMIT's (its whole segment) does not.
                withheld = conn.lose_from is not None and conn.answers >= conn.lose_from - 1
                if withheld and kind == b"C":
                    conn.commit_tag = raw[5:].rstrip(b"\x00")
                if withheld and kind == b"E":
                    conn.failed = True
                if kind == b"Z":
                    conn.answers += 1
                if not withheld:
                    client_w.write(raw)
                    await client_w.drain()
                elif kind == b"Z" and conn.answers == conn.lose_from:
                    if conn.implicit:  # ReadyForQuery's status: I (idle) after a commit
                        committed = not conn.failed and raw[5:6] == b"I"
                    else:
                        committed = conn.commit_tag == b"COMMIT"
                    lost = LostCommit(conn.number, committed, time.monotonic())
                    with self._guard:
                        self._lost.append(lost)
                    return  # the caller closes both sides: the answer is gone
