"""The benchmarks' raw HTTP/1.1 client reads exactly one answer a request, or says why not."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from benchmarks.rawhttp import RawHttp

Handler = Callable[[socket.socket, list[bytes]], None]


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], int]]:
    """Start a one-connection loopback server running ``handler``; return its port."""
    threads: list[threading.Thread] = []
    listeners: list[socket.socket] = []

    def start(handler: Handler) -> int:
        listener = socket.create_server(("127.0.0.1", 0))
        listener.settimeout(5)
        listeners.append(listener)
        received: list[bytes] = []

        def run() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(5)
                handler(conn, received)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
        port: int = listener.getsockname()[1]
        return port

    yield start
    for thread in threads:
        thread.join(timeout=5)
    for listener in listeners:
        listener.close()
    assert not any(t.is_alive() for t in threads), "a test server did not finish"


def test_answers_are_read_by_content_length_even_when_they_arrive_together(
    serve: Callable[[Handler], int],
) -> None:
    requests: list[bytes] = []

    def handler(conn: socket.socket, _: list[bytes]) -> None:
        requests.append(conn.recv(65536))
        # Two answers in one write: the second is kept for the next request.
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello"
            b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\nX: y\r\n\r\n{}"
        )
        requests.append(conn.recv(65536))

    port = serve(handler)
    with RawHttp("127.0.0.1", port, {"Authorization": "Bearer t"}, timeout=5) as client:
        assert client.request("GET", "/a") == (200, b"hello")
        assert client.request("POST", "/b", {"Idempotency-Key": "k"}) == (202, b"{}")
    assert requests == [
        f"GET /a HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer t\r\n\r\n".encode(),
        f"POST /b HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer t\r\n"
        "Idempotency-Key: k\r\nContent-Length: 0\r\n\r\n".encode(),
    ]


def test_timed_counts_until_the_last_byte(serve: Callable[[Handler], int]) -> None:
    def handler(conn: socket.socket, _: list[bytes]) -> None:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab")
        time.sleep(0.2)
        conn.sendall(b"cd")

    with RawHttp("127.0.0.1", serve(handler), {}, timeout=5) as client:
        seconds, status, body = client.timed("GET", "/")
    assert (status, body) == (200, b"abcd")
    assert seconds >= 0.2


def test_answers_without_a_body_and_interim_answers(serve: Callable[[Handler], int]) -> None:
    def handler(conn: socket.socket, _: list[bytes]) -> None:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n")
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n")  # HEAD: no body
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201\r\nContent-Length: 1\r\n\r\nx")

    with RawHttp("127.0.0.1", serve(handler), {}, timeout=5) as client:
        assert client.request("DELETE", "/a") == (204, b"")
        assert client.request("HEAD", "/b") == (200, b"")
        assert client.request("POST", "/c", body=b"{}") == (201, b"x")


@pytest.mark.parametrize(
    ("answer", "error", "match"),
    [
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", ValueError, "chunked"),
        (b"HTTP/1.1 200 OK\r\n\r\nuntil the connection closes", ValueError, "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", ValueError, "not a Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5_0\r\n\r\n", ValueError, "not a Content-Length"),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", ValueError, "status line"),
        (b"HTTP/1.1 2000\r\nContent-Length: 0\r\n\r\n", ValueError, "status line"),
        (b"garbage\r\n\r\n", ValueError, "status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", ConnectionError, "closed"),
        (b"HTTP/1.1 200 OK\r\n" + b"X: " + b"a" * 70_000, ValueError, "too long"),
    ],
    ids=[
        "chunked",
        "no-length",
        "negative-length",
        "underscored-length",
        "http-1.0",
        "four-digit-status",
        "no-status-line",
        "closed-mid-body",
        "head-too-long",
    ],
)
def test_an_answer_it_cannot_read_is_an_error_and_closes_the_connection(
    serve: Callable[[Handler], int], answer: bytes, error: type[Exception], match: str
) -> None:
    def handler(conn: socket.socket, _: list[bytes]) -> None:
        conn.recv(65536)
        conn.sendall(answer)

    with RawHttp("127.0.0.1", serve(handler), {}, timeout=5) as client:
        with pytest.raises(error, match=match):
            client.request("GET", "/")
        with pytest.raises(ConnectionError, match="earlier answer"):
            client.request("GET", "/")


@pytest.mark.parametrize("host", ["example.com", "10.0.0.1", "::1", ""])
def test_only_a_loopback_host(host: str) -> None:
    with pytest.raises(ValueError, match="loopback"):
        RawHttp(host, 80, {})


@pytest.mark.parametrize("name", ["Host", "content-length"])
def test_the_headers_it_sends_itself_are_not_given(name: str) -> None:
    with pytest.raises(ValueError, match="this client's to send"):
        RawHttp("127.0.0.1", 1, {name: "x"})
