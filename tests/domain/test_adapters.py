"""The rules every model adapter shares (``workload_domain.agent.adapters``), tested once."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workload_domain.agent.adapters import (
    MASK,
    MalformedAnswer,
    json_object,
    mask_secret,
    optional_string,
    safe_url,
    token_count,
)

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
    ],
)
def test_a_malformed_answer_says_what_is_wrong(check: Any, says: str) -> None:
    with pytest.raises(MalformedAnswer, match=says):
        check()
