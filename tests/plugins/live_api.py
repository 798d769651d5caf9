"""The service under test, on one of two backends, behind one interface (:class:`LiveApi`).

- ``memory`` (the default): the real application and the service's one lifecycle on the
  in-memory store, in this process — the container with :func:`use_memory_store`. Requests go
  through ``httpx.ASGITransport`` into an event loop of its own (an anyio blocking portal), so
  the blocking httpx clients, the SDK and the CLI all reach it without a socket or a database.
  Responses stream chunk by chunk (event streams work in-process too).
- ``postgres``: the real ``Coordinator`` (lock, store, engine, uvicorn) on a loopback port, with
  a fresh PostgreSQL database per test — the thinner layer that proves the same behaviour over
  real HTTP and SQL.

A test runs on ``memory`` only, unless it (or its module) is marked ``real_http`` (both
backends) or ``real_http_only`` (``postgres`` only: raw sockets, schemathesis over the wire).
The ``postgres`` variant carries the ``postgres`` mark, so ``-m "not postgres"`` runs the
behaviour suites with no database at all.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from starlette.types import ASGIApp, Message

from tests.tls import shared_tls
from tests.waiting import wait_until
from workload_api.container import Container, use_memory_store
from workload_api.lifecycle import Readiness
from workload_api.settings import Settings
from workload_sdk import AsyncClient, Client

VIEWER_TOKEN = "viewer-token-e2e-0123456789"
OPERATOR_TOKEN = "operator-token-e2e-9876543210"
ROTATED_OPERATOR_TOKEN = "operator-token-rotated-5555"
WORKER_TOKEN = "worker-token-e2e-4242424242"
IN_PROCESS_URL = "http://workload.test"
TERMINAL = frozenset({"succeeded", "failed", "canceled"})
BACKENDS = ("memory", "postgres")


_DONE = object()


class PortalTransport(httpx.BaseTransport):
    """A blocking transport into an ASGI app running in a blocking portal's event loop.

    Responses stream: each body chunk the app sends reaches the client as it is sent (so event
    streams and long-polls behave as over a socket), a silence longer than the request's read
    timeout raises ``httpx.ReadTimeout``, and closing the response tells the app the client
    hung up (``http.disconnect``).
    """

    def __init__(self, portal: BlockingPortal, app: ASGIApp) -> None:
        self._portal = portal
        self._app = app

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        timeouts = request.extensions.get("timeout", {})
        read_timeout: float | None = timeouts.get("read")
        messages: queue.Queue[Any] = queue.Queue()
        hung_up: list[anyio.Event] = []
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "headers": [(k.lower(), v) for (k, v) in request.headers.raw],
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "server": (request.url.host, request.url.port or 80),
            "client": ("127.0.0.1", 40000),
            "root_path": "",
        }

        async def serve() -> None:
            disconnected = anyio.Event()
            hung_up.append(disconnected)
            sent = False

            async def receive() -> Message:
                nonlocal sent
                if not sent:
                    sent = True
                    return {"type": "http.request", "body": body, "more_body": False}
                await disconnected.wait()
                return {"type": "http.disconnect"}

            async def send(message: Message) -> None:
                messages.put(message)

            try:
                await self._app(scope, receive, send)
            except BaseException as exc:
                messages.put(exc)
                raise
            finally:
                messages.put(_DONE)

        future = self._portal.start_task_soon(serve)

        def hang_up() -> None:
            if hung_up and not future.done():
                self._portal.call(hung_up[0].set)
            with contextlib.suppress(Exception):
                future.result(timeout=30)

        start = _next(messages, read_timeout)
        if start is _DONE or start["type"] != "http.response.start":
            hang_up()
            raise RuntimeError("the application sent no response")
        return httpx.Response(
            start["status"],
            headers=start.get("headers", []),
            stream=_PortalBody(messages, read_timeout, hang_up),
            request=request,
        )


def _next(messages: queue.Queue[Any], timeout: float | None) -> Any:
    try:
        item = messages.get(timeout=timeout)
    except queue.Empty:
        raise httpx.ReadTimeout("no data from the in-process service in time") from None
    if isinstance(item, BaseException):
        raise item
    return item


class _PortalBody(httpx.SyncByteStream):
    """A response body arriving from the portal, chunk by chunk."""

    def __init__(
        self, messages: queue.Queue[Any], timeout: float | None, hang_up: Callable[[], None]
    ) -> None:
        self._messages = messages
        self._timeout = timeout
        self._hang_up = hang_up

    def __iter__(self) -> Iterator[bytes]:
        while True:
            message = _next(self._messages, self._timeout)
            if message is _DONE:
                return
            if message["type"] != "http.response.body":
                continue
            if message.get("body"):
                yield message["body"]
            if not message.get("more_body", False):
                return

    def close(self) -> None:
        self._hang_up()


class AsyncPortalTransport(httpx.AsyncBaseTransport):
    """The same, for async clients running in another event loop (the test's)."""

    def __init__(self, blocking: PortalTransport) -> None:
        self._blocking = blocking

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        copy = httpx.Request(
            request.method,
            request.url,
            headers=request.headers,
            content=body,
            extensions=request.extensions,
        )
        response = await anyio.to_thread.run_sync(self._blocking.handle_request, copy)
        assert isinstance(response.stream, httpx.SyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers.raw,
            stream=_AsyncBody(response.stream),
            request=request,
        )


class _AsyncBody(httpx.AsyncByteStream):
    """A blocking body read from another thread."""

    def __init__(self, blocking: httpx.SyncByteStream) -> None:
        self._blocking = blocking

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = iter(self._blocking)
        while True:
            chunk = await anyio.to_thread.run_sync(next, chunks, None)
            if chunk is None:
                return
            yield chunk

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._blocking.close)


