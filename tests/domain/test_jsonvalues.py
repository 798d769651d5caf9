"""JSON values: canonical encoding, JSON Pointers, the checks JSONB imposes."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import pytest
from hypothesis import given, settings

from tests.json_values import json_values
from workload_domain.errors import Problem
from workload_domain.jsonvalues import (
    MAX_JSON_DEPTH,
    MAX_PROBLEMS,
    canonical_json,
    json_problems,
    jsonb_value,
    pointer,
    sha256_tag,
    storable,
)

# --- canonical_json ---------------------------------------------------------------------------


def test_canonical_json_exact_bytes() -> None:
    value = {"b": 1, "a": [1, 2.5, {"d": "é", "c": None}], "é": True, "A": False}
    assert canonical_json(value) == (
        b'{"A":false,"a":[1,2.5,{"c":null,"d":"\xc3\xa9"}],"b":1,"\xc3\xa9":true}'
    )


def test_canonical_json_scalars() -> None:
    assert canonical_json(None) == b"null"
    assert canonical_json(0) == b"0"
    assert canonical_json(-1.5) == b"-1.5"
    assert canonical_json('a"b\\c\n') == b'"a\\"b\\\\c\\n"'
    assert canonical_json([]) == b"[]"
    assert canonical_json({}) == b"{}"


def test_canonical_json_does_not_escape_non_ascii() -> None:
    assert canonical_json({"k": "日本 ✓ 😀"}) == '{"k":"日本 ✓ 😀"}'.encode()


def test_canonical_json_escapes_control_characters() -> None:
    assert canonical_json("\x01") == b'"\\u0001"'


def test_canonical_json_sorts_nested_keys_regardless_of_insertion_order() -> None:
    one = {"z": {"y": 1, "x": 2}, "a": 0}
    two = {"a": 0, "z": {"x": 2, "y": 1}}
    assert canonical_json(one) == canonical_json(two) == b'{"a":0,"z":{"x":2,"y":1}}'


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, {"a": [math.nan]}])
def test_canonical_json_refuses_non_finite_numbers(value: Any) -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        canonical_json(value)


def test_sha256_tag() -> None:
    assert sha256_tag(b"") == (
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert sha256_tag(b"abc") == "sha256:" + hashlib.sha256(b"abc").hexdigest()


# --- pointer ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ((), ""),
        (("",), "/"),
        (("a",), "/a"),
        (("tasks", 0, "retry", "max_attempts"), "/tasks/0/retry/max_attempts"),
        (("a/b",), "/a~1b"),
        (("c~d",), "/c~0d"),
        (("~1",), "/~01"),
        (("~/",), "/~0~1"),
        (("/~",), "/~1~0"),
        (("a b", "é"), "/a b/é"),
        ((10, 2), "/10/2"),
    ],
)
def test_pointer(parts: tuple[str | int, ...], expected: str) -> None:
    assert pointer(parts) == expected


def test_pointer_accepts_any_iterable() -> None:
    parts: list[str | int] = ["x", 1]
    assert pointer(iter(parts)) == "/x/1"
    assert pointer(p for p in parts) == "/x/1"


# --- json_problems ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -(2**70),
        1.5,
        "",
        "é",
        [],
        {},
        {"a": [1, {"b": None, "c": "x"}], "": [[]]},
        (1, 2),
    ],
)
def test_storable_values_have_no_problems(value: Any) -> None:
    assert json_problems(value) == []


def test_nan_and_infinities() -> None:
    value = {"a": math.nan, "b": [1, math.inf], "c": {"d": -math.inf}}
    assert json_problems(value) == [
        Problem("/a", "numbers must be finite"),
        Problem("/b/1", "numbers must be finite"),
        Problem("/c/d", "numbers must be finite"),
    ]


def test_at_most_max_problems_are_listed() -> None:
    many = json_problems({"a": [math.nan] * 1000, "b": "\x00"})
    assert len(many) == MAX_PROBLEMS
    assert all(p.message == "numbers must be finite" or "U+0000" in p.message for p in many)
    assert len(json_problems([math.nan] * 5, max_problems=3)) == 3
    assert json_problems([math.nan] * 5, max_problems=10) == [
        Problem(f"/{i}", "numbers must be finite") for i in range(5)
    ]


def test_non_finite_root() -> None:
    assert json_problems(math.nan) == [Problem("", "numbers must be finite")]


def test_non_string_keys_point_at_the_object() -> None:
    assert json_problems({1: "a", "b": {2.5: 3, None: 4}}) == [
        Problem("", "object keys must be strings"),
        Problem("/b", "object keys must be strings"),
        Problem("/b", "object keys must be strings"),
    ]


def test_nul_in_strings_and_keys() -> None:
    value = {"s": "a\x00", "k\x00": 1, "l": ["\x00"]}
    assert json_problems(value) == [
        Problem("/k\x00", "keys must not contain U+0000"),
        Problem("/l/0", "strings must not contain U+0000"),
        Problem("/s", "strings must not contain U+0000"),
    ]


def test_nul_key_with_nul_value_reports_both() -> None:
    assert json_problems({"\x00": "\x00"}) == [
        Problem("/\x00", "keys must not contain U+0000"),
        Problem("/\x00", "strings must not contain U+0000"),
    ]


def test_lone_surrogates_in_strings_and_keys() -> None:
    value = {"s": "\ud800", "\udfff": "ok", "l": ["ok", "é\udc00"]}
    assert json_problems(value) == [
        Problem("/l/1", "strings must be valid Unicode (no lone surrogates)"),
        Problem("/s", "strings must be valid Unicode (no lone surrogates)"),
        Problem("/\udfff", "keys must be valid Unicode (no lone surrogates)"),
    ]


def test_surrogate_pairs_written_as_characters_are_fine() -> None:
    assert json_problems({"emoji": "😀", "😀": "日本"}) == []


def test_nul_at_the_root() -> None:
    assert json_problems("\x00") == [Problem("", "strings must not contain U+0000")]


def test_problem_paths_escape_tilde_and_slash() -> None:
    assert json_problems({"a/b": {"c~d": "\x00"}}) == [
        Problem("/a~1b/c~0d", "strings must not contain U+0000")
    ]


def test_path_prefix() -> None:
    assert json_problems({"x": math.inf}, ("tasks", 3, "input")) == [
        Problem("/tasks/3/input/x", "numbers must be finite")
    ]


@pytest.mark.parametrize(
    ("value", "type_name"),
    [(object(), "object"), ({1, 2}, "set"), (b"x", "bytes"), (1j, "complex")],
)
def test_non_json_types(value: Any, type_name: str) -> None:
    assert json_problems({"v": [value]}) == [Problem("/v/0", f"{type_name} is not a JSON value")]


def nested_lists(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


def nested_objects(levels: int) -> Any:
    value: Any = {}
    for _ in range(levels - 1):
        value = {"k": value}
    return value


def test_max_depth_constant() -> None:
    assert MAX_JSON_DEPTH == 64


@pytest.mark.parametrize("nested", [nested_lists, nested_objects])
def test_64_levels_are_accepted(nested: Any) -> None:
    assert json_problems(nested(64)) == []


def test_65_levels_of_lists_are_rejected() -> None:
    assert json_problems(nested_lists(65)) == [
        Problem("/0" * 64, "nesting is deeper than 64 levels")
    ]


def test_65_levels_of_objects_are_rejected() -> None:
    assert json_problems(nested_objects(65)) == [
        Problem("/k" * 64, "nesting is deeper than 64 levels")
    ]


def test_custom_max_depth() -> None:
    assert json_problems([[1]], max_depth=2) == []
    assert json_problems([[[1]]], max_depth=2) == [
        Problem("/0/0", "nesting is deeper than 2 levels")
    ]


def test_extremely_deep_lists_do_not_hit_the_recursion_limit() -> None:
    assert json_problems(nested_lists(100_000)) == [
        Problem("/0" * 64, "nesting is deeper than 64 levels")
    ]


def test_extremely_deep_objects_do_not_hit_the_recursion_limit() -> None:
    assert json_problems({"x": nested_objects(100_000)}) == [
        Problem("/x" + "/k" * 63, "nesting is deeper than 64 levels")
    ]


def test_every_problem_is_reported() -> None:
    value = {"a": [math.nan, "\x00", {7: 1}], "b": nested_lists(70), "c": object()}
    assert sorted(json_problems(value), key=lambda p: p.path) == [
        Problem("/a/0", "numbers must be finite"),
        Problem("/a/1", "strings must not contain U+0000"),
        Problem("/a/2", "object keys must be strings"),
        Problem("/b" + "/0" * 63, "nesting is deeper than 64 levels"),
        Problem("/c", "object is not a JSON value"),
    ]


# --- jsonb_value ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1e20, "100000000000000000000"),
        (-1e16, "-10000000000000000"),
        (1.2345678901234568e20, "123456789012345680000"),  # the decimal its repr names
        (1e22, "10000000000000000000000"),
        (-0.0, "0.0"),
        (0.0, "0.0"),
        (5.0, "5.0"),
        (9999999999999998.0, "9999999999999998.0"),  # no exponent: JSONB keeps it as it is
        (1e-7, "1e-07"),  # JSONB writes 0.0000001, which parses back to this very float
        (5e-324, "5e-324"),
        (0.30000000000000004, "0.30000000000000004"),
        (2**64 + 1, "18446744073709551617"),
        (-(2**70), "-1180591620717411303424"),
        (True, "true"),
        (None, "null"),
        ("1e20", '"1e20"'),
        (
            {"a": [1e20, {"b": -0.0}], "c": (1.5,)},
            '{"a":[100000000000000000000,{"b":0.0}],"c":[1.5]}',
        ),
    ],
)
def test_jsonb_value_is_the_form_jsonb_gives_back(value: Any, expected: str) -> None:
    assert canonical_json(jsonb_value(value)).decode() == expected


def test_jsonb_value_copies() -> None:
    value = {"a": [1.5, {"b": 1}]}
    normalized = jsonb_value(value)
    assert normalized == value
    normalized["a"][1]["b"] = 2
    assert value == {"a": [1.5, {"b": 1}]}


def _numbers_of(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [n for child in value.values() for n in _numbers_of(child)]
    if isinstance(value, list | tuple):
        return [n for child in value for n in _numbers_of(child)]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [value]
    return []


@settings(max_examples=300, deadline=None, derandomize=True)
@given(value=json_values)
def test_jsonb_value_keeps_every_number_and_is_its_own_form(value: Any) -> None:
    normalized = jsonb_value(value)
    assert jsonb_value(normalized) == normalized
    assert canonical_json(jsonb_value(normalized)) == canonical_json(normalized)
    # Each number is the same number: an integer stands for the float it came from exactly
    # (read back as a float, it is that float), and integers are untouched.
    for before, after in zip(_numbers_of(value), _numbers_of(normalized), strict=True):
        if isinstance(before, float):
            assert float(after) == before
            assert isinstance(after, float) or "e+" in repr(before)
        else:
            assert after == before
            assert type(after) is type(before)
    # No float left that JSONB would give back otherwise: none written with a positive
    # exponent (JSONB returns an integer), no negative zero (JSONB returns 0.0).
    for number in _numbers_of(normalized):
        if isinstance(number, float):
            assert "e+" not in repr(number)
            assert math.copysign(1.0, number) > 0 or number != 0
    assert json_problems(normalized) == json_problems(value) == []


def test_storable_model_output_takes_the_form_jsonb_gives_back() -> None:
    # A model's tool-call arguments are digested before storage (an approval's
    # arguments_digest): the digest must be that of the arguments every read returns.
    arguments = {"big": 1e20, "zero": -0.0, "small": 1e-7, "bad": math.nan, "text": "a\u0000"}
    cleaned = storable(arguments)
    assert cleaned == {"big": 10**20, "zero": 0.0, "small": 1e-7, "bad": None, "text": "a\ufffd"}
    assert type(cleaned["big"]) is int
    assert storable(cleaned) == cleaned
    assert canonical_json(jsonb_value(cleaned)) == canonical_json(cleaned)
