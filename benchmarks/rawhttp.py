"""A minimal blocking HTTP/1.1 client on one kept-alive socket: a load generator's floor.

httpx's async client costs 0.7-1 ms of a request's round trip on this project's two-core
machine (a serial ``GET /livez`` takes 0.9-1.3 ms through ``httpx.AsyncClient`` against
0.2-0.3 ms through this client), which a serial latency read by httpx includes. This client does
nothing but write a request and read its answer, delimited by ``Content-Length`` (the service
never answers these requests chunked or delimited by closing), so what it measures is the
service's own latency. Loopback only; every read is bounded by the socket's timeout; an answer
it cannot read is an error, after which the connection is closed.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from types import TracebackType

_HEAD_END = b"\r\n\r\n"
_MAX_HEAD = 64 * 1024
_NO_BODY = frozenset({204, 304})


class RawHttp:
    """One connection to ``host:port``; :meth:`request` sends one request and reads its answer."""

    def __init__(
        self, host: str, port: int, headers: Mapping[str, str], *, timeout: float = 30.0
    ) -> None:
        if host not in ("127.0.0.1", "localhost"):
            raise ValueError(f"a loopback host only (127.0.0.1 or localhost), not {host!r}")
        if any(name.lower() in ("host", "content-length") for name in headers):
            raise ValueError("Host and Content-Length are this client's to send")
        self._sock = socket.create_connection((host, port), timeout=timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        lines = {"Host": f"{host}:{port}", **headers}
        self._common = "".join(f"{k}: {v}\r\n" for k, v in lines.items())
        self._pending = b""
        self._broken = False

    def request(
        self, method: str, path: str, headers: Mapping[str, str] | None = None, body: bytes = b""
    ) -> tuple[int, bytes]:
        """Send one request; return the final answer's status code and its body."""
        if self._broken:
            raise ConnectionError("an earlier answer could not be read: the connection is closed")
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        length = f"Content-Length: {len(body)}\r\n" if body or method != "GET" else ""
        head = f"{method} {path} HTTP/1.1\r\n{self._common}{extra}{length}\r\n"
        try:
            self._sock.sendall(head.encode("latin-1") + body)
            status, answer = self._answer(method)
            while 100 <= status < 200:  # an interim answer: the final one follows
                status, answer = self._answer(method)
        except BaseException:
            self._broken = True
            self.close()
            raise
        return status, answer

    def timed(
        self, method: str, path: str, headers: Mapping[str, str] | None = None, body: bytes = b""
    ) -> tuple[float, int, bytes]:
        """:meth:`request`, with the seconds from the first byte sent to the last byte read."""
        start = time.perf_counter()
        status, answer = self.request(method, path, headers, body)
        return time.perf_counter() - start, status, answer

    def _answer(self, method: str) -> tuple[int, bytes]:
        buffer = self._pending
        while _HEAD_END not in buffer:
            if len(buffer) > _MAX_HEAD:
                raise ValueError("the answer's head is too long")
            buffer += self._receive()
        head, _, rest = buffer.partition(_HEAD_END)
        lines = head.split(b"\r\n")
        status = _status(lines[0])
        length: int | None = None
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"transfer-encoding":
                raise ValueError("a chunked answer: this client reads Content-Length only")
            if name == b"content-length":
                length = _length(value)
        if method == "HEAD" or status in _NO_BODY or status < 200:
            length = 0
        elif length is None:
            raise ValueError("an answer without Content-Length: this client reads no other")
        while len(rest) < length:
            rest += self._receive()
        self._pending = rest[length:]
        return status, rest[:length]

    def _receive(self) -> bytes:
        data = self._sock.recv(65536)
        if not data:
            raise ConnectionError("the service closed the connection")
        return data

    def close(self) -> None:
        """Close the connection."""
        self._sock.close()

    def __enter__(self) -> RawHttp:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def _status(line: bytes) -> int:
    version, _, rest = line.partition(b" ")
    code = rest[:3]
    if (
        version != b"HTTP/1.1"
        or len(code) != 3
        or not code.isdigit()
        or rest[3:4] not in (b"", b" ")
    ):
        raise ValueError(f"not an HTTP/1.1 status line: {line[:80]!r}")
    return int(code)


def _length(value: bytes) -> int:
    digits = value.strip()
    if not digits.isdigit() or len(digits) > 18:
        raise ValueError(f"not a Content-Length: {value[:40]!r}")
    return int(digits)
