"""The openai:<model> adapter's failures over real HTTP: retryable or not, one request, no key."""

from __future__ import annotations

import logging
import traceback

import anyio
import pytest

from tests.fakes.openai_server import Behaviour, Call, FakeOpenAI, Hang, Raw, Reply, Status
from tests.models.conftest import API_KEY, MODEL, ask
from tests.waiting import await_until
from workload_domain.agent.llm import (
    MODEL_ERROR,
    MODEL_UNAVAILABLE,
    Message,
    ModelFailure,
    ModelRejected,
    ModelRequest,
    ModelUnavailable,
    Role,
)
from workload_model_openai import OpenAIModel, OpenAIModels

pytestmark = pytest.mark.anyio

# Generous: the calls below fail at once or after the adapter's own 0.5 s timeout.
GUARD_SECONDS = 20


async def failure_of(model: OpenAIModel, request: ModelRequest | None = None) -> ModelFailure:
    """The failure ``model`` raises for ``request`` (a plain question by default)."""
    with anyio.fail_after(GUARD_SECONDS), pytest.raises(ModelFailure) as caught:
        await model.complete(request or ask())
    return caught.value


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 599])
async def test_429_and_5xx_are_unavailable(
    fake_openai: FakeOpenAI, models: OpenAIModels, status: int
) -> None:
    fake_openai.queue(Status(status, "try later"))

    failure = await failure_of(models.model(f"openai:{MODEL}"))

    assert type(failure) is ModelUnavailable
    assert (failure.code, failure.retryable) == (MODEL_UNAVAILABLE, True)
    assert f"HTTP {status}" in failure.message
    assert "try later" in failure.message
    assert fake_openai.calls == 1  # the client's retries are off


@pytest.mark.parametrize("status", [400, 401, 403, 404, 408, 409, 413, 422])
async def test_other_4xx_are_rejected(
    fake_openai: FakeOpenAI, models: OpenAIModels, status: int
) -> None:
    fake_openai.queue(Status(status, "bad request"))

    failure = await failure_of(models.model(f"openai:{MODEL}"))

    assert type(failure) is ModelRejected
    assert (failure.code, failure.retryable) == (MODEL_ERROR, False)
    assert f"HTTP {status}" in failure.message
    assert fake_openai.calls == 1


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"<html>Bad Gateway</html>", id="html"),
        pytest.param(b"", id="empty"),
        pytest.param(b'{"detail": "x"}', id="no-error-member"),
    ],
)
async def test_an_error_body_of_any_shape_is_classified_by_its_status(
    fake_openai: FakeOpenAI, models: OpenAIModels, body: bytes
) -> None:
    fake_openai.queue(Raw(body, 502, "text/html"), Raw(body, 400, "text/html"))
    model = models.model(f"openai:{MODEL}")

    assert type(await failure_of(model)) is ModelUnavailable
    assert type(await failure_of(model)) is ModelRejected


@pytest.mark.parametrize(
    "behaviour",
    [pytest.param(Hang(), id="no-answer"), pytest.param(Reply("late", delay=3), id="late-answer")],
)
async def test_a_timeout_is_unavailable(fake_openai: FakeOpenAI, behaviour: Behaviour) -> None:
    fake_openai.queue(behaviour)
    async with OpenAIModels(fake_openai.base_url, API_KEY, 0.5) as models:
        failure = await failure_of(models.model(f"openai:{MODEL}"))

    assert type(failure) is ModelUnavailable
    assert "did not answer within 0.5 s" in failure.message
    assert fake_openai.calls == 1


async def test_a_refused_connection_is_unavailable(refused_url: str) -> None:
    async with OpenAIModels(refused_url, API_KEY, 5) as models:
        failure = await failure_of(models.model(f"openai:{MODEL}"))

    assert type(failure) is ModelUnavailable
    assert failure.message.startswith(f"could not reach the model server at {refused_url}")


