"""The fake OpenAI server itself: a real socket, a script, every request recorded, a clean stop."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI, Hang, Reply, Status, running_fake_openai
from tests.waiting import wait_until


def post(fake: FakeOpenAI, path: str, body: Any) -> tuple[int, Any]:
    """POST ``body`` as JSON with the standard library; the status and the decoded answer."""
    connection = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=10)
    try:
        connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_it_listens_on_loopback_only_and_answers_script_turns() -> None:
    turns = [{"content": "hi", "usage": {"prompt_tokens": 2, "completion_tokens": 1}}]
    with running_fake_openai(turns) as fake:
        assert fake.base_url == f"http://127.0.0.1:{fake.port}/v1"
        status, answer = post(fake, "/v1/chat/completions", {"model": "m", "messages": []})

    assert status == 200
    assert answer["model"] == "m"
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": "hi"}
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert answer["usage"] == {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}


def test_script_tool_calls_are_sent_as_json_text() -> None:
    turn = {"tool_calls": [{"name": "add", "arguments": {"a": 1}}, {"name": "f", "arguments": "x"}]}
    with running_fake_openai([turn]) as fake:
        _, answer = post(fake, "/v1/chat/completions", {"model": "m"})

    calls = answer["choices"][0]["message"]["tool_calls"]
    assert [c["function"] for c in calls] == [
        {"name": "add", "arguments": '{"a": 1}'},
        {"name": "f", "arguments": "x"},
    ]
    assert len({c["id"] for c in calls}) == 2
    assert answer["choices"][0]["finish_reason"] == "tool_calls"


def test_every_request_is_recorded_and_only_chat_completions_use_the_script() -> None:
    with running_fake_openai([Reply("one")]) as fake:
        other = post(fake, "/v1/models", {})
        first = post(fake, "/v1/chat/completions", {"n": 1})
        exhausted = post(fake, "/v1/chat/completions", {"n": 2})

        assert [(r.method, r.path) for r in fake.requests] == [
            ("POST", "/v1/models"),
            ("POST", "/v1/chat/completions"),
            ("POST", "/v1/chat/completions"),
        ]
        assert [r.json() for r in fake.chat_requests] == [{"n": 1}, {"n": 2}]
        assert (fake.calls, fake.pending) == (2, 0)

    assert other[0] == 404
    assert first[1]["choices"][0]["message"]["content"] == "one"
    assert exhausted == (400, {"error": {**exhausted[1]["error"], "code": "400"}})
    assert "no turn left" in exhausted[1]["error"]["message"]


def test_a_status_answer_carries_an_openai_error_body() -> None:
    with running_fake_openai([Status(429, "slow down")]) as fake:
        status, answer = post(fake, "/v1/chat/completions", {})

    assert status == 429
    assert answer == {"error": {"message": "slow down", "type": "fake_error", "code": "429"}}


def test_stopping_releases_a_request_that_hangs() -> None:
    # The server stops (and joins its threads) although a request waits for an answer that
    # never comes; the client then sees its connection closed without an answer.
    outcome: list[BaseException] = []

    def call(fake: FakeOpenAI) -> None:
        try:
            post(fake, "/v1/chat/completions", {})
        except (OSError, http.client.HTTPException) as error:
            outcome.append(error)

    with running_fake_openai([Hang()]) as fake:
        caller = threading.Thread(target=call, args=(fake,))
        caller.start()
        wait_until(lambda: fake.calls, message="the request never reached the server")
    caller.join(10)

    assert not caller.is_alive()
    assert len(outcome) == 1


def test_the_port_is_free_once_stopped() -> None:
    with running_fake_openai() as fake:
        port = fake.port
    with socket.socket() as probe:
        probe.settimeout(5)
        with pytest.raises(ConnectionRefusedError):
            probe.connect(("127.0.0.1", port))
