"""A fake Anthropic Messages API server on a real socket of 127.0.0.1.

:func:`running_fake_anthropic` starts it on an ephemeral port in a background thread and stops
it on exit. ``POST /v1/messages`` answers with the next queued behaviour:

- :class:`Reply`: a 200 message (text and/or ``tool_use`` blocks, usage, stop reason);
- :class:`Status`: an error status (429, 529, 401, …) with an Anthropic error body;
- :class:`~tests.fakes.openai_server.Raw`: any bytes with any status (malformed answers);
- :class:`~tests.fakes.openai_server.Hang`: no answer at all until the server stops;

each optionally after a ``delay``. Turns may also be given as the mock model's script turns
(``{"content": …}`` or ``{"tool_calls": [{"name", "arguments"}]}``), so one script serves the
mock model, the fake OpenAI server and this one. A request without the fields the Messages API
requires (``model``, ``max_tokens``, ``messages``) is answered 400 as the API would, without
using the script; so is any request when the queue is empty (``no turn left``). Every request,
on any path, is recorded (:attr:`FakeAnthropic.requests`); :attr:`FakeAnthropic.calls` counts
the message requests, so a test can prove a call was made exactly once, even by another process.

It is built like ``tests/fakes/openai_server.py`` and for the same reasons: the standard
library's ``http.server`` needs no dependency (the adapter's own nox session installs only the
adapter and the test tools), runs in a plain thread that a test's event loop and a ``workload
serve`` subprocess can both call, and writes exactly the bytes it is told. It speaks HTTP/1.0
and joins its handler threads when it stops, releasing any that hang or delay first.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.openai_server import Hang, Raw, RecordedRequest

__all__ = [
    "MESSAGES_PATH",
    "Behaviour",
    "FakeAnthropic",
    "Hang",
    "Raw",
    "RecordedRequest",
    "Reply",
    "Status",
    "ToolUse",
    "running_fake_anthropic",
]

MESSAGES_PATH = "/v1/messages"
_REQUIRED = ("model", "max_tokens", "messages")
_ids = itertools.count(1)


@dataclass(frozen=True)
class ToolUse:
    """A ``tool_use`` block of a :class:`Reply`; ``input`` is sent as it is (any JSON value)."""

    name: str
    input: Any = field(default_factory=dict)
    id: str | None = None
    """Defaults to a fresh ``toolu_fake_<n>``."""

    def wire(self) -> dict[str, Any]:
        return {
            "type": "tool_use",
            "id": self.id or f"toolu_fake_{next(_ids)}",
            "name": self.name,
            "input": self.input,
        }


@dataclass(frozen=True)
class Reply:
    """A 200 message: ``blocks`` first, then the text block, then the ``tool_use`` blocks."""

    text: str | None = None
    tool_uses: Sequence[ToolUse] = ()
    usage: Mapping[str, Any] | None = field(
        default_factory=lambda: {"input_tokens": 0, "output_tokens": 0}
    )
    """Sent as it is; None leaves ``usage`` out."""
    stop_reason: str | None = None
    """Defaults to ``tool_use`` when there are tool uses, else ``end_turn``."""
    blocks: Sequence[Mapping[str, Any]] = ()
    """Content blocks sent as they are, before the others (``thinking``, several texts…)."""
    delay: float = 0.0

    @classmethod
    def from_turn(cls, turn: Mapping[str, Any]) -> Reply:
        """A mock-script turn (``{"content"}`` or ``{"tool_calls": [{"name", "arguments"}]}``)."""
        uses = tuple(
            ToolUse(c["name"], c.get("arguments", {}), c.get("id"))
            for c in turn.get("tool_calls", ())
        )
        counts = turn.get("usage") or {}  # Anthropic's names, or the OpenAI fake's
        usage = {
            "input_tokens": counts.get("input_tokens", counts.get("prompt_tokens", 0)),
            "output_tokens": counts.get("output_tokens", counts.get("completion_tokens", 0)),
        }
        return cls(turn.get("content"), uses, usage, turn.get("stop_reason"))

    def body(self, model: Any) -> bytes:
        content: list[Any] = [dict(b) for b in self.blocks]
        if self.text is not None:
            content.append({"type": "text", "text": self.text})
        content.extend(u.wire() for u in self.tool_uses)
        message: dict[str, Any] = {
            "id": f"msg_fake_{next(_ids)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": self.stop_reason or ("tool_use" if self.tool_uses else "end_turn"),
            "stop_sequence": None,
        }
        if self.usage is not None:
            message["usage"] = dict(self.usage)
        return json.dumps(message).encode()


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class Status:
    """An error answer: ``{"type": "error", "error": {"type", "message"}}`` with ``status``."""

    status: int
    message: str = "fake failure"
    delay: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra response headers (``x-should-retry``, ``retry-after``, …)."""

    def body(self) -> bytes:
        kind = _ERROR_TYPES.get(self.status, "api_error")
        error = {"type": kind, "message": self.message}
        return json.dumps({"type": "error", "error": error, "request_id": "req_fake"}).encode()


