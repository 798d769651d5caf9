"""Normalization (SPEC §3): defaults made explicit, integral floats as ints, document()."""

from __future__ import annotations

import json
from typing import Any

import pytest

from workload_domain.compiler import compile_definition
from workload_domain.definition import RetryPolicy, TaskSpec, WorkflowDefinition

DEFAULT_RETRY = {
    "max_attempts": 1,
    "initial_backoff_seconds": 1,
    "backoff_multiplier": 2,
    "max_backoff_seconds": 60,
}


def normalized_task(key: str, action: str = "mock", **fields: Any) -> dict[str, Any]:
    return {
        "key": key,
        "action": action,
        "input": {},
        "depends_on": [],
        "timeout_seconds": 300,
        "retry": dict(DEFAULT_RETRY),
        "queue": "default",
        "heartbeat_timeout_seconds": 30,
        "schedule_to_start_timeout_seconds": None,
        **fields,
    }


SPEC_EXAMPLE: dict[str, Any] = {
    "id": "document-pipeline",
    "description": "optional text",
    "tasks": [
        {"key": "fetch", "action": "mock", "input": {"sleep_ms": 50}},
        {
            "key": "clean",
            "action": "mock",
            "depends_on": ["fetch"],
            "timeout_seconds": 30,
            "retry": {
                "max_attempts": 3,
                "initial_backoff_seconds": 1,
                "backoff_multiplier": 2,
                "max_backoff_seconds": 60,
            },
        },
    ],
}


def test_minimal_definition_gets_every_default() -> None:
    compiled = compile_definition({"id": "wf", "tasks": [{"key": "a", "action": "mock"}]})
    assert compiled.document() == {
        "id": "wf",
        "description": "",
        "tasks": [normalized_task("a")],
    }


def test_spec_example_normalizes() -> None:
    compiled = compile_definition(SPEC_EXAMPLE)
    assert compiled.document() == {
        "id": "document-pipeline",
        "description": "optional text",
        "tasks": [
            normalized_task("fetch", input={"sleep_ms": 50}),
            normalized_task(
                "clean",
                depends_on=["fetch"],
                timeout_seconds=30,
                retry={**DEFAULT_RETRY, "max_attempts": 3},
            ),
        ],
    }


def test_partial_retry_gets_the_missing_defaults() -> None:
    raw = {"id": "wf", "tasks": [{"key": "a", "action": "x", "retry": {"max_attempts": 5}}]}
    [task] = compile_definition(raw).document()["tasks"]
    assert task["retry"] == {**DEFAULT_RETRY, "max_attempts": 5}


def test_empty_retry_object_is_the_default_policy() -> None:
    raw = {"id": "wf", "tasks": [{"key": "a", "action": "x", "retry": {}}]}
    assert compile_definition(raw).document()["tasks"][0]["retry"] == DEFAULT_RETRY


def test_default_numbers_are_ints_in_the_document() -> None:
    compiled = compile_definition({"id": "wf", "tasks": [{"key": "a", "action": "x"}]})
    [task] = compiled.document()["tasks"]
    assert type(task["timeout_seconds"]) is int
    assert all(type(v) is int for v in task["retry"].values())


def test_integral_floats_normalize_to_ints() -> None:
    raw = {
        "id": "wf",
        "tasks": [
            {
                "key": "a",
                "action": "x",
                "timeout_seconds": 30.0,
                "retry": {
                    "initial_backoff_seconds": 2.0,
                    "backoff_multiplier": 3.0,
                    "max_backoff_seconds": 60.0,
                },
            }
        ],
    }
    compiled = compile_definition(raw)
    [task] = compiled.document()["tasks"]
    assert task["timeout_seconds"] == 30
    assert type(task["timeout_seconds"]) is int
    assert task["retry"] == {
        "max_attempts": 1,
        "initial_backoff_seconds": 2,
        "backoff_multiplier": 3,
        "max_backoff_seconds": 60,
    }
    assert all(type(v) is int for v in task["retry"].values())
    assert b"30.0" not in compiled.canonical
    assert b'"timeout_seconds":30' in compiled.canonical


