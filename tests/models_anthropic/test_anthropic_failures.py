"""The Anthropic adapter's failures over real HTTP: retryable or not, one request, no key."""

from __future__ import annotations

import logging
import traceback

import anyio
import pytest

from tests.fakes.anthropic_server import (
    Behaviour,
    FakeAnthropic,
    Hang,
    Raw,
    Reply,
    Status,
    ToolUse,
)
from tests.models_anthropic.conftest import API_KEY, MODEL, NAME, ask
from tests.waiting import await_until
from workload_domain.agent.llm import (
    MODEL_ERROR,
    MODEL_UNAVAILABLE,
    Message,
    ModelFailure,
    ModelRejected,
    ModelRequest,
    ModelSettings,
    ModelUnavailable,
    Role,
    ToolSchema,
)
from workload_model_anthropic import AnthropicModel, AnthropicModels

pytestmark = pytest.mark.anyio

# Generous: the calls below fail at once or after the adapter's own 0.5 s timeout.
GUARD_SECONDS = 20


async def failure_of(model: AnthropicModel, request: ModelRequest | None = None) -> ModelFailure:
    """The failure ``model`` raises for ``request`` (a plain question by default)."""
    with anyio.fail_after(GUARD_SECONDS), pytest.raises(ModelFailure) as caught:
        await model.complete(request or ask())
    return caught.value


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 529, 599])
async def test_429_and_5xx_are_unavailable(
    fake_anthropic: FakeAnthropic, models: AnthropicModels, status: int
) -> None:
    fake_anthropic.queue(Status(status, "try later"))

    failure = await failure_of(models.model(NAME))

    assert type(failure) is ModelUnavailable
    assert (failure.code, failure.retryable) == (MODEL_UNAVAILABLE, True)
    assert f"HTTP {status}" in failure.message
    assert "try later" in failure.message
    assert fake_anthropic.calls == 1  # the client's retries are off


@pytest.mark.parametrize("status", [400, 401, 402, 403, 404, 408, 409, 413, 422])
async def test_other_4xx_are_rejected(
    fake_anthropic: FakeAnthropic, models: AnthropicModels, status: int
) -> None:
    fake_anthropic.queue(Status(status, "bad request"))

    failure = await failure_of(models.model(NAME))

    assert type(failure) is ModelRejected
    assert (failure.code, failure.retryable) == (MODEL_ERROR, False)
    assert f"HTTP {status}" in failure.message
    assert "bad request" in failure.message
    assert fake_anthropic.calls == 1


async def test_the_servers_own_rejection_is_quoted(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    # What Anthropic's current API version says of sampling settings (docs/models.md).
    fake_anthropic.queue(Status(400, "temperature: Extra inputs are not permitted"))

    failure = await failure_of(models.model(NAME), ask(settings=ModelSettings(temperature=0.5)))

    assert failure.message == (
        f"the model server at {models.settings.base_url} rejected the request (HTTP 400): "
        "temperature: Extra inputs are not permitted"
    )


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"<html>Bad Gateway</html>", id="html"),
        pytest.param(b"", id="empty"),
        pytest.param(b'{"detail": "x"}', id="no-error-member"),
        pytest.param(b'{"type": "error", "error": {"message": 42}}', id="message-number"),
    ],
)
async def test_an_error_body_of_any_shape_is_classified_by_its_status(
    fake_anthropic: FakeAnthropic, models: AnthropicModels, body: bytes
) -> None:
    fake_anthropic.queue(Raw(body, 502, "text/html"), Raw(body, 400, "text/html"))
    model = models.model(NAME)

    assert type(await failure_of(model)) is ModelUnavailable
    assert type(await failure_of(model)) is ModelRejected


@pytest.mark.parametrize(
    "behaviour",
    [pytest.param(Hang(), id="no-answer"), pytest.param(Reply("late", delay=3), id="late-answer")],
)
async def test_a_timeout_is_unavailable(
    fake_anthropic: FakeAnthropic, behaviour: Behaviour
) -> None:
    fake_anthropic.queue(behaviour)
    async with AnthropicModels(fake_anthropic.base_url, API_KEY, 0.5) as models:
        failure = await failure_of(models.model(NAME))

    assert type(failure) is ModelUnavailable
    assert "did not answer within 0.5 s" in failure.message
    assert fake_anthropic.calls == 1


async def test_a_refused_connection_is_unavailable(refused_url: str) -> None:
    async with AnthropicModels(refused_url, API_KEY, 5) as models:
        failure = await failure_of(models.model(NAME))

    assert type(failure) is ModelUnavailable
    assert failure.message.startswith(f"could not reach the model server at {refused_url}")


