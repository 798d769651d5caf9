"""The rules every model adapter shares (``workload_domain.agent.adapters``), tested once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workload_domain.agent.adapters import (
    DETAIL_LIMIT,
    MASK,
    MAX_TIMEOUT_SECONDS,
    MAX_TOKEN_COUNT,
    ClientHolder,
    MalformedAnswer,
    SharedClient,
    body_object,
    clean_detail,
    json_object,
    key_problem,
    mask_secret,
    model_name_of,
    not_an_answer,
    optional_string,
    safe_url,
    status_failure,
    timed_out,
    timeout_problem,
    token_count,
    unreachable,
    wrong_model,
)
from workload_domain.agent.llm import ModelRejected, ModelUnavailable

KEY = "sk-Abcdefghijklmnop0123456789"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Incorrect API key provided: {KEY}.", f"Incorrect API key provided: {MASK}."),
        (f"key {KEY.lower()} refused", f"key {MASK} refused"),
        (f"key {KEY.upper()} refused", f"key {MASK} refused"),
        ("key sk-Abcd…456789 refused", "key sk-Abcd…456789 refused"),  # runs shorter than 8
        ("key sk-Abcdefgh…3456789 refused", f"key {MASK}…3456789 refused"),
        (f"{KEY}{KEY}", MASK),
        ("", ""),
        ("nothing of it", "nothing of it"),
    ],
)
def test_every_run_of_eight_characters_of_the_key_is_masked(text: str, expected: str) -> None:
    assert mask_secret(text, KEY) == expected


def test_a_short_key_is_masked_where_it_occurs_whole_and_no_key_masks_nothing() -> None:
    assert mask_secret("a abc b ABC", "abc") == f"a {MASK} b {MASK}"
    assert mask_secret("a ab b", "abc") == "a ab b"
    assert mask_secret("sk-anything", "") == "sk-anything"


@given(
    st.text(max_size=60),
    st.text(st.characters(exclude_characters="*"), min_size=8, max_size=40),
)
def test_the_key_never_survives_masking(prefix: str, key: str) -> None:
    masked = mask_secret(f"{prefix}{key}{prefix}", key)
    assert key not in masked
    assert key.lower() not in masked.lower() or not key.isascii()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "https://user:secret@api.example.com:8443/v1?key=sk-1#frag",
            "https://api.example.com:8443/v1",
        ),
        ("http://[::1]:11434/v1", "http://[::1]:11434/v1"),
        ("http://host:99999/v1", "http://host/v1"),  # a port out of range is dropped, not raised
        ("http://host:port/v1", "http://host/v1"),
        ("not a url", "://not a url"),
    ],
)
def test_a_url_is_shown_without_user_info_query_or_fragment(url: str, shown: str) -> None:
    assert safe_url(url) == shown


def test_an_answer_s_shape_is_checked() -> None:
    assert json_object({"a": 1}, "the body") == {"a": 1}
    assert optional_string(None, "x") is None
    assert optional_string("s", "x") == "s"
    assert token_count({}, "input_tokens") == 0
    assert token_count({"input_tokens": 7}, "input_tokens") == 7
    assert token_count({"n": MAX_TOKEN_COUNT}, "n") == MAX_TOKEN_COUNT


@pytest.mark.parametrize(
    ("check", "says"),
    [
        (lambda: json_object([1], "the body"), "the body is not a JSON object"),
        (lambda: json_object(None, "usage"), "usage is not a JSON object"),
        (lambda: optional_string(3, "content"), "content is not a string"),
        (lambda: token_count({"n": True}, "n"), "usage.n is not a count"),
        (lambda: token_count({"n": -1}, "n"), "usage.n is not a count"),
        (lambda: token_count({"n": 1.5}, "n"), "usage.n is not a count"),
        (lambda: token_count({"n": "7"}, "n"), "usage.n is not a count"),
        # Summed into bigint columns: 2**63 would fail the store's write, again at each retry.
        (lambda: token_count({"n": 2**63}, "n"), "usage.n is more than any answer's"),
        (lambda: token_count({"n": 10**13}, "n"), "usage.n is more than any answer's"),
    ],
)
def test_a_malformed_answer_says_what_is_wrong(check: Any, says: str) -> None:
    with pytest.raises(MalformedAnswer, match=says):
        check()


URL = "https://user:pw@models.example/v1?token=t"


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("", "the API key must not be empty"),
        ("sk abc", "the API key must be printable ASCII without spaces"),
        ("sk-\u00e9", "the API key must be printable ASCII without spaces"),
        ("sk-\x00", "the API key must be printable ASCII without spaces"),
        ("x" * 10_000, None),
        (KEY, None),
    ],
    ids=["empty", "space", "non-ascii", "control", "long", "fine"],
)
def test_a_key_s_problem_is_named_without_the_key(key: str, problem: str | None) -> None:
    assert key_problem(key, "the API key") == problem


@pytest.mark.parametrize(
    ("seconds", "fine"),
    [
        (0.0, False),
        (-1.0, False),
        (float("nan"), False),
        (float("inf"), False),
        (MAX_TIMEOUT_SECONDS + 0.001, False),
        (MAX_TIMEOUT_SECONDS, True),
        (0.001, True),
    ],
)
def test_a_timeout_is_in_zero_to_an_hour(seconds: float, fine: bool) -> None:
    problem = timeout_problem(seconds, "T")
    assert problem == (None if fine else "T must be a number of seconds in (0, 3600]")


def test_a_server_s_detail_is_one_short_line_without_the_key() -> None:
    assert clean_detail(f"bad\n\tkey {KEY}\x00 here", KEY) == f"bad key {MASK} here"
    long = clean_detail("y" * 10_000, KEY)
    assert len(long) == DETAIL_LIMIT
    assert long.endswith("…")


@pytest.mark.parametrize(
    ("status", "detail", "kind", "message"),
    [
        (429, "slow down", ModelUnavailable, "is rate limiting (HTTP 429): slow down"),
        (500, None, ModelUnavailable, "failed (HTTP 500)"),
        (529, {"not": "text"}, ModelUnavailable, "failed (HTTP 529)"),
        (400, f"bad key {KEY}", ModelRejected, f"rejected the request (HTTP 400): bad key {MASK}"),
        (404, "   ", ModelRejected, "rejected the request (HTTP 404)"),
    ],
)
def test_an_http_status_is_a_failure_by_its_class(
    status: int, detail: object, kind: type[Exception], message: str
) -> None:
    failure = status_failure(URL, status, detail, KEY)
    assert type(failure) is kind
    assert str(failure) == f"the model server at https://models.example/v1 {message}"


def test_the_words_of_a_call_that_got_no_answer() -> None:
    assert str(timed_out(URL, 2.5)) == (
        "the model server at https://models.example/v1 did not answer within 2.5 s"
    )
    assert str(unreachable(URL, OSError(f"refused {KEY}"), KEY)) == (
        f"could not reach the model server at https://models.example/v1: refused {MASK}"
    )
    assert str(unreachable(URL, None, KEY)) == (
        "could not reach the model server at https://models.example/v1"
    )
    bad = not_an_answer(URL, "a message", MalformedAnswer("it has no content list"))
    assert isinstance(bad, ModelUnavailable)
    assert str(bad) == (
        "the model server at https://models.example/v1 answered 200 without a message: "
        "it has no content list"
    )


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"", "the body is not JSON"),
        (b"\xff\xfe", "the body is not JSON"),
        (b"[1]", "the body is not a JSON object"),
        (b'"text"', "the body is not a JSON object"),
        (b"{" * 100_000, "the body is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "the body is not JSON"),
        (b'{"usage": {"total": NaN}}', "the body is not JSON"),
        (b'{"a": Infinity}', "the body is not JSON"),
        (b'{"a": -Infinity}', "the body is not JSON"),
        (b'{"a": 1e400}', "the body is not JSON"),
        (b'{"id": "x", "id": "y"}', "the body is not JSON"),
    ],
    ids=[
        "empty",
        "not-utf8",
        "array",
        "string",
        "deeply-nested",
        "deeply-nested-closed",
        "nan",
        "infinity",
        "minus-infinity",
        "out-of-range",
        "duplicate-key",
    ],
)
def test_a_body_that_is_not_a_json_object_is_malformed(body: bytes, says: str) -> None:
    with pytest.raises(MalformedAnswer, match=says):
        body_object(body)


def test_a_body_that_is_a_json_object_is_read() -> None:
    assert body_object(b'{"a": [1, 2]}') == {"a": [1, 2]}


@pytest.mark.parametrize(
    "name",
    ["openai", "openai:", "openai:   ", "other:gpt-4o", "gpt-4o", "", ":gpt"],
)
def test_a_name_the_adapter_does_not_serve_is_rejected(name: str) -> None:
    with pytest.raises(ModelRejected, match=r"this one serves openai:<model-name>$"):
        model_name_of(name, serves=lambda prefix: prefix == "openai", wanted="openai")


def test_a_served_name_gives_the_provider_s_name_of_the_model() -> None:
    served = model_name_of("openai:llama3.1:8b", serves="openai".__eq__, wanted="openai")
    assert served == "llama3.1:8b"
    with pytest.raises(ModelRejected, match=r"^no model adapter serves 'xxxx"):
        model_name_of("x" * 1000, serves="openai".__eq__, wanted="openai")


class _Client:
    def __init__(self) -> None:
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1


class _Models(SharedClient[_Client]):
    def __init__(self) -> None:
        self._client = _Client()


class _Model(ClientHolder[_Client]):
    def __init__(self, client: _Client | None) -> None:
        self._owns_client = client is None
        self._client = _Client() if client is None else client


def test_the_endpoint_closes_its_client_and_a_model_only_its_own() -> None:
    # asyncio.run, not the anyio marker: the domain's own test session installs no anyio.
    async def scenario() -> None:
        async with _Models() as models:
            shared = _Model(models._client)
            await shared.aclose()
            assert models._client.closed == 0
        assert models._client.closed == 1
        own = _Model(None)
        await own.aclose()
        assert own._client.closed == 1

    asyncio.run(scenario())


def test_a_request_for_another_model_is_rejected_naming_both() -> None:
    assert wrong_model("gpt-4o", "gpt-4o", "openai:gpt-4o") is None
    wrong = wrong_model("x" * 500, "gpt-4o", "openai:gpt-4o")
    assert isinstance(wrong, ModelRejected)
    assert str(wrong) == f"a request for model {'x' * 100!r} was sent to openai:gpt-4o"
    assert wrong_model("", "gpt-4o", "m") is not None