@dataclass
class LiveApi:
    """A running service, how to reach it, and clients for each role."""

    backend: str
    base_url: str
    container: Container
    readiness: Readiness
    transport: httpx.BaseTransport | None
    operator: httpx.Client = field(init=False)
    viewer: httpx.Client = field(init=False)
    anonymous: httpx.Client = field(init=False)
    worker: httpx.Client = field(init=False)
    _opened: list[httpx.Client] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.operator = self.client(OPERATOR_TOKEN)
        self.viewer = self.client(VIEWER_TOKEN)
        self.anonymous = self.client(None)
        self.worker = self.client(WORKER_TOKEN)

    def client(
        self,
        token: str | None,
        *,
        headers: Mapping[bytes, bytes] | None = None,
        **kwargs: Any,
    ) -> httpx.Client:
        """A blocking httpx client for the service (closed with the service)."""
        merged = [(b"Authorization", f"Bearer {token}".encode())] if token else []
        merged += list((headers or {}).items())
        client = httpx.Client(
            base_url=self.base_url,
            headers=merged,
            timeout=30,
            transport=self.transport,
            verify=shared_tls(),
            **kwargs,
        )
        self._opened.append(client)
        return client

    def sdk(self, token: str | None = OPERATOR_TOKEN, **kwargs: Any) -> Client:
        """An SDK client for the service."""
        return Client(base_url=self.base_url, token=token, transport=self.transport, **kwargs)

    def async_sdk(self, token: str | None = OPERATOR_TOKEN, **kwargs: Any) -> AsyncClient:
        """An async SDK client for the service (use it in the test's own event loop)."""
        transport = (
            None
            if not isinstance(self.transport, PortalTransport)
            else AsyncPortalTransport(self.transport)
        )
        return AsyncClient(base_url=self.base_url, token=token, transport=transport, **kwargs)

    def wait_for_run(self, run_id: str, *, timeout: float = 20) -> dict[str, Any]:
        """Poll until the run is terminal (bounded by ``timeout``)."""

        def finished() -> dict[str, Any] | None:
            body: dict[str, Any] = self.viewer.get(f"/api/v1/runs/{run_id}").json()
            return body if body["status"] in TERMINAL else None

        return wait_until(finished, timeout=timeout, message=f"run {run_id} is not terminal")

    def close(self) -> None:
        """Close every client opened through this object."""
        for client in self._opened:
            client.close()