MALFORMED = [
    pytest.param(b"not json", "the body is not JSON", id="not-json"),
    pytest.param(b"\xff\xfe\xfd", "the body is not JSON", id="not-utf8"),
    pytest.param(b"", "the body is not JSON", id="empty"),
    pytest.param(b"[1, 2]", "the body is not a JSON object", id="array"),
    pytest.param(b"{}", "it has no choices", id="no-choices"),
    pytest.param(b'{"choices": []}', "it has no choices", id="empty-choices"),
    pytest.param(b'{"choices": {"0": {}}}', "it has no choices", id="choices-object"),
    pytest.param(b'{"error": {"message": "overloaded"}}', "it has no choices", id="error-with-200"),
    pytest.param(b'{"choices": [3]}', "choices[0] is not a JSON object", id="choice-number"),
    pytest.param(b'{"choices": [{}]}', "choices[0].message is not a JSON object", id="no-message"),
    pytest.param(
        b'{"choices": [{"message": {"content": 42}}]}',
        "choices[0].message.content is not a string",
        id="content-number",
    ),
    pytest.param(
        b'{"choices": [{"message": {"content": [{"type": "text", "text": "x"}]}}]}',
        "choices[0].message.content is not a string",
        id="content-parts",
    ),
    pytest.param(
        b'{"choices": [{"message": {"content": null, "tool_calls": {}}}]}',
        "choices[0].message.tool_calls is not a list",
        id="tool-calls-object",
    ),
    pytest.param(
        b'{"choices": [{"message": {"tool_calls": [{"id": 7, "function": {"name": "f"}}]}}]}',
        "choices[0].message.tool_calls[0].id is not a string",
        id="tool-call-id-number",
    ),
    pytest.param(
        b'{"choices": [{"message": {"tool_calls": [{"id": "c", "function": {"name": 1}}]}}]}',
        "choices[0].message.tool_calls[0].function.name is not a string",
        id="tool-name-number",
    ),
    pytest.param(
        b'{"choices": [{"message": {"tool_calls": [{"id": "c"}]}}]}',
        "choices[0].message.tool_calls[0].function is not a JSON object",
        id="tool-call-without-function",
    ),
    pytest.param(
        b'{"choices": [{"message": {"content": "x"}, "finish_reason": 1}]}',
        "choices[0].finish_reason is not a string",
        id="finish-number",
    ),
    pytest.param(
        b'{"choices": [{"message": {"content": "x"}}], "usage": []}',
        "usage is not a JSON object",
        id="usage-array",
    ),
    pytest.param(
        b'{"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": "12"}}',
        "usage.prompt_tokens is not a count",
        id="tokens-text",
    ),
    pytest.param(
        b'{"choices": [{"message": {"content": "x"}}], "usage": {"completion_tokens": -1}}',
        "usage.completion_tokens is not a count",
        id="tokens-negative",
    ),
    pytest.param(
        b'{"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": true}}',
        "usage.prompt_tokens is not a count",
        id="tokens-boolean",
    ),
    pytest.param(
        b'{"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": 1.5}}',
        "usage.prompt_tokens is not a count",
        id="tokens-fraction",
    ),
]


@pytest.mark.parametrize(("body", "reason"), MALFORMED)
async def test_a_malformed_200_is_unavailable(
    fake_openai: FakeOpenAI, models: OpenAIModels, body: bytes, reason: str
) -> None:
    fake_openai.queue(Raw(body))

    failure = await failure_of(models.model(f"openai:{MODEL}"))

    assert type(failure) is ModelUnavailable
    assert failure.message.endswith(f"answered 200 without a chat completion: {reason}")
    assert fake_openai.calls == 1


async def test_a_request_for_another_model_is_rejected_without_a_call(
    fake_openai: FakeOpenAI, models: OpenAIModels
) -> None:
    failure = await failure_of(models.model(f"openai:{MODEL}"), ModelRequest("gpt-4o", ()))

    assert type(failure) is ModelRejected
    assert fake_openai.calls == 0


async def test_text_that_is_not_unicode_is_rejected_without_a_call(
    fake_openai: FakeOpenAI, models: OpenAIModels
) -> None:
    request = ask(Message(Role.USER, "half a pair: \ud83d"))

    failure = await failure_of(models.model(f"openai:{MODEL}"), request)

    assert type(failure) is ModelRejected
    assert "not valid Unicode" in failure.message
    assert fake_openai.calls == 0


async def test_every_call_is_exactly_one_request(
    fake_openai: FakeOpenAI, models: OpenAIModels
) -> None:
    fake_openai.queue(Status(429), Status(500), Reply("ok"), Status(503), Raw(b"{}"))
    model = models.model(f"openai:{MODEL}")
    outcomes: list[str] = []
    for expected in range(1, 6):
        try:
            outcomes.append(str((await model.complete(ask())).content))
        except ModelFailure as failure:
            outcomes.append(type(failure).__name__)
        assert fake_openai.calls == expected

    assert outcomes == [
        "ModelUnavailable",
        "ModelUnavailable",
        "ok",
        "ModelUnavailable",
        "ModelUnavailable",
    ]
    assert {r.headers["x-stainless-retry-count"] for r in fake_openai.chat_requests} == {"0"}


async def test_a_cancelled_call_stops_promptly(fake_openai: FakeOpenAI) -> None:
    async def called() -> bool:
        return fake_openai.calls > 0

    fake_openai.queue(Hang())
    async with OpenAIModels(fake_openai.base_url, API_KEY, 600) as models:
        model = models.model(f"openai:{MODEL}")
        with anyio.fail_after(GUARD_SECONDS):
            async with anyio.create_task_group() as group:
                group.start_soon(model.complete, ask())
                await await_until(called, message="the call never reached the server")
                group.cancel_scope.cancel()

    assert fake_openai.calls == 1


