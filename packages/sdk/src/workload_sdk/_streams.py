"""Following a run's event stream (``GET /runs/{run_id}/events/stream``): no I/O here.

:class:`SseDecoder` turns the lines of a ``text/event-stream`` body into messages (the
WHATWG rules: ``field: value`` lines, a blank line ends a message, ``:`` starts a comment).
:class:`EventFollower` is the state the sync and async twins share: where to resume
(``Last-Event-ID``: the last sequence seen), what each message means, and when to give up
reconnecting. The server sends each event once with ``id:`` = its sequence, and
``event: end`` once the run is terminal and every event was sent; a stream that closes without
its end (the service stopped, a network failure) is resumed after the last event seen, so no
event is missed and none is seen twice.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import ValidationError

from workload_sdk._base_client import retry_delay, transport_error
from workload_sdk._requests import ApiRequest
from workload_sdk.errors import (
    APIConnectionError,
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    TooManyRequests,
)
from workload_sdk.models import Event

__all__ = ["END", "EventFollower", "ServerSentEvent", "SseDecoder", "resumable"]


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One message of an event stream."""

    event: str
    data: str
    id: str | None


@dataclass
class SseDecoder:
    """Decodes an event stream line by line (comments and ``retry:`` are dropped)."""

    _event: str = ""
    _data: list[str] = field(default_factory=list)
    _id: str | None = None

    def feed(self, line: str) -> ServerSentEvent | None:
        """Take one line (without its end); return the message a blank line completes."""
        if not line:
            if not self._data and not self._event:
                return None
            message = ServerSentEvent(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data, self._id = "", [], None
            return message
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None


END = object()
"""What :meth:`EventFollower.message` answers for the stream's ``end``."""


class EventFollower:
    """Where a run's stream stands: the last sequence seen, failures in a row, the deadline."""

    def __init__(self, run_id: str, *, after: int, reconnects: int, timeout: float | None) -> None:
        if after < 0:
            raise ValueError("after must be 0 or more")
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be 0 or more (or None to follow until the end)")
        self.run_id = run_id
        self.last = after
        self._reconnects = reconnects
        self._failures = 0
        self._end = math.inf if timeout is None else time.monotonic() + timeout

    def remaining(self) -> float | None:
        """Seconds left before the deadline (None: no deadline).

        Raises:
            APITimeoutError: the deadline has passed.
        """
        if self._end == math.inf:
            return None
        left = self._end - time.monotonic()
        if left <= 0:
            raise APITimeoutError(f"run {self.run_id} was still going when the stream timed out")
        return left

    def message(self, message: ServerSentEvent) -> Event | object | None:
        """The event a message carries, :data:`END`, or None (a message of another kind)."""
        if message.event == "end":
            return END
        if message.event != "message" or not message.data:
            return None
        try:
            event = Event.model_validate_json(message.data)
        except ValidationError as exc:
            raise APIResponseValidationError(
                f"an event of run {self.run_id}'s stream is not an event: {exc.error_count()} "
                "problem(s)"
            ) from None
        if event.sequence <= self.last:
            return None  # never twice, even from a server that repeats itself
        self.last = event.sequence
        self._failures = 0
        return event

    def closed(self, error: Exception | None) -> float:
        """The stream ended without its end: seconds to wait before resuming.

        Raises:
            APIConnectionError: too many failures in a row (``error`` is the last one's cause).
            APITimeoutError: the deadline has passed.
        """
        self.remaining()
        if self._failures >= self._reconnects:
            if isinstance(error, APIConnectionError | TooManyRequests):
                raise error
            raise APIConnectionError(
                f"the event stream of run {self.run_id} kept closing before the run ended"
            ) from error
        delay = retry_delay(self._failures)
        if isinstance(error, TooManyRequests) and error.retry_after is not None:
            delay = max(delay, min(error.retry_after, _MAX_RETRY_AFTER))  # as the server asks
        self._failures += 1
        left = self.remaining()
        return delay if left is None else min(delay, left)


_RESUMABLE_STATUSES = frozenset({429, 502, 503, 504})
"""A restarting service (502/503/504), or one whose streams are full for now (429: a stream
half-closed by a restart may still count toward the principal's limit, docs/api.md)."""
_MAX_RETRY_AFTER = 30.0
"""The longest a ``Retry-After`` is waited before a stream is opened again."""


def resumable(follower: EventFollower, request: ApiRequest[Any], exc: Exception) -> Exception:
    """The failure a stream resumes after; anything else is raised again.

    Transport failures (a refused connection, a dropped stream, silence past the read timeout),
    502/503/504 (a restarting service) and 429 (after its ``Retry-After``) are resumed from; the
    deadline passing is not.
    """
    if isinstance(exc, httpx.TimeoutException):
        follower.remaining()  # the deadline passed: APITimeoutError
    if isinstance(exc, httpx.DecodingError):
        raise transport_error(request, exc) from exc  # a body that cannot be read: not resumed
    if isinstance(exc, httpx.TransportError):
        return transport_error(request, exc)
    if isinstance(exc, APIStatusError) and exc.status in _RESUMABLE_STATUSES:
        return exc
    if isinstance(exc, APIConnectionError):
        return exc
    raise exc
