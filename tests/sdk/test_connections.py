"""The clients' connection pool (``max_connections``), against a real socket."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import pytest

from tests.waiting import await_until
from workload_sdk import AsyncClient, Client, NotFound

pytestmark = pytest.mark.anyio


class _Counting(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.connections = 0
        self.open = 0
        self.peak = 0
        self.waiting = 0
        self.release = threading.Event()


class _Handler(BaseHTTPRequestHandler):
    server: _Counting
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.connections += 1
            self.server.open += 1
            self.server.peak = max(self.server.peak, self.server.open)

    def finish(self) -> None:
        with self.server.lock:
            self.server.open -= 1
        super().finish()

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

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Counting]:
    served = _Counting()
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        served.release.set()
        served.shutdown()
        served.server_close()
        thread.join(timeout=10)


async def test_requests_beyond_max_connections_wait_for_a_free_one(server: _Counting) -> None:
    url = f"http://127.0.0.1:{server.server_address[1]}"
    async with AsyncClient(base_url=url, token="t", max_retries=0, max_connections=2) as client:

        async def reached() -> bool:
            return server.waiting >= 2

        async def get() -> None:
            with pytest.raises(NotFound):
                await client.runs.get("r")

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(get)
            # Two requests reach the server; the other three wait for their connections.
            await await_until(reached, within=20, message="two requests at the server")
            server.release.set()
    assert server.peak == 2
    assert server.connections == 2  # kept alive and used again


def test_max_connections_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_connections"):
        Client(max_connections=0)
    with pytest.raises(ValueError, match="max_connections"):
        AsyncClient(max_connections=0)