def test_non_integral_floats_are_kept() -> None:
    raw = {
        "id": "wf",
        "tasks": [
            {
                "key": "a",
                "action": "x",
                "timeout_seconds": 0.25,
                "retry": {
                    "initial_backoff_seconds": 0.5,
                    "backoff_multiplier": 1.5,
                    "max_backoff_seconds": 0.75,
                },
            }
        ],
    }
    [task] = compile_definition(raw).document()["tasks"]
    assert task["timeout_seconds"] == 0.25
    assert task["retry"] == {
        "max_attempts": 1,
        "initial_backoff_seconds": 0.5,
        "backoff_multiplier": 1.5,
        "max_backoff_seconds": 0.75,
    }


def test_negative_zero_backoff_normalizes_to_zero() -> None:
    retry = {"initial_backoff_seconds": -0.0, "max_backoff_seconds": 0}
    compiled = compile_definition(
        {"id": "wf", "tasks": [{"key": "a", "action": "x", "retry": retry}]}
    )
    assert b'"initial_backoff_seconds":0,' in compiled.canonical


def test_document_is_the_canonical_json() -> None:
    compiled = compile_definition(SPEC_EXAMPLE)
    assert compiled.document() == json.loads(compiled.canonical)
    assert compiled.canonical == json.dumps(
        compiled.document(), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")


def test_document_returns_a_fresh_copy() -> None:
    compiled = compile_definition(SPEC_EXAMPLE)
    first = compiled.document()
    first["tasks"][0]["input"]["sleep_ms"] = 999
    first["id"] = "changed"
    assert compiled.document()["id"] == "document-pipeline"
    assert compiled.document()["tasks"][0]["input"] == {"sleep_ms": 50}


def test_compiling_does_not_modify_the_raw_definition() -> None:
    raw = json.loads(json.dumps(SPEC_EXAMPLE))
    compile_definition(raw)
    compile_definition(raw, workflow_id="document-pipeline")
    assert raw == SPEC_EXAMPLE


def test_recompiling_the_document_is_a_fixed_point() -> None:
    compiled = compile_definition(SPEC_EXAMPLE)
    again = compile_definition(compiled.document())
    assert again.canonical == compiled.canonical
    assert again.definition_hash == compiled.definition_hash


def test_definition_model_holds_the_normalized_values() -> None:
    compiled = compile_definition(SPEC_EXAMPLE)
    assert isinstance(compiled.definition, WorkflowDefinition)
    assert compiled.workflow_id == "document-pipeline"
    assert compiled.definition.description == "optional text"
    clean = compiled.task("clean")
    assert isinstance(clean, TaskSpec)
    assert clean.key == "clean"
    assert clean.depends_on == ["fetch"]
    assert clean.timeout_seconds == 30
    assert clean.retry == RetryPolicy(max_attempts=3)
    fetch = compiled.task("fetch")
    assert fetch.input == {"sleep_ms": 50}
    assert fetch.timeout_seconds == 300
    assert fetch.retry == RetryPolicy()
    assert list(compiled.tasks) == [fetch, clean]


def test_unknown_task_key_lookup_raises_key_error() -> None:
    compiled = compile_definition(SPEC_EXAMPLE)
    with pytest.raises(KeyError):
        compiled.task("nope")


def test_input_is_kept_as_given() -> None:
    value = {"b": [1, 2.5, None, True, {"z": "é"}], "a": {}}
    raw = {"id": "wf", "tasks": [{"key": "a", "action": "x", "input": value}]}
    assert compile_definition(raw).document()["tasks"][0]["input"] == value


# --- workflow_id argument ---------------------------------------------------------------------


def test_body_without_id_takes_the_argument() -> None:
    body = {"tasks": [{"key": "a", "action": "x"}]}
    compiled = compile_definition(body, workflow_id="wf")
    assert compiled.workflow_id == "wf"
    assert compiled.document()["id"] == "wf"
    assert compiled.definition_hash == compile_definition({"id": "wf", **body}).definition_hash
    assert "id" not in body


def test_body_with_the_same_id_is_accepted() -> None:
    body = {"id": "wf", "tasks": [{"key": "a", "action": "x"}]}
    assert compile_definition(body, workflow_id="wf").workflow_id == "wf"
