"""A run's events as server-sent events (SPEC §13): ``GET …/runs/{run_id}/events/stream``.

API clients and the web console's pages use the same handler. The stream is opened (caps
checked, run found) before the response starts, so a refusal is an ordinary problem: 429
``too_many_requests`` with ``Retry-After`` past a cap (ADR 0025), 404 for no such run. Once
started, the response gives the stream's place under the caps back however it ends (the client
hanging up, the run ending, the service stopping), even if the body was never iterated.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from workload_api.handlers import SEQUENCE, Call, bad_query, check_query_names
from workload_api.problems import HttpProblem
from workload_api.usecases.streams import End, Events, EventStream

__all__ = ["stream_events"]

_STREAM_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
_RECONNECT_MS = 3000


def _stream_start(call: Call) -> int:
    """The sequence a stream starts after: ``Last-Event-ID`` (a resume), else ``after``, else 0."""
    query = call.request.query_params
    check_query_names(query, ("after",))
    if len(query.getlist("after")) > 1:
        raise bad_query("query parameter 'after' is repeated")
    raw = query.get("after")
    if raw is not None and not SEQUENCE.fullmatch(raw):
        # Checked even when Last-Event-ID wins: a malformed parameter is refused, not ignored.
        raise bad_query("after must be an event sequence (an integer of 0 or more)")
    resumed = call.request.headers.get("last-event-id")
    if resumed is not None:
        if not SEQUENCE.fullmatch(resumed.strip()):
            raise HttpProblem(400, "invalid_argument", "Last-Event-ID must be an event sequence")
        return int(resumed.strip())
    return 0 if raw is None else int(raw)


async def stream_events(call: Call) -> Response:
    """Open the run's stream (refused before the response starts), then send it."""
    after = _stream_start(call)
    principal = "" if call.principal is None else call.principal.id
    stream = await call.usecases.streams.open(call.path("run_id"), after, principal=principal)
    return _EventStreamResponse(stream)


class _EventStreamResponse(StreamingResponse):
    """A streaming response that always closes its stream when it ends."""

    def __init__(self, stream: EventStream) -> None:
        super().__init__(
            _server_sent(stream), media_type="text/event-stream", headers=_STREAM_HEADERS
        )
        self._stream = stream

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self._stream.aclose()


async def _server_sent(stream: EventStream) -> AsyncIterator[bytes]:
    """The stream's items as server-sent events (``id:`` is the event's sequence)."""
    async with aclosing(stream):
        yield f"retry: {_RECONNECT_MS}\n\n".encode()  # answered at once, even with nothing new
        async for item in stream:
            if isinstance(item, Events):
                yield "".join(
                    f"id: {e['sequence']}\ndata: {_compact(e)}\n\n" for e in item.items
                ).encode()
            elif isinstance(item, End):
                body = {"run_id": item.run_id, "status": item.status}
                yield f"event: end\ndata: {_compact(body)}\n\n".encode()
            else:
                yield b": keep-alive\n\n"


def _compact(value: Any) -> str:
    # One line: JSON escapes every newline inside strings.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
