"""When the body deadline's middleware closes a connection (ADR 0024), at the ASGI level.

The slow-client tests (tests/fault/test_slow_bodies.py) send real bytes to a real server; these
pin the rule on each kind of request: a connection is closed when a declared body is left
unread, or did not arrive in time — and kept when there is no body or it was read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from workload_api._body_deadline import BodyDeadline

pytestmark = pytest.mark.anyio


def _scope(method: str, headers: list[tuple[bytes, bytes]]) -> Scope:
    return {"type": "http", "method": method, "path": "/", "headers": headers, "state": {}}


async def _answer(app: Any, scope: Scope, body: Sequence[Message]) -> list[Message]:
    pending = list(body)
    sent: list[Message] = []

    async def receive() -> Message:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await BodyDeadline(app, timeout=5)(scope, receive, send)
    return sent


def _connection(sent: list[Message]) -> bytes | None:
    (start,) = [m for m in sent if m["type"] == "http.response.start"]
    return dict(start["headers"]).get(b"connection")


def _responder(*, read: bool) -> Any:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if read:
            while (await receive()).get("more_body", False):
                pass
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    return app


async def test_a_request_without_a_body_keeps_its_connection() -> None:
    sent = await _answer(_responder(read=False), _scope("GET", []), [])
    assert _connection(sent) is None


@pytest.mark.parametrize("length", [b"0", b" 0 "])
async def test_a_request_with_an_empty_body_answered_unread_keeps_its_connection(
    length: bytes,
) -> None:
    scope = _scope("POST", [(b"content-length", length)])
    sent = await _answer(_responder(read=False), scope, [])
    assert _connection(sent) is None


@pytest.mark.parametrize("header", [(b"content-length", b"12"), (b"transfer-encoding", b"chunked")])
async def test_a_body_left_unread_closes_the_connection(header: tuple[bytes, bytes]) -> None:
    chunk = {"type": "http.request", "body": b"hello, world", "more_body": False}
    sent = await _answer(_responder(read=False), _scope("POST", [header]), [chunk])
    assert _connection(sent) == b"close"


async def test_a_body_read_to_its_end_keeps_the_connection() -> None:
    body = [
        {"type": "http.request", "body": b"hello, ", "more_body": True},
        {"type": "http.request", "body": b"world", "more_body": False},
    ]
    scope = _scope("POST", [(b"content-length", b"12")])
    sent = await _answer(_responder(read=True), scope, body)
    assert _connection(sent) is None


async def test_a_body_read_in_part_closes_the_connection() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()  # the first chunk only (a handler refusing a body too large, say)
        await send({"type": "http.response.start", "status": 413, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    body = [{"type": "http.request", "body": b"hello, ", "more_body": True}]
    sent = await _answer(app, _scope("POST", [(b"content-length", b"12")]), body)
    assert _connection(sent) == b"close"
