"""A live API for end-to-end tests: uvicorn on an ephemeral loopback port, real PostgreSQL.

The server runs in a thread with its own event loop (as it would in its own process), and tests
talk to it over real HTTP with httpx.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn

from workload_api.app import Readiness, create_app, serve_engine
from workload_api.container import Container
from workload_api.settings import Settings

VIEWER_TOKEN = "viewer-token-e2e-0123456789"
OPERATOR_TOKEN = "operator-token-e2e-9876543210"
ROTATED_OPERATOR_TOKEN = "operator-token-rotated-5555"


@dataclass
class LiveApi:
    """A running service and clients for each role."""

    base_url: str
    container: Container
    readiness: Readiness
    operator: httpx.Client
    viewer: httpx.Client
    anonymous: httpx.Client

    def wait_for_run(self, run_id: str, *, timeout: float = 20) -> dict[str, Any]:
        """Poll until the run is terminal (bounded by ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            body: dict[str, Any] = self.viewer.get(f"/api/v1/runs/{run_id}").json()
            if body["status"] in {"succeeded", "failed", "canceled"}:
                return body
            if time.monotonic() > deadline:
                raise AssertionError(f"run {run_id} still {body['status']} after {timeout}s")
            time.sleep(0.02)


def _client(base_url: str, token: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=base_url, headers=headers, timeout=30)


@pytest.fixture
def live_api(database_url: str) -> Iterator[LiveApi]:
    """A fresh service on its own database, stopped after the test."""
    settings = Settings(
        database_url=database_url,
        viewer_tokens=VIEWER_TOKEN,
        operator_tokens=f"{OPERATOR_TOKEN},{ROTATED_OPERATOR_TOKEN}",
        max_concurrent_attempts=16,
    )
    container = Container(settings=settings)
    readiness = Readiness()
    control_plane = container.control_plane()
    app = create_app(
        control_plane,
        container.authenticator(),
        readiness,
        lifespan=lambda _app: serve_engine(control_plane, readiness),
    )
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_config=None, lifespan="on", access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="live-api", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the live API did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    base_url = f"http://127.0.0.1:{port}"
    clients = [_client(base_url, t) for t in (OPERATOR_TOKEN, VIEWER_TOKEN, None)]
    try:
        yield LiveApi(base_url, container, readiness, *clients)
    finally:
        for client in clients:
            client.close()
        server.should_exit = True
        thread.join(timeout=20)