Behaviour = Reply | Status | Raw | Hang


class FakeAnthropic:
    """The state of a running fake server: its script of behaviours and what it received."""

    def __init__(self, behaviours: Iterable[Behaviour | Mapping[str, Any]] = ()) -> None:
        self._lock = threading.Lock()
        self._script: deque[Behaviour] = deque()
        self._requests: list[RecordedRequest] = []
        self.stopping = threading.Event()
        self.port = 0
        self.queue(*behaviours)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: the API's root, as an ``anthropic`` endpoint wants it."""
        return f"http://127.0.0.1:{self.port}"

    def queue(self, *behaviours: Behaviour | Mapping[str, Any]) -> None:
        """Answer the next message requests with these, in order (mappings are script turns)."""
        converted = [b if not isinstance(b, Mapping) else Reply.from_turn(b) for b in behaviours]
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
    def message_requests(self) -> list[RecordedRequest]:
        """The ``POST /v1/messages`` requests received so far."""
        return [r for r in self.requests if r.method == "POST" and r.path == MESSAGES_PATH]

    @property
    def calls(self) -> int:
        """How many messages were asked for."""
        return len(self.message_requests)

    def record(self, request: RecordedRequest) -> Behaviour | None:
        """Keep ``request``; the behaviour to answer it with (None: not a message request)."""
        with self._lock:
            self._requests.append(request)
            if request.method != "POST" or request.path != MESSAGES_PATH:
                return None
            missing = _missing_fields(request.body)
            if missing:
                return Status(400, f"fake Anthropic server: {missing}: Field required")
            if self._script:
                return self._script.popleft()
        return Status(400, "fake Anthropic server: no turn left in the script")


def _missing_fields(body: bytes) -> str:
    """The first field the Messages API requires that ``body`` lacks ('' when none)."""
    try:
        data = json.loads(body)
    except ValueError:
        return "the body is not JSON"
    if not isinstance(data, dict):
        return "the body is not an object"
    return next((name for name in _REQUIRED if name not in data), "")


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # joined by server_close(): nothing outlives the server
    block_on_close = True

    def __init__(self, fake: FakeAnthropic) -> None:
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
            self._send(404, Status(404, f"no route {self.path}").body())
            return
        if isinstance(behaviour, Hang) or fake.stopping.wait(behaviour.delay):
            fake.stopping.wait()
            return
        if isinstance(behaviour, Reply):
            self._send(200, behaviour.body(json.loads(body).get("model")))
        elif isinstance(behaviour, Status):
            self._send(behaviour.status, behaviour.body(), headers=behaviour.headers)
        else:
            self._send(behaviour.status, behaviour.body, behaviour.content_type)

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client hung up (it timed out): nothing to answer
            return


@contextmanager
def running_fake_anthropic(
    turns: Iterable[Behaviour | Mapping[str, Any]] = (),
) -> Iterator[FakeAnthropic]:
    """A fake server on 127.0.0.1 (ephemeral port) answering ``turns``, stopped on exit."""
    fake = FakeAnthropic(turns)
    server = _Server(fake)
    fake.port = server.server_address[1]
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-anthropic"
    )
    thread.start()
    try:
        yield fake
    finally:
        fake.stopping.set()  # releases handlers that hang or delay
        server.shutdown()
        server.server_close()  # joins the handler threads
        thread.join()
