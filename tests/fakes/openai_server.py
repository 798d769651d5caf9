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


Behaviour = Reply | Status | Raw | Hang


class FakeOpenAI(ScriptedFake[Behaviour]):
    """The state of a running fake server: its script of behaviours and what it received."""

    PATH = CHAT_PATH
    NAME = "OpenAI"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, as ``WORKLOAD_OPENAI_BASE_URL`` wants it."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The ``POST /v1/chat/completions`` requests received so far."""
        return self.scripted_requests

    def from_turn(self, turn: Mapping[str, Any]) -> Behaviour:
        return Reply.from_turn(turn)

    def error(self, status: int, message: str) -> Behaviour:
        return Status(status, message)

    def answer(self, behaviour: Behaviour, request_body: bytes) -> Answer:
        if isinstance(behaviour, Reply):
            return Answer(200, behaviour.body(model_of(request_body)))
        assert isinstance(behaviour, Status)
        return Answer(behaviour.status, behaviour.body())


@contextmanager
def running_fake_openai(
    turns: Iterable[Behaviour | Mapping[str, Any]] = (),
) -> Iterator[FakeOpenAI]:
    """A fake server on 127.0.0.1 (ephemeral port) answering ``turns``, stopped on exit."""
    with running(FakeOpenAI(turns), "fake-openai") as fake:
        yield fake
