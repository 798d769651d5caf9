"""The benchmarks' raw HTTP/1.1 client reads exactly one answer a request, or says why not."""

from __future__ import annotations

import socket
import threading

import pytest
from benchmarks.rawhttp import RawHttp


def test_answers_are_read_by_content_length_even_when_they_arrive_together() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    requests: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            requests.append(conn.recv(65536))
            # Two answers in one write: the second is kept for the next request.
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello"
                b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\nX: y\r\n\r\n{}"
            )
            requests.append(conn.recv(65536))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    with RawHttp("127.0.0.1", port, {"Authorization": "Bearer t"}, timeout=5) as client:
        assert client.request("GET", "/a") == (200, b"hello")
        seconds, status, body = client.timed("POST", "/b", {"Idempotency-Key": "k"})
    thread.join(timeout=5)
    listener.close()
    assert (status, body) == (202, b"{}")
    assert seconds >= 0
    assert requests[0] == b"GET /a HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t\r\n\r\n"
    assert requests[1] == (
        b"POST /b HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t\r\n"
        b"Idempotency-Key: k\r\nContent-Length: 0\r\n\r\n"
    )


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", ValueError),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", ConnectionError),
        (b"HTTP/1.1 200 OK\r\n" + b"X: " + b"a" * 70_000, ValueError),
    ],
    ids=["chunked", "closed-mid-body", "head-too-long"],
)
def test_an_answer_it_cannot_read_is_an_error(answer: bytes, error: type[Exception]) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    with RawHttp("127.0.0.1", port, {}, timeout=5) as client, pytest.raises(error):
        client.request("GET", "/")
    thread.join(timeout=5)
    listener.close()


def test_only_a_loopback_host() -> None:
    with pytest.raises(ValueError, match="loopback"):
        RawHttp("example.com", 80, {})