MALFORMED = [
    pytest.param(b"not json", "the body is not JSON", id="not-json"),
    pytest.param(b"\xff\xfe\xfd", "the body is not JSON", id="not-utf8"),
    pytest.param(b"", "the body is not JSON", id="empty"),
    pytest.param(b"[1, 2]", "the body is not a JSON object", id="array"),
    pytest.param(b"{}", "it has no content list", id="no-content"),
    pytest.param(b'{"content": "text"}', "it has no content list", id="content-string"),
    pytest.param(b'{"content": null}', "it has no content list", id="content-null"),
    pytest.param(
        b'{"type": "error", "error": {"message": "overloaded"}}',
        "it has no content list",
        id="error-with-200",
    ),
    pytest.param(b'{"content": [3]}', "content[0] is not a JSON object", id="block-number"),
    pytest.param(b'{"content": [{}]}', "content[0].type is not a string", id="block-no-type"),
    pytest.param(
        b'{"content": [{"type": 7}]}', "content[0].type is not a string", id="type-number"
    ),
    pytest.param(
        b'{"content": [{"type": "text"}]}', "content[0].text is not a string", id="text-missing"
    ),
    pytest.param(
        b'{"content": [{"type": "text", "text": ["x"]}]}',
        "content[0].text is not a string",
        id="text-list",
    ),
    pytest.param(
        b'{"content": [{"type": "tool_use", "id": 7, "name": "f"}]}',
        "content[0].id is not a string",
        id="tool-id-number",
    ),
    pytest.param(
        b'{"content": [{"type": "text", "text": "x"}, {"type": "tool_use", "id": "t"}]}',
        "content[1].name is not a string",
        id="tool-name-missing",
    ),
    pytest.param(
        b'{"content": [], "stop_reason": 1}', "stop_reason is not a string", id="stop-number"
    ),
    pytest.param(b'{"content": [], "usage": []}', "usage is not a JSON object", id="usage-array"),
    pytest.param(
        b'{"content": [], "usage": {"input_tokens": "12"}}',
        "usage.input_tokens is not a count",
        id="tokens-text",
    ),
    pytest.param(
        b'{"content": [], "usage": {"output_tokens": -1}}',
        "usage.output_tokens is not a count",
        id="tokens-negative",
    ),
    pytest.param(
        b'{"content": [], "usage": {"input_tokens": true}}',
        "usage.input_tokens is not a count",
        id="tokens-boolean",
    ),
    pytest.param(
        b'{"content": [], "usage": {"cache_read_input_tokens": 1.5}}',
        "usage.cache_read_input_tokens is not a count",
        id="cache-tokens-fraction",
    ),
]


@pytest.mark.parametrize(("body", "reason"), MALFORMED)
async def test_a_malformed_200_is_unavailable(
    fake_anthropic: FakeAnthropic, models: AnthropicModels, body: bytes, reason: str
) -> None:
    fake_anthropic.queue(Raw(body))

    failure = await failure_of(models.model(NAME))

    assert type(failure) is ModelUnavailable
    assert failure.message.endswith(f"answered 200 without a message: {reason}")
    assert fake_anthropic.calls == 1


