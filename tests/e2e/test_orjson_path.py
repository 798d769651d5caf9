"""JSON by orjson (ADR 0031): the same bytes and the same problems as the stdlib gave.

Responses are rendered by orjson where it writes what ``json.dumps`` wrote, and by the stdlib
where it does not (an integer beyond 64 bits, a key that is not a string); a body's lone
surrogates are found by orjson's encoder. Every hostile body still gets the 400 it got before,
over real HTTP, never a 500.
"""

from __future__ import annotations

import itertools
import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from starlette.responses import JSONResponse as StdlibJSONResponse

from tests.plugins.live_api import LiveApi
from workload_api.jsonbody import parse_json
from workload_api.jsonresponse import JSONResponse
from workload_api.problems import HttpProblem
from workload_domain.jsonvalues import (
    MAX_JSON_DEPTH,
    MAX_PROBLEMS,
    DuplicateKey,
    json_problems,
    strict_loads,
)

V1 = "/api/v1"
_keys = itertools.count()

SAME_BYTES: dict[str, Any] = {
    "empty-object": {},
    "nested": {"a": [1, 2, {"b": None, "c": True, "d": False}], "e": {"f": "g"}},
    "non-ascii": {"text": "naïve café ✓ 日本 \u2028 \x7f 😀"},
    "escapes": {"text": 'quote " backslash \\ newline \n tab \t nul \u0000 bell \x07'},
    "int64-max": {"n": 2**63 - 1},
    "int64-min": {"n": -(2**63)},
    "uint64-max": {"n": 2**64 - 1},
    "beyond-64-bits": {"n": 2**64, "m": -(2**63) - 1, "big": 10**40},
    "non-str-keys": {1: "a", 2.5: "b", None: "c", False: "d"},
    "floats": [0.1, 1.5, -0.0, 1e20, 1.5e300, 123456789.123, 5e-324],
    "tuple": {"t": (1, 2)},
    "deep-200": json.loads('{"n": ' * 200 + "1" + "}" * 200),
    "deep-300-beyond-orjson": json.loads("[" * 300 + "]" * 300),
}


@pytest.mark.parametrize("content", SAME_BYTES.values(), ids=SAME_BYTES.keys())
def test_a_response_has_the_bytes_the_stdlib_wrote(content: Any) -> None:
    assert JSONResponse(content).body == StdlibJSONResponse(content).body


def test_a_small_exponent_is_the_same_number() -> None:
    """The one difference: orjson writes ``1e-7`` where the stdlib wrote ``1e-07``."""
    content = {"small": [1e-7, 2.5e-10]}
    ours, theirs = bytes(JSONResponse(content).body), bytes(StdlibJSONResponse(content).body)
    assert ours == b'{"small":[1e-7,2.5e-10]}'
    assert json.loads(ours) == json.loads(theirs) == content


@pytest.mark.parametrize(
    "content",
    [
        pytest.param({"when": datetime(2026, 12, 1, tzinfo=UTC)}, id="datetime"),
        pytest.param({"set": {1}}, id="set"),
        pytest.param({"text": "\ud800"}, id="lone-surrogate"),
    ],
)
def test_what_the_stdlib_refused_is_refused_as_before(content: Any) -> None:
    with pytest.raises((ValueError, TypeError)) as theirs:
        StdlibJSONResponse(content)
    with pytest.raises(type(theirs.value)):
        JSONResponse(content)


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_a_non_finite_float_is_null_where_the_stdlib_raised(number: float) -> None:
    """No answer holds one (bodies and stored values are finite); if one did, it would be
    ``null`` rather than an error while the response is rendered (a 500)."""
    with pytest.raises(ValueError, match="JSON compliant"):
        StdlibJSONResponse({"n": number})
    assert JSONResponse({"n": number}).body == b'{"n":null}'


def _stdlib_parse_json(text: str) -> Any:
    """``parse_json`` as it was before orjson found the lone surrogates (the reference)."""
    try:
        value = strict_loads(text)
    except DuplicateKey as exc:
        raise HttpProblem(400, "invalid_json", str(exc)) from None
    except RecursionError:
        raise HttpProblem(400, "invalid_json", "the body is nested too deeply") from None
    except ValueError:
        raise HttpProblem(400, "invalid_json", "the body is not valid JSON") from None
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise HttpProblem(
            400, "invalid_json", "the body escapes a lone UTF-16 surrogate (not Unicode text)"
        ) from None
    if any("nesting" in p.message for p in json_problems(value, max_depth=MAX_JSON_DEPTH + 4)):
        raise HttpProblem(400, "invalid_json", "the body is nested too deeply")
    return value


