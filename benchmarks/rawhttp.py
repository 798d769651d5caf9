"""A minimal blocking HTTP/1.1 client on one kept-alive socket: a load generator's floor.

httpx's client costs about 0.7 ms of a request's round trip on this project's two-core machine
(a serial ``GET /livez`` takes 0.9-1.3 ms through ``httpx.AsyncClient`` against 0.2 ms through
this client), which a serial latency read by httpx includes. This client does nothing but write
a request and read one ``Content-Length`` response (the service never answers these requests
chunked), so what it measures is the service's own latency. Loopback only; every read is
bounded by the socket's timeout.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from types import TracebackType

_HEAD_END = b"\r\n\r\n"
_MAX_HEAD = 64 * 1024


class RawHttp:
    """One connection to ``host:port``; :meth:`request` sends one request and reads its answer."""

    def __init__(
        self, host: str, port: int, headers: Mapping[str, str], *, timeout: float = 30.0
    ) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"a loopback host only, not {host!r}")
        self._sock = socket.create_connection((host, port), timeout=timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._common = "".join(f"{k}: {v}\r\n" for k, v in {"Host": host, **headers}.items())
        self._pending = b""

    def request(
        self, method: str, path: str, headers: Mapping[str, str] | None = None, body: bytes = b""
    ) -> tuple[int, bytes]:
        """Send one request; return the status code and the body."""
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        length = f"Content-Length: {len(body)}\r\n" if body or method != "GET" else ""
        head = f"{method} {path} HTTP/1.1\r\n{self._common}{extra}{length}\r\n"
        self._sock.sendall(head.encode("latin-1") + body)
        return self._answer()

    def timed(
        self, method: str, path: str, headers: Mapping[str, str] | None = None, body: bytes = b""
    ) -> tuple[float, int, bytes]:
        """:meth:`request`, with the seconds from the first byte sent to the last byte read."""
        start = time.perf_counter()
        status, answer = self.request(method, path, headers, body)
        return time.perf_counter() - start, status, answer

    def _answer(self) -> tuple[int, bytes]:
        buffer = self._pending
        while _HEAD_END not in buffer:
            if len(buffer) > _MAX_HEAD:
                raise ValueError("the answer's head is too long")
            buffer += self._receive()
        head, _, rest = buffer.partition(_HEAD_END)
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"transfer-encoding":
                raise ValueError("a chunked answer: this client reads Content-Length only")
            if name.strip().lower() == b"content-length":
                length = int(value)
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
