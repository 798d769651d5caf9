"""A fake OpenAI-compatible Chat Completions server on a real socket of 127.0.0.1.

:func:`running_fake_openai` starts it on an ephemeral port in a background thread and stops it
on exit. ``POST /v1/chat/completions`` answers with the next queued behaviour:

- :class:`Reply`: a 200 chat completion (content and/or tool calls, usage, finish reason);
- :class:`Status`: an error status (429, 500, 401, …) with an OpenAI-style error body;
- :class:`Raw`: any bytes with any status (malformed answers);
- :class:`Hang`: no answer at all until the server stops;

each optionally after a ``delay``. Turns may also be given as the mock model's script turns
(``{"content": …}`` or ``{"tool_calls": [{"name", "arguments"}]}``), so one script serves both
models. When the queue is empty the server answers 400 (``no turn left``). Every request, on any
path, is recorded (:attr:`FakeOpenAI.requests`); :attr:`FakeOpenAI.calls` counts the chat
completions, so a test can prove a call was made exactly once, even by another process.

Why the standard library's ``http.server`` rather than starlette and uvicorn: it needs no
dependency (the adapter's own nox session installs only the adapter and the test tools), it runs
in a plain thread without an event loop, so the test's loop and a ``workload serve`` subprocess
can both call it, and it writes exactly the bytes it is told (malformed bodies, no answer).
It speaks HTTP/1.0 (one request per connection) and joins its handler threads when it stops,
releasing any that hang or delay first, so it shuts down cleanly and promptly.
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

__all__ = [
    "Behaviour",
    "Call",
    "FakeOpenAI",
    "Hang",
    "Raw",
    "RecordedRequest",
    "Reply",
    "Status",
    "running_fake_openai",
]

CHAT_PATH = "/v1/chat/completions"
_ids = itertools.count(1)


@dataclass(frozen=True)
class Call:
    """A tool call in a :class:`Reply`; a string ``arguments`` is sent as it is (raw text)."""

    name: str
    arguments: Any = field(default_factory=dict)
    id: str | None = None
    """Defaults to a fresh ``call_<n>``."""

    def wire(self) -> dict[str, Any]:
        arguments = self.arguments
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        return {
            "id": self.id or f"call_{next(_ids)}",
            "type": "function",
            "function": {"name": self.name, "arguments": arguments},
        }


@dataclass(frozen=True)
class Reply:
    """A 200 chat completion."""

    content: str | None = None
    tool_calls: Sequence[Call] = ()
    usage: tuple[int, int] | None = (0, 0)
    """``(prompt_tokens, completion_tokens)``; None leaves ``usage`` out."""
    finish_reason: str | None = None
    """Defaults to ``tool_calls`` when there are tool calls, else ``stop``."""
    delay: float = 0.0

    @classmethod
    def from_turn(cls, turn: Mapping[str, Any]) -> Reply:
        """A mock-script turn (``{"content"}`` or ``{"tool_calls": [{"name", "arguments"}]}``)."""
        calls = tuple(
            Call(c["name"], c.get("arguments", {}), c.get("id")) for c in turn.get("tool_calls", ())
        )
        usage = turn.get("usage")
        return cls(
            turn.get("content"),
            calls,
            (usage["prompt_tokens"], usage["completion_tokens"]) if usage else (0, 0),
            turn.get("finish_reason"),
        )

    def body(self, model: Any) -> bytes:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [c.wire() for c in self.tool_calls]
        completion: dict[str, Any] = {
            "id": f"chatcmpl-fake-{next(_ids)}",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": self.finish_reason
                    or ("tool_calls" if self.tool_calls else "stop"),
                }
            ],
        }
        if self.usage is not None:
            prompt, completion_tokens = self.usage
            completion["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt + completion_tokens,
            }
        return json.dumps(completion).encode()


@dataclass(frozen=True)
class Status:
    """An error answer: ``{"error": {"message", "type", "code"}}`` with ``status``."""

    status: int
    message: str = "fake failure"
    delay: float = 0.0

    def body(self) -> bytes:
        error = {"message": self.message, "type": "fake_error", "code": str(self.status)}
        return json.dumps({"error": error}).encode()


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


Behaviour = Reply | Status | Raw | Hang


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


class FakeOpenAI:
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
        """``http://127.0.0.1:<port>/v1``, as ``WORKLOAD_OPENAI_BASE_URL`` wants it."""
        return f"http://127.0.0.1:{self.port}/v1"

    def queue(self, *behaviours: Behaviour | Mapping[str, Any]) -> None:
        """Answer the next chat completions with these, in order (mappings are script turns)."""
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
    def chat_requests(self) -> list[RecordedRequest]:
        """The ``POST /v1/chat/completions`` requests received so far."""
        return [r for r in self.requests if r.method == "POST" and r.path == CHAT_PATH]

    @property
    def calls(self) -> int:
        """How many chat completions were asked for."""
        return len(self.chat_requests)

    def record(self, request: RecordedRequest) -> Behaviour | None:
        """Keep ``request``; the behaviour to answer it with (None: not a chat completion)."""
        with self._lock:
            self._requests.append(request)
            if request.method != "POST" or request.path != CHAT_PATH:
                return None
            if self._script:
                return self._script.popleft()
        return Status(400, "fake OpenAI server: no turn left in the script")


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # joined by server_close(): nothing outlives the server
    block_on_close = True

    def __init__(self, fake: FakeOpenAI) -> None:
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
            try:
                model = json.loads(body).get("model")
            except (ValueError, AttributeError):
                model = None
            self._send(200, behaviour.body(model))
        elif isinstance(behaviour, Status):
            self._send(behaviour.status, behaviour.body())
        else:
            self._send(behaviour.status, behaviour.body, behaviour.content_type)

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client hung up (it timed out): nothing to answer
            return


@contextmanager
def running_fake_openai(
    turns: Iterable[Behaviour | Mapping[str, Any]] = (),
) -> Iterator[FakeOpenAI]:
    """A fake server on 127.0.0.1 (ephemeral port) answering ``turns``, stopped on exit."""
    fake = FakeOpenAI(turns)
    server = _Server(fake)
    fake.port = server.server_address[1]
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai"
    )
    thread.start()
    try:
        yield fake
    finally:
        fake.stopping.set()  # releases handlers that hang or delay
        server.shutdown()
        server.server_close()  # joins the handler threads
        thread.join()
