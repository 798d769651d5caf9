"""``model_settings``, named endpoints and the output schema in the agent's requests (SPEC §11).

The compiler validates ``model_settings`` (bounds, unknown keys) and refuses a model of an
endpoint the compiling server does not have; :func:`decide` puts the settings and the output
schema into every model request, and a step journaled before requests carried the schema still
replays (ADR 0027).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from workload_domain.agent.journal import StepKind, StepRecord, StepStatus
from workload_domain.agent.llm import ModelRequest, ModelSettings
from workload_domain.agent.loop import CallModel, Fail, decide
from workload_domain.agent.spec import parse_agent, unknown_endpoint
from workload_domain.compiler import compile_definition
from workload_domain.errors import InvalidDefinition
from workload_domain.jsonvalues import canonical_json, sha256_tag

AT = datetime(2026, 1, 1, tzinfo=UTC)
SCHEMA = {"type": "object", "required": ["answer"]}


def definition(**agent: Any) -> dict[str, Any]:
    return {
        "id": "wf",
        "tasks": [
            {"key": "a", "action": "agent", "input": {"model": "mock", "prompt": "p", **agent}}
        ],
    }


def problems(raw: dict[str, Any], endpoints: frozenset[str] | None = None) -> list[str]:
    with pytest.raises(InvalidDefinition) as caught:
        compile_definition(raw, endpoints=endpoints)
    return [p.path for p in caught.value.problems]


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"temperature": 0},
        {"temperature": 2},
        {"temperature": 1.5, "top_p": 1, "max_output_tokens": 1},
        {"top_p": 1e-9},
        {"max_output_tokens": 1_000_000},
    ],
    ids=["empty", "t-min", "t-max", "all", "p-tiny", "tokens-max"],
)
def test_model_settings_within_bounds_compile_as_written(settings: dict[str, Any]) -> None:
    compiled = compile_definition(definition(model_settings=settings))
    assert compiled.document()["tasks"][0]["input"]["model_settings"] == settings


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        pytest.param({"temperature": -0.01}, "temperature", id="t-negative"),
        pytest.param({"temperature": 2.0001}, "temperature", id="t-above"),
        pytest.param({"temperature": "1"}, "temperature", id="t-string"),
        pytest.param({"temperature": True}, "temperature", id="t-bool"),
        pytest.param({"max_output_tokens": 0}, "max_output_tokens", id="tokens-zero"),
        pytest.param({"max_output_tokens": 1_000_001}, "max_output_tokens", id="tokens-above"),
        pytest.param({"max_output_tokens": 1.5}, "max_output_tokens", id="tokens-fraction"),
        pytest.param({"max_output_tokens": 2**70}, "max_output_tokens", id="tokens-huge"),
        pytest.param({"max_output_tokens": -1}, "max_output_tokens", id="tokens-negative"),
        pytest.param({"top_p": 0}, "top_p", id="p-zero"),
        pytest.param({"top_p": 1.01}, "top_p", id="p-above"),
        pytest.param({"top_p": None}, None, id="p-null-is-unset"),
        pytest.param({"seed": 1}, "seed", id="unknown-key"),
        pytest.param({"temperature ": 1}, "temperature ", id="key-with-space"),
    ],
)
def test_model_settings_out_of_bounds_are_refused_with_their_path(
    settings: dict[str, Any], field: str | None
) -> None:
    raw = definition(model_settings=settings)
    if field is None:
        compile_definition(raw)
        return
    assert problems(raw) == [f"/tasks/0/input/model_settings/{field}"]


@pytest.mark.parametrize("value", [[], "hot", 1, None], ids=["list", "string", "number", "null"])
def test_model_settings_must_be_an_object(value: Any) -> None:
    assert problems(definition(model_settings=value)) == ["/tasks/0/input/model_settings"]


@pytest.mark.parametrize(
    "model",
    ["local:llama3.1:8b", "openai:gpt-4o", "a:x", "a-b_c:x", "z" * 32 + ":m"],
)
def test_an_endpoint_configured_here_is_accepted(model: str) -> None:
    endpoint = model.partition(":")[0]
    compile_definition(definition(model=model), endpoints=frozenset({endpoint}))


@pytest.mark.parametrize(
    ("model", "endpoints"),
    [
        ("local:m", frozenset()),
        ("local:m", frozenset({"openai"})),
        ("openai:gpt-4o", frozenset({"local"})),
        ("mock:m", frozenset({"local"})),
    ],
)
def test_an_unknown_endpoint_is_refused_at_the_model(model: str, endpoints: frozenset[str]) -> None:
    with pytest.raises(InvalidDefinition) as caught:
        compile_definition(definition(model=model), endpoints=endpoints)
    [problem] = caught.value.problems
    assert problem.path == "/tasks/0/input/model"
    assert f"no model endpoint named '{model.partition(':')[0]}'" in problem.message


@pytest.mark.parametrize(
    "model",
    ["Local:m", "1a:m", "a" * 33 + ":m", "local:", "local: m", ":m", "local", "mock ", "openai"],
)
def test_a_malformed_model_is_refused_once(model: str) -> None:
    # The pattern's problem only: the endpoint check does not pile a second one on.
    assert problems(definition(model=model), frozenset({"local"})) == ["/tasks/0/input/model"]


def test_mock_needs_no_endpoint_and_stored_versions_are_not_checked() -> None:
    compile_definition(definition(), endpoints=frozenset())
    compile_definition(definition(model="gone:m"))  # endpoints None: a stored version read back
    assert unknown_endpoint("gone:m", None) is None
    assert unknown_endpoint(42, frozenset()) is None


def _first(**agent: Any) -> CallModel:
    spec = parse_agent({"model": "openai:gpt-x", "prompt": "go", **agent})
    move = decide(spec, "go", [], elapsed_seconds=0)
    assert isinstance(move, CallModel)
    return move


def test_requests_carry_the_settings_and_the_output_schema() -> None:
    move = _first(
        model_settings={"temperature": 0.5, "max_output_tokens": 64}, output_schema=SCHEMA
    )
    assert move.request.model == "gpt-x"
    assert move.request.settings == ModelSettings(temperature=0.5, max_output_tokens=64)
    assert move.request.output_schema == SCHEMA
    assert move.journaled["settings"] == {"temperature": 0.5, "max_output_tokens": 64}
    assert move.request_hash == sha256_tag(canonical_json(move.request.to_json()))


def test_a_request_without_them_is_journaled_and_hashed_as_before() -> None:
    move = _first()
    assert "settings" not in move.journaled
    assert set(move.request.to_json()) == {"model", "messages", "tools"}


def _step(move: CallModel, request_hash: str) -> StepRecord:
    return StepRecord(
        "r",
        "a",
        1,
        sequence=move.sequence,
        kind=StepKind.MODEL_CALL,
        status=StepStatus.RUNNING,
        request=move.journaled,
        request_hash=request_hash,
        started_at=AT,
    )


def test_a_step_journaled_before_requests_carried_the_schema_replays_as_it_was_made() -> None:
    move = _first(output_schema=SCHEMA)
    spec = parse_agent({"model": "openai:gpt-x", "prompt": "go", "output_schema": SCHEMA})
    earlier = ModelRequest(move.request.model, move.request.messages, move.request.tools)
    earlier_hash = sha256_tag(canonical_json(earlier.to_json()))
    assert earlier_hash != move.request_hash

    again = decide(spec, "go", [_step(move, earlier_hash)], elapsed_seconds=0)
    assert isinstance(again, CallModel)
    assert again.again
    assert again.request == earlier  # the request that step made, made again
    assert again.request_hash == earlier_hash

    resumed = decide(spec, "go", [_step(move, move.request_hash)], elapsed_seconds=0)
    assert isinstance(resumed, CallModel)
    assert resumed.request == move.request

    other = decide(spec, "go", [_step(move, "sha256:" + "0" * 64)], elapsed_seconds=0)
    assert isinstance(other, Fail)
    assert other.error.code == "journal_mismatch"