async def test_a_huge_200_is_read_and_checked(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    blocks = b",".join([b'{"type": "text", "text": "x"}'] * 200_000)
    fake_anthropic.queue(Raw(b'{"content": [' + blocks + b"]}"))

    response = await models.model(NAME).complete(ask())

    assert response.content == "x" * 200_000


async def test_a_request_for_another_model_is_rejected_without_a_call(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    failure = await failure_of(models.model(NAME), ModelRequest("claude-other", ()))

    assert type(failure) is ModelRejected
    assert MODEL in failure.message
    assert fake_anthropic.calls == 0


async def test_text_that_is_not_unicode_is_rejected_without_a_call(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    request = ask(Message(Role.USER, "half a pair: \ud83d"))

    failure = await failure_of(models.model(NAME), request)

    assert type(failure) is ModelRejected
    assert "not valid Unicode" in failure.message
    assert fake_anthropic.calls == 0


async def test_a_schema_that_is_not_json_is_rejected_without_a_call(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    tool = ToolSchema("f", "d", {"type": "object", "maximum": float("nan")})

    failure = await failure_of(models.model(NAME), ask(tools=(tool,)))

    assert type(failure) is ModelRejected
    assert failure.message == "the request cannot be sent as JSON (ValueError)"
    assert fake_anthropic.calls == 0


async def test_every_call_is_exactly_one_request(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    # x-should-retry: true asks the client to retry even what it would not; it must not.
    again = {"x-should-retry": "true", "retry-after-ms": "1"}
    fake_anthropic.queue(
        Status(429, headers=again),
        Status(529, headers=again),
        Reply("ok"),
        Status(409, headers=again),
        Raw(b"{}"),
    )
    model = models.model(NAME)
    outcomes: list[str] = []
    for expected in range(1, 6):
        try:
            outcomes.append(str((await model.complete(ask())).content))
        except ModelFailure as failure:
            outcomes.append(type(failure).__name__)
        assert fake_anthropic.calls == expected

    assert outcomes == [
        "ModelUnavailable",
        "ModelUnavailable",
        "ok",
        "ModelRejected",
        "ModelUnavailable",
    ]
    assert {r.headers["x-stainless-retry-count"] for r in fake_anthropic.message_requests} == {"0"}


async def test_a_cancelled_call_stops_promptly(fake_anthropic: FakeAnthropic) -> None:
    async def called() -> bool:
        return fake_anthropic.calls > 0

    fake_anthropic.queue(Hang())
    async with AnthropicModels(fake_anthropic.base_url, API_KEY, 600) as models:
        model = models.model(NAME)
        with anyio.fail_after(GUARD_SECONDS):
            async with anyio.create_task_group() as group:
                group.start_soon(model.complete, ask())
                await await_until(called, message="the call never reached the server")
                group.cancel_scope.cancel()

    assert fake_anthropic.calls == 1


ECHOES = [
    pytest.param(Status(401, f"invalid x-api-key: {API_KEY}."), id="401-echo"),
    pytest.param(Status(403, f"key {API_KEY} may not use this model"), id="403-echo"),
    pytest.param(Status(429, f"rate limit for {API_KEY}"), id="429-echo"),
    pytest.param(Status(529, f"overloaded handling {API_KEY}"), id="529-echo"),
    pytest.param(Raw(API_KEY.encode(), 502, "text/plain"), id="502-raw-echo"),
    pytest.param(Raw(f'{{"key": "{API_KEY}"}}'.encode()), id="200-malformed-echo"),
    pytest.param(Hang(), id="timeout"),
]


@pytest.mark.parametrize("behaviour", ECHOES)
async def test_the_key_never_appears_in_failures_or_logs(
    fake_anthropic: FakeAnthropic, behaviour: Behaviour, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in (
        "anthropic",
        "httpx",
        "httpx2",
        "httpcore",
        "httpcore2",
        "workload_model_anthropic",
    ):
        caplog.set_level(logging.DEBUG, logger=name)
    fake_anthropic.queue(Reply("fine"), behaviour)
    # A short timeout only where the server hangs: on a loaded machine the first call (the
    # client's connection) may take longer than half a second, which is not the failure tested.
    timeout = 0.5 if isinstance(behaviour, Hang) else 60.0
    async with AnthropicModels(fake_anthropic.base_url, API_KEY, timeout) as models:
        model = models.model(NAME)
        await model.complete(ask())
        failure = await failure_of(model)

    assert fake_anthropic.message_requests[1].headers["authorization"] == f"Bearer {API_KEY}"
    assert any(r.name.startswith("anthropic") for r in caplog.records)  # the client did log
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
        pytest.param(API_KEY[:14] + "...", id="cut-short"),
        pytest.param("..." + API_KEY[-9:], id="only-its-end"),
        pytest.param(API_KEY[:12].swapcase() + "*****" + API_KEY[-8:], id="middle-elided"),
    ],
)
async def test_a_changed_or_cut_key_in_a_server_message_is_masked(
    fake_anthropic: FakeAnthropic, models: AnthropicModels, echoed: str
) -> None:
    fake_anthropic.queue(Status(401, f"invalid x-api-key: {echoed} (see docs)"))

    failure = await failure_of(models.model(NAME))

    assert "invalid x-api-key: " in failure.message
    assert "***" in failure.message
    assert "(see docs)" in failure.message  # the rest of the message is kept
    assert not _shows_part_of_the_key(failure.message), failure.message


async def test_a_server_message_is_quoted_on_one_short_line(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    fake_anthropic.queue(Status(400, "line one\nline\x00two\x1b[31m " + "x" * 5000))

    failure = await failure_of(models.model(NAME))

    assert failure.message.isprintable()
    assert "line one line two [31m xxx" in failure.message
    assert len(failure.message) < 400


async def test_a_tool_call_then_a_failure_leaves_no_partial_response(
    fake_anthropic: FakeAnthropic, models: AnthropicModels
) -> None:
    fake_anthropic.queue(Reply(tool_uses=[ToolUse("add")]), Status(529))
    model = models.model(NAME)

    first = await model.complete(ask())
    failure = await failure_of(model, ask(Message(Role.USER, "hello"), first.message()))

    assert len(first.tool_calls) == 1
    assert type(failure) is ModelUnavailable


async def test_credentials_in_the_base_url_never_appear(refused_url: str) -> None:
    url = refused_url.replace("http://", "http://user:pa55word@") + "/?key=pa55word"
    async with AnthropicModels(url, API_KEY, 5) as models:
        failure = await failure_of(models.model(NAME))

    assert type(failure) is ModelUnavailable
    assert "pa55word" not in failure.message
    assert failure.message.startswith(f"could not reach the model server at {refused_url}")
