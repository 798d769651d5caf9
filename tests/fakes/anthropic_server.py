"""A fake Anthropic Messages API server on a real socket of 127.0.0.1.

:func:`running_fake_anthropic` starts it on an ephemeral port in a background thread and stops
it on exit. ``POST /v1/messages`` answers with the next queued behaviour:

- :class:`Reply`: a 200 message (text and/or ``tool_use`` blocks, usage, stop reason);
- :class:`Status`: an error status (429, 529, 401, …) with an Anthropic error body;
- :class:`~tests.fakes.scripted.Raw`: any bytes with any status (malformed answers);
- :class:`~tests.fakes.scripted.Hang`: no answer at all until the server stops;

each optionally after a ``delay``. Turns may also be given as the mock model's script turns
(``{"content": …}`` or ``{"tool_calls": [{"name", "arguments"}]}``), so one script serves the
mock model, the fake OpenAI server and this one. A request without the fields the Messages API
requires (``model``, ``max_tokens``, ``messages``) is answered 400 as the API would, without
using the script; so is any request when the queue is empty (``no turn left``). Every request,
on any path, is recorded (:attr:`FakeAnthropic.requests`); :attr:`FakeAnthropic.calls` counts
the message requests, so a test can prove a call was made exactly once, even by another process.

The script, the recorded requests and the socket are ``tests/fakes/scripted.py``'s.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.scripted import Answer, Hang, Raw, RecordedRequest, ScriptedFake, model_of, running

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


class FakeAnthropic(ScriptedFake[Behaviour]):
    """The state of a running fake server: its script of behaviours and what it received."""

    PATH = MESSAGES_PATH
    NAME = "Anthropic"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: the API's root, as an ``anthropic`` endpoint wants it."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """The ``POST /v1/messages`` requests received so far."""
        return self.scripted_requests

    def from_turn(self, turn: Mapping[str, Any]) -> Behaviour:
        return Reply.from_turn(turn)

    def error(self, status: int, message: str) -> Behaviour:
        return Status(status, message)

    def refusal(self, body: bytes) -> str:
        missing = _missing_fields(body)
        return f"{missing}: Field required" if missing else ""

    def answer(self, behaviour: Behaviour, request_body: bytes) -> Answer:
        if isinstance(behaviour, Reply):
            return Answer(200, behaviour.body(model_of(request_body)))
        assert isinstance(behaviour, Status)
        return Answer(behaviour.status, behaviour.body(), headers=behaviour.headers)


def _missing_fields(body: bytes) -> str:
    """The first field the Messages API requires that ``body`` lacks ('' when none)."""
    try:
        data = json.loads(body)
    except ValueError:
        return "the body is not JSON"
    if not isinstance(data, dict):
        return "the body is not an object"
    return next((name for name in _REQUIRED if name not in data), "")


@contextmanager
def running_fake_anthropic(
    turns: Iterable[Behaviour | Mapping[str, Any]] = (),
) -> Iterator[FakeAnthropic]:
    """A fake server on 127.0.0.1 (ephemeral port) answering ``turns``, stopped on exit."""
    with running(FakeAnthropic(turns), "fake-anthropic") as fake:
        yield fake