HOSTILE_BODIES = {
    "beyond-64-bits": '{"n": 18446744073709551616, "m": -9223372036854775809}',
    "huge-integer": '{"n": ' + "9" * 4000 + "}",
    "beyond-64-bits-and-surrogate": '{"n": 18446744073709551616, "s": "\\ud800"}',
    "nan": '{"n": NaN}',
    "infinity": '{"n": Infinity}',
    "minus-infinity": '{"n": -Infinity}',
    "overflowing-float": '{"n": 1e400}',
    "lone-high-surrogate": '{"s": "\\ud800"}',
    "lone-low-surrogate": '{"s": "\\udfff"}',
    "surrogate-in-key": '{"\\udbff": 1}',
    "surrogate-deep-in-array": '{"a": [[[["ok", "\\udc00"]]]]}',
    "reversed-pair": '{"s": "\\ude00\\ud83d"}',
    "valid-pair": '{"s": "\\ud83d\\ude00"}',
    "deep-60": '{"n": ' * 60 + "1" + "}" * 60,
    "deep-80": '{"n": ' * 80 + "1" + "}" * 80,
    "deep-300-arrays": "{" + '"a": ' + "[" * 300 + "]" * 300 + "}",
    "deep-10000": "[" * 10_000 + "]" * 10_000,
    "duplicate-key": '{"a": 1, "a": 2}',
}


@pytest.mark.parametrize("text", HOSTILE_BODIES.values(), ids=HOSTILE_BODIES.keys())
def test_a_hostile_body_gets_the_problem_it_got_before(text: str) -> None:
    try:
        expected: Any = ("value", _stdlib_parse_json(text))
    except HttpProblem as problem:
        expected = ("problem", problem.status, problem.code, problem.detail)
    try:
        got: Any = ("value", parse_json(text))
    except HttpProblem as problem:
        got = ("problem", problem.status, problem.code, problem.detail)
    assert got == expected


def _create_run(live_api: LiveApi, body: bytes) -> Any:
    return live_api.operator.post(
        f"{V1}/workflows/fast/versions/1/runs",
        content=body,
        headers={"Content-Type": "application/json", "Idempotency-Key": f"k-{next(_keys)}"},
    )


@pytest.fixture
def workflow(live_api: LiveApi) -> LiveApi:
    created = live_api.operator.post(
        f"{V1}/workflows",
        json={"id": "fast", "tasks": [{"key": "a", "action": "mock"}]},
        headers={"Idempotency-Key": f"w-{next(_keys)}"},
    )
    assert created.status_code == 201, created.text
    return live_api


REFUSED_RUN_BODIES = {
    name: f'{{"input": {text}}}'.encode()
    for name, text in HOSTILE_BODIES.items()
    if name not in ("beyond-64-bits", "huge-integer", "valid-pair", "deep-60")
}


@pytest.mark.real_http
@pytest.mark.parametrize("body", REFUSED_RUN_BODIES.values(), ids=REFUSED_RUN_BODIES.keys())
def test_a_hostile_run_input_is_a_400_problem(workflow: LiveApi, body: bytes) -> None:
    response = _create_run(workflow, body)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] in {"invalid_json", "invalid_argument"}, response.text


@pytest.mark.real_http
def test_a_run_input_with_a_problem_in_each_string_is_answered_with_100(workflow: LiveApi) -> None:
    # 800 KB of strings holding U+0000 (JSONB cannot): the answer lists 100 problems, not a
    # body seven times the request's (5.6 MB before).
    body = json.dumps({"input": {"a": ["\u0000"] * 80_000}}).encode()
    response = _create_run(workflow, body)
    assert response.status_code == 400, response.text[:200]
    errors = response.json()["errors"]
    assert len(errors) == MAX_PROBLEMS
    assert all(e["message"] == "strings must not contain U+0000" for e in errors)
    assert len(response.content) < 64 * 1024


@pytest.mark.real_http
def test_integers_beyond_64_bits_go_in_and_come_back_exactly(workflow: LiveApi) -> None:
    """Rendered by the stdlib (orjson refuses them), in the answer and every later read."""
    values = {"above": 2**64, "below": -(2**63) - 1, "edge": 2**63 - 1, "big": 10**30}
    created = _create_run(workflow, json.dumps({"input": values}).encode())
    assert created.status_code == 202, created.text
    run = workflow.viewer.get(f"{V1}/runs/{created.json()['run_id']}")
    assert run.status_code == 200, run.text
    assert json.loads(run.content)["input"] == values
    for name, value in values.items():
        assert f'"{name}":{value}'.encode() in run.content, name
