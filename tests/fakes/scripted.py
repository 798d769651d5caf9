"""What the fake model servers share: a script of behaviours, the requests kept, the socket.

``tests/fakes/openai_server.py`` and ``tests/fakes/anthropic_server.py`` differ only in their
path, their answers' bodies and their error bodies; the rest lives here once: the queue of
behaviours (:class:`Raw` bytes, a :class:`Hang`, or a provider's reply or status), the recorded
requests, and the server on 127.0.0.1.

Why the standard library's ``http.server`` rather than starlette and uvicorn: it needs no
dependency (an adapter's own nox session installs only the adapter and the test tools), it runs
in a plain thread without an event loop, so the test's loop and a ``workload serve`` subprocess
can both call it, and it writes exactly the bytes it is told (malformed bodies, no answer).
It speaks HTTP/1.0 (one request per connection) and joins its handler threads when it stops,
releasing any that hang or delay first, so it shuts down cleanly and promptly.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Generic, TypeVar

__all__ = ["Answer", "Hang", "Raw", "RecordedRequest", "ScriptedFake", "model_of", "running"]


@dataclass(frozen=True)
class Raw:
    """Exactly these bytes, with this status and content type."""

    body: bytes
    status: int = 200
    content_type: str = "application/json"
    delay: float = 0.0


@dataclass(frozen=True)
class Hang:
    """Read the request and never answer (until the server stops)."""


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    """Lower-cased names."""
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Answer:
    """What the server writes back: status, body, content type, extra headers."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: Mapping[str, str] | None = None


B = TypeVar("B")
"""A provider's behaviours: its replies and statuses, :class:`Raw` and :class:`Hang`."""


class ScriptedFake(ABC, Generic[B]):
    """The state of a running fake server: its script of behaviours and what it received.

    A subclass names its ``PATH`` (the one route that uses the script) and its ``NAME``, and
    says how a mock
    script turn becomes a reply (:meth:`from_turn`), what it answers when the script is empty
    or a request is refused (:meth:`error`), and the bytes of its replies (:meth:`answer`).
    """

    PATH: ClassVar[str]
    NAME: ClassVar[str]
    """The provider, as the server's own error messages name it."""

    def __init__(self, behaviours: Iterable[B | Mapping[str, Any]] = ()) -> None:
        self._lock = threading.Lock()
        self._script: deque[B] = deque()
        self._requests: list[RecordedRequest] = []
        self.stopping = threading.Event()
        self.port = 0
        self.queue(*behaviours)

    @abstractmethod
    def from_turn(self, turn: Mapping[str, Any]) -> B:
        """A mock-script turn (``{"content"}`` or ``{"tool_calls": [...]}``) as a reply."""

    @abstractmethod
    def error(self, status: int, message: str) -> B:
        """An error answer of this provider's shape."""

    @abstractmethod
    def answer(self, behaviour: B, request_body: bytes) -> Answer:
        """The answer a reply or status of this provider writes (not :class:`Raw`/:class:`Hang`)."""

    def refusal(self, body: bytes) -> str:
        """Why a request of :attr:`PATH` is refused without using the script ('' when it is not)."""
        del body
        return ""

    def queue(self, *behaviours: B | Mapping[str, Any]) -> None:
        """Answer the next requests of :attr:`PATH` with these, in order (mappings: turns)."""
        converted = [b if not isinstance(b, Mapping) else self.from_turn(b) for b in behaviours]
        with self._lock:
            self._script.extend(converted)

    @property
    def pending(self) -> int:
        """Behaviours queued and not yet used."""
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, on any path, in order."""
        with self._lock:
            return list(self._requests)

    @property
    def scripted_requests(self) -> list[RecordedRequest]:
        """The ``POST`` requests of :attr:`PATH` received so far."""
        return [r for r in self.requests if r.method == "POST" and r.path == self.PATH]

    @property
    def calls(self) -> int:
        """How many requests of :attr:`PATH` were made."""
        return len(self.scripted_requests)

    def record(self, request: RecordedRequest) -> B | Raw | Hang | None:
        """Keep ``request``; the behaviour to answer it with (None: not a request of the path)."""
        with self._lock:
            self._requests.append(request)
            if request.method != "POST" or request.path != self.PATH:
                return None
            refused = self.refusal(request.body)
            if refused:
                return self.error(400, f"fake {self.NAME} server: {refused}")
            if self._script:
                return self._script.popleft()
        return self.error(400, f"fake {self.NAME} server: no turn left in the script")


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # joined by server_close(): nothing outlives the server
    block_on_close = True

    def __init__(self, fake: ScriptedFake[Any]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10  # a client that connects and sends nothing does not hold a thread forever

    def log_message(self, format: str, *args: Any) -> None:
        return  # quiet: the test reads .requests instead

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake = self.server.fake
        behaviour = fake.record(RecordedRequest(self.command, self.path, headers, body))
        if behaviour is None:
            self._send(fake.answer(fake.error(404, f"no route {self.path}"), body))
            return
        if isinstance(behaviour, Hang) or fake.stopping.wait(getattr(behaviour, "delay", 0.0)):
            fake.stopping.wait()
            return
        if isinstance(behaviour, Raw):
            self._send(Answer(behaviour.status, behaviour.body, behaviour.content_type))
        else:
            self._send(fake.answer(behaviour, body))

    def _send(self, answer: Answer) -> None:
        try:
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(answer.body)))
            for name, value in (answer.headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(answer.body)
        except OSError:  # the client hung up (it timed out): nothing to answer
            return


F = TypeVar("F", bound=ScriptedFake[Any])


@contextmanager
def running(fake: F, name: str) -> Iterator[F]:
    """``fake`` served on 127.0.0.1 (an ephemeral port) in a thread ``name``, stopped on exit."""
    server = _Server(fake)
    fake.port = server.server_address[1]
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=name
    )
    thread.start()
    try:
        yield fake
    finally:
        fake.stopping.set()  # releases handlers that hang or delay
        server.shutdown()
        server.server_close()  # joins the handler threads
        thread.join()


def model_of(body: bytes) -> Any:
    """The ``model`` a request's JSON body names (None when it names none or is not JSON)."""
    try:
        return json.loads(body).get("model")
    except (ValueError, AttributeError):
        return None