ECHOES = [
    pytest.param(Status(401, f"Incorrect API key provided: {API_KEY}."), id="401-echo"),
    pytest.param(Status(403, f"key {API_KEY} may not use this model"), id="403-echo"),
    pytest.param(Status(429, f"rate limit for {API_KEY}"), id="429-echo"),
    pytest.param(Status(500, f"crashed handling {API_KEY}"), id="500-echo"),
    pytest.param(Raw(API_KEY.encode(), 502, "text/plain"), id="502-raw-echo"),
    pytest.param(Raw(f'{{"key": "{API_KEY}"}}'.encode()), id="200-malformed-echo"),
    pytest.param(Hang(), id="timeout"),
]


@pytest.mark.parametrize("behaviour", ECHOES)
async def test_the_key_never_appears_in_failures_or_logs(
    fake_openai: FakeOpenAI, behaviour: Behaviour, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("openai", "httpx", "httpx2", "httpcore", "httpcore2", "workload_model_openai"):
        caplog.set_level(logging.DEBUG, logger=name)
    fake_openai.queue(Reply("fine"), behaviour)
    # A short timeout only where the server hangs: on a loaded machine the first call (the
    # client's connection) may take longer than half a second, which is not the failure tested.
    timeout = 0.5 if isinstance(behaviour, Hang) else 60.0
    async with OpenAIModels(fake_openai.base_url, API_KEY, timeout) as models:
        model = models.model(f"openai:{MODEL}")
        await model.complete(ask())
        failure = await failure_of(model)

    assert fake_openai.chat_requests[1].headers["authorization"] == f"Bearer {API_KEY}"
    assert any(r.name.startswith("openai") for r in caplog.records)  # the client did log
    shown = [
        failure.message,
        str(failure),
        repr(failure),
        "".join(traceback.format_exception(failure)),
        repr(models),
        repr(model),
        repr(models.settings),
        caplog.text,
        *(str(r.args) for r in caplog.records),
    ]
    assert not [text for text in shown if API_KEY in text]
    assert failure.__cause__ is None
    assert failure.__context__ is None


def _shows_part_of_the_key(text: str) -> bool:
    """Whether ``text`` holds 8 or more consecutive characters of the key, in any case."""
    key, folded = API_KEY.lower(), text.lower()
    return any(key[i : i + 8] in folded for i in range(len(key) - 7))


@pytest.mark.parametrize(
    "echoed",
    [
        pytest.param(API_KEY.lower(), id="lower-cased"),
        pytest.param(API_KEY.upper(), id="upper-cased"),
        pytest.param(API_KEY[:12] + "...", id="cut-short"),
        pytest.param("..." + API_KEY[-9:], id="only-its-end"),
        pytest.param(API_KEY[:10].swapcase() + "*****" + API_KEY[-8:], id="middle-elided"),
    ],
)
async def test_a_changed_or_cut_key_in_a_server_message_is_masked(
    fake_openai: FakeOpenAI, models: OpenAIModels, echoed: str
) -> None:
    fake_openai.queue(Status(401, f"Incorrect API key provided: {echoed} (see docs)"))

    failure = await failure_of(models.model(f"openai:{MODEL}"))

    assert "Incorrect API key provided: " in failure.message
    assert "***" in failure.message
    assert "(see docs)" in failure.message  # the rest of the message is kept
    assert not _shows_part_of_the_key(failure.message), failure.message


async def test_a_server_message_is_quoted_on_one_short_line(
    fake_openai: FakeOpenAI, models: OpenAIModels
) -> None:
    fake_openai.queue(Status(400, "line one\nline\x00two\x1b[31m " + "x" * 5000))

    failure = await failure_of(models.model(f"openai:{MODEL}"))

    assert failure.message.isprintable()
    assert "line one line two [31m xxx" in failure.message
    assert len(failure.message) < 400


async def test_a_tool_call_then_a_failure_leaves_no_partial_response(
    fake_openai: FakeOpenAI, models: OpenAIModels
) -> None:
    fake_openai.queue(Reply(tool_calls=[Call("add")]), Status(503))
    model = models.model(f"openai:{MODEL}")

    first = await model.complete(ask())
    failure = await failure_of(model, ask(Message(Role.USER, "hello"), first.message()))

    assert len(first.tool_calls) == 1
    assert type(failure) is ModelUnavailable


async def test_credentials_in_the_base_url_never_appear(refused_url: str) -> None:
    url = refused_url.replace("http://", "http://user:pa55word@") + "?key=pa55word"
    async with OpenAIModels(url, API_KEY, 5) as models:
        failure = await failure_of(models.model(f"openai:{MODEL}"))

    assert type(failure) is ModelUnavailable
    assert "pa55word" not in failure.message
    assert failure.message.startswith(f"could not reach the model server at {refused_url}")
