"""A real HTTP server for the clients' pool tests: it counts connections and holds answers.

Shared by ``test_connections.py`` and ``test_indexed_pool.py`` (the ``server`` fixture of
``conftest.py``).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["CountingServer", "serving"]


class CountingServer(ThreadingHTTPServer):
    """Counts connections; answers each GET 404 once released, and with ``close_after_answer``
    closes the connection after answering, with no ``Connection: close`` (the client keeps it).
    """

    daemon_threads = True

    def __init__(self, *, close_after_answer: bool = False) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.close_after_answer = close_after_answer
        self.lock = threading.Lock()
        self.connections = 0
        self.open = 0
        self.peak = 0
        self.waiting = 0
        self.release = threading.Event()

    def shutdown_request(self, request: socket.socket) -> None:  # type: ignore[override]
        """Count a connection closed once its socket is (``finish`` runs before the close)."""
        super().shutdown_request(request)
        with self.lock:
            self.open -= 1


class _Handler(BaseHTTPRequestHandler):
    server: CountingServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.connections += 1
            self.server.open += 1
            self.server.peak = max(self.server.peak, self.server.open)

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.waiting += 1
        self.server.release.wait(timeout=30)
        body = b'{"status": 404, "code": "run_not_found", "detail": "no such run"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/problem+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = self.close_connection or self.server.close_after_answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serving(served: CountingServer) -> Iterator[CountingServer]:
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        served.release.set()
        served.shutdown()
        served.server_close()
        thread.join(timeout=10)
