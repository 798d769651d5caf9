"""The fake Anthropic server itself: a real socket, a script, every request recorded, clean stop."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from typing import Any

import pytest

from tests.fakes.anthropic_server import (
    FakeAnthropic,
    Hang,
    Reply,
    Status,
    ToolUse,
    running_fake_anthropic,
)
from tests.waiting import wait_until

MINIMAL = {"model": "m", "max_tokens": 10, "messages": []}


def post(fake: FakeAnthropic, path: str, body: Any) -> tuple[int, dict[str, str], Any]:
    """POST ``body`` as JSON with the standard library; the status, headers and decoded answer."""
    connection = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=10)
    try:
        connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        headers = {k.lower(): v for k, v in response.getheaders()}
        return response.status, headers, json.loads(response.read())
    finally:
        connection.close()


def test_it_listens_on_loopback_only_and_answers_script_turns() -> None:
    turns = [{"content": "hi", "usage": {"input_tokens": 2, "output_tokens": 1}}]
    with running_fake_anthropic(turns) as fake:
        assert fake.base_url == f"http://127.0.0.1:{fake.port}"
        status, _, answer = post(fake, "/v1/messages", MINIMAL)

    assert status == 200
    assert answer["model"] == "m"
    assert (answer["type"], answer["role"]) == ("message", "assistant")
    assert answer["content"] == [{"type": "text", "text": "hi"}]
    assert answer["stop_reason"] == "end_turn"
    assert answer["usage"] == {"input_tokens": 2, "output_tokens": 1}


def test_script_tool_calls_are_tool_use_blocks() -> None:
    turn = {
        "tool_calls": [{"name": "add", "arguments": {"a": 1}}, {"name": "f", "arguments": "x"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3},  # the OpenAI fake's names
    }
    with running_fake_anthropic([turn]) as fake:
        _, _, answer = post(fake, "/v1/messages", MINIMAL)

    blocks = answer["content"]
    assert [(b["type"], b["name"], b["input"]) for b in blocks] == [
        ("tool_use", "add", {"a": 1}),
        ("tool_use", "f", "x"),
    ]
    assert len({b["id"] for b in blocks}) == 2
    assert answer["stop_reason"] == "tool_use"
    assert answer["usage"] == {"input_tokens": 5, "output_tokens": 3}


def test_blocks_text_and_tool_uses_come_in_that_order() -> None:
    reply = Reply("t", [ToolUse("f", id="toolu_1")], usage=None, blocks=[{"type": "thinking"}])
    with running_fake_anthropic([reply]) as fake:
        _, _, answer = post(fake, "/v1/messages", MINIMAL)

    assert [b["type"] for b in answer["content"]] == ["thinking", "text", "tool_use"]
    assert "usage" not in answer


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        pytest.param({"max_tokens": 1, "messages": []}, "model", id="no-model"),
        pytest.param({"model": "m", "messages": []}, "max_tokens", id="no-max-tokens"),
        pytest.param({"model": "m", "max_tokens": 1}, "messages", id="no-messages"),
        pytest.param([1], "the body is not an object", id="array"),
    ],
)
def test_a_request_the_api_would_refuse_is_refused_without_using_the_script(
    body: Any, missing: str
) -> None:
    with running_fake_anthropic([Reply("kept")]) as fake:
        status, _, answer = post(fake, "/v1/messages", body)
        assert (fake.calls, fake.pending) == (1, 1)

    assert status == 400
    assert answer["error"]["type"] == "invalid_request_error"
    assert missing in answer["error"]["message"]


def test_every_request_is_recorded_and_only_messages_use_the_script() -> None:
    with running_fake_anthropic([Reply("one")]) as fake:
        other = post(fake, "/v1/models", {})
        first = post(fake, "/v1/messages", {**MINIMAL, "n": 1})
        exhausted = post(fake, "/v1/messages", {**MINIMAL, "n": 2})

        assert [(r.method, r.path) for r in fake.requests] == [
            ("POST", "/v1/models"),
            ("POST", "/v1/messages"),
            ("POST", "/v1/messages"),
        ]
        assert [r.json()["n"] for r in fake.message_requests] == [1, 2]
        assert (fake.calls, fake.pending) == (2, 0)

    assert other[0] == 404
    assert first[2]["content"][0]["text"] == "one"
    assert exhausted[0] == 400
    assert "no turn left" in exhausted[2]["error"]["message"]


def test_a_status_answer_carries_an_anthropic_error_body_and_headers() -> None:
    with running_fake_anthropic([Status(529, "busy", headers={"x-should-retry": "true"})]) as fake:
        status, headers, answer = post(fake, "/v1/messages", MINIMAL)

    assert status == 529
    assert headers["x-should-retry"] == "true"
    assert answer == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "busy"},
        "request_id": "req_fake",
    }


def test_stopping_releases_a_request_that_hangs() -> None:
    # The server stops (and joins its threads) although a request waits for an answer that
    # never comes; the client then sees its connection closed without an answer.
    outcome: list[BaseException] = []

    def call(fake: FakeAnthropic) -> None:
        try:
            post(fake, "/v1/messages", MINIMAL)
        except (OSError, http.client.HTTPException) as error:
            outcome.append(error)

    with running_fake_anthropic([Hang()]) as fake:
        caller = threading.Thread(target=call, args=(fake,))
        caller.start()
        wait_until(lambda: fake.calls, message="the request never reached the server")
    caller.join(10)

    assert not caller.is_alive()
    assert len(outcome) == 1


def test_the_port_is_free_once_stopped() -> None:
    with running_fake_anthropic() as fake:
        port = fake.port
    with socket.socket() as probe:
        probe.settimeout(5)
        with pytest.raises(ConnectionRefusedError):
            probe.connect(("127.0.0.1", port))