def settings(**overrides: Any) -> Settings:
    """The settings of the service under test (tokens of both roles, a modest concurrency)."""
    values: dict[str, Any] = {
        "viewer_tokens": VIEWER_TOKEN,
        "operator_tokens": f"{OPERATOR_TOKEN},{ROTATED_OPERATOR_TOKEN}",
        "worker_tokens": WORKER_TOKEN,
        "max_concurrent_attempts": 16,
        "lock_check_interval_seconds": 0.2,
        "lease_check_interval_seconds": 0.05,
        **overrides,
    }
    return Settings(**values)


@contextmanager
def in_process(container: Container) -> Iterator[LiveApi]:
    """Serve the container's application in this process, within the service's lifecycle."""
    with start_blocking_portal() as portal:
        service = container.service()
        with portal.wrap_async_context_manager(service.running()):
            api = LiveApi(
                "memory",
                IN_PROCESS_URL,
                container,
                container.readiness(),
                PortalTransport(portal, container.app()),
            )
            try:
                yield api
            finally:
                api.close()
        assert service.fault is None, f"the service failed: {service.fault!r}"


@contextmanager
def over_http(container: Container) -> Iterator[LiveApi]:
    """Run the container's coordinator (lock, store, engine, uvicorn) on a loopback port."""
    ready = threading.Event()
    coordinator = container.coordinator(
        host="127.0.0.1", port=0, on_ready=lambda _: ready.set(), handle_signals=False
    )
    exit_code: list[int] = []
    thread = threading.Thread(
        target=lambda: exit_code.append(anyio.run(coordinator.run)), name="live-api", daemon=True
    )
    thread.start()
    wait_until(lambda: ready.is_set() or not thread.is_alive(), timeout=30, message="the API start")
    if not ready.is_set() or coordinator.url is None:
        raise RuntimeError(f"the live API did not start (exit code {exit_code})")
    api = LiveApi("postgres", coordinator.url, container, container.readiness(), None)
    try:
        yield api
    finally:
        api.close()
        coordinator.stop()
        thread.join(timeout=30)
    assert exit_code == [0], f"the service exited with {exit_code}"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "api_backend" not in metafunc.fixturenames:
        return
    definition = metafunc.definition
    if definition.get_closest_marker("real_http_only"):
        backends = ["postgres"]
    elif definition.get_closest_marker("real_http"):
        backends = list(BACKENDS)
    else:
        backends = ["memory"]
    metafunc.parametrize(
        "api_backend",
        [
            pytest.param(b, marks=[pytest.mark.postgres] if b == "postgres" else [], id=b)
            for b in backends
        ],
        indirect=True,
    )


@pytest.fixture
def api_backend(request: pytest.FixtureRequest) -> str:
    """Which backend the service under test runs on (see the module's docstring)."""
    backend: str = request.param
    return backend


@pytest.fixture
def api_settings() -> Settings:
    """The settings of the service under test; override the fixture to change them."""
    return settings()


@pytest.fixture
def api_overrides() -> Callable[[Container], None]:
    """Applied to the service's container before it starts; override the fixture to swap an
    adapter (``container.x.override(...)``)."""
    return lambda container: None


@pytest.fixture
def live_api(
    api_backend: str,
    api_settings: Settings,
    api_overrides: Callable[[Container], None],
    request: pytest.FixtureRequest,
) -> Iterator[LiveApi]:
    """A fresh service for this test, on the backend the test asks for."""
    if api_backend == "memory":
        container = use_memory_store(Container(settings=api_settings))
        api_overrides(container)
        with in_process(container) as api:
            yield api
        return
    url: str = request.getfixturevalue("database_url")
    container = Container(settings=api_settings.model_copy(update={"database_url": url}))
    api_overrides(container)
    with over_http(container) as api:
        yield api
