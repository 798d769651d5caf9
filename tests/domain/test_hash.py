"""definition_hash (SPEC §3): sha256 of the canonical JSON of the normalized definition."""

from __future__ import annotations

import copy
import hashlib
import json
import random
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workload_domain.compiler import compile_definition

DEFAULT_RETRY = {
    "max_attempts": 1,
    "initial_backoff_seconds": 1,
    "backoff_multiplier": 2,
    "max_backoff_seconds": 60,
}


def expected_hash(document: dict[str, Any]) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def hash_of(raw: dict[str, Any]) -> str:
    return compile_definition(raw).definition_hash


BASE: dict[str, Any] = {
    "id": "pipeline",
    "description": "héllo ✓",
    "tasks": [
        {"key": "fetch", "action": "mock", "input": {"sleep_ms": 50, "tags": ["a", "b"]}},
        {"key": "side", "action": "mock"},
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


def test_hash_format() -> None:
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", hash_of(BASE))


REMOTE_DEFAULTS: dict[str, Any] = {
    # SPEC §3/§10: every task's queue and lease settings are normalized explicitly too.
    "queue": "default",
    "heartbeat_timeout_seconds": 30,
    "schedule_to_start_timeout_seconds": None,
}


def test_hash_is_sha256_of_the_independently_normalized_document() -> None:
    normalized = {
        "id": "pipeline",
        "description": "héllo ✓",
        "tasks": [
            {
                "key": "fetch",
                "action": "mock",
                "input": {"sleep_ms": 50, "tags": ["a", "b"]},
                "depends_on": [],
                "timeout_seconds": 300,
                "retry": DEFAULT_RETRY,
                **REMOTE_DEFAULTS,
            },
            {
                "key": "side",
                "action": "mock",
                "input": {},
                "depends_on": [],
                "timeout_seconds": 300,
                "retry": DEFAULT_RETRY,
                **REMOTE_DEFAULTS,
            },
            {
                "key": "clean",
                "action": "mock",
                "input": {},
                "depends_on": ["fetch"],
                "timeout_seconds": 30,
                "retry": {**DEFAULT_RETRY, "max_attempts": 3},
                **REMOTE_DEFAULTS,
            },
        ],
    }
    compiled = compile_definition(BASE)
    assert compiled.definition_hash == expected_hash(normalized)
    assert compiled.canonical == json.dumps(
        normalized, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")
    # UTF-8, not \u escapes; no spaces.
    assert "héllo ✓".encode() in compiled.canonical
    assert b"\\u" not in compiled.canonical
    assert b", " not in compiled.canonical
    assert b": " not in compiled.canonical


def test_minimal_definition_hash() -> None:
    normalized = {
        "description": "",
        "id": "wf",
        "tasks": [
            {
                "action": "x",
                "depends_on": [],
                "input": {},
                "key": "a",
                "retry": DEFAULT_RETRY,
                "timeout_seconds": 300,
                **REMOTE_DEFAULTS,
            }
        ],
    }
    assert hash_of({"id": "wf", "tasks": [{"key": "a", "action": "x"}]}) == expected_hash(
        normalized
    )


def test_hash_is_deterministic() -> None:
    assert hash_of(BASE) == hash_of(copy.deepcopy(BASE))


def reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(v) for v in value]
    return value


def test_reversed_key_order_everywhere_gives_the_same_hash() -> None:
    reordered = reversed_keys(BASE)
    assert list(reordered) == ["tasks", "description", "id"]
    assert list(reordered["tasks"][2]["retry"]) == list(reversed(list(BASE["tasks"][2]["retry"])))
    assert hash_of(reordered) == hash_of(BASE)


def test_explicit_defaults_give_the_same_hash() -> None:
    explicit = copy.deepcopy(BASE)
    for task in explicit["tasks"]:
        task.setdefault("input", {})
        task.setdefault("depends_on", [])
        task.setdefault("timeout_seconds", 300)
        task["retry"] = {**DEFAULT_RETRY, **task.get("retry", {})}
    assert hash_of(explicit) == hash_of(BASE)
    minimal = {"id": "wf", "tasks": [{"key": "a", "action": "x"}]}
    assert hash_of({**minimal, "description": ""}) == hash_of(minimal)


def test_integral_floats_give_the_same_hash_as_ints() -> None:
    floats = copy.deepcopy(BASE)
    floats["tasks"][2]["timeout_seconds"] = 30.0
    floats["tasks"][2]["retry"] = {
        "max_attempts": 3,
        "initial_backoff_seconds": 1.0,
        "backoff_multiplier": 2.0,
        "max_backoff_seconds": 60.0,
    }
    floats["tasks"][0]["timeout_seconds"] = 300.0
    assert hash_of(floats) == hash_of(BASE)


def test_partial_retry_equals_full_default_retry() -> None:
    partial = {"id": "wf", "tasks": [{"key": "a", "action": "x", "retry": {"max_attempts": 1}}]}
    empty = {"id": "wf", "tasks": [{"key": "a", "action": "x", "retry": {}}]}
    none = {"id": "wf", "tasks": [{"key": "a", "action": "x"}]}
    assert hash_of(partial) == hash_of(empty) == hash_of(none)


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(raw: dict[str, Any]) -> None:
        target: Any = raw
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return change


def _rename_fetch(raw: dict[str, Any]) -> None:
    raw["tasks"][0]["key"] = "fetch2"
    raw["tasks"][2]["depends_on"] = ["fetch2"]


def _swap_independent_tasks(raw: dict[str, Any]) -> None:
    raw["tasks"][0], raw["tasks"][1] = raw["tasks"][1], raw["tasks"][0]


SEMANTIC_CHANGES: dict[str, Callable[[dict[str, Any]], None]] = {
    "id": _set(("id",), "pipeline2"),
    "description": _set(("description",), "other"),
    "description-empty": _set(("description",), ""),
    "task-key": _set(("tasks", 1, "key"), "side2"),
    "task-key-and-dependency": _rename_fetch,
    "action": _set(("tasks", 1, "action"), "other"),
    "input-value": _set(("tasks", 0, "input", "sleep_ms"), 51),
    "input-value-type": _set(("tasks", 0, "input", "sleep_ms"), "50"),
    "input-key": _set(("tasks", 0, "input"), {"sleep": 50, "tags": ["a", "b"]}),
    "input-list-order": _set(("tasks", 0, "input", "tags"), ["b", "a"]),
    "input-added": _set(("tasks", 1, "input"), {"x": None}),
    "dependency-added": _set(("tasks", 1, "depends_on"), ["fetch"]),
    "dependency-removed": _set(("tasks", 2, "depends_on"), []),
    "dependency-changed": _set(("tasks", 2, "depends_on"), ["side"]),
    "timeout": _set(("tasks", 2, "timeout_seconds"), 31),
    "timeout-fraction": _set(("tasks", 2, "timeout_seconds"), 30.5),
    "timeout-default-made-different": _set(("tasks", 1, "timeout_seconds"), 299),
    "max_attempts": _set(("tasks", 2, "retry", "max_attempts"), 4),
    "initial_backoff": _set(("tasks", 2, "retry", "initial_backoff_seconds"), 2),
    "multiplier": _set(("tasks", 2, "retry", "backoff_multiplier"), 3),
    "max_backoff": _set(("tasks", 2, "retry", "max_backoff_seconds"), 61),
    "task-order": _swap_independent_tasks,
}


@pytest.mark.parametrize("change", SEMANTIC_CHANGES.values(), ids=SEMANTIC_CHANGES.keys())
def test_semantic_change_changes_the_hash(change: Callable[[dict[str, Any]], None]) -> None:
    changed = copy.deepcopy(BASE)
    change(changed)
    assert compile_definition(changed).definition_hash != hash_of(BASE)


def test_all_semantic_changes_give_distinct_hashes() -> None:
    hashes = {hash_of(BASE)}
    for change in SEMANTIC_CHANGES.values():
        changed = copy.deepcopy(BASE)
        change(changed)
        hashes.add(hash_of(changed))
    assert len(hashes) == len(SEMANTIC_CHANGES) + 1


# --- properties -------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.text(max_size=5).filter(lambda s: "\x00" not in s), children, max_size=3
        )
    ),
    max_leaves=10,
)
keys = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,8}", fullmatch=True)


@st.composite
def definitions(draw: st.DrawFn) -> dict[str, Any]:
    """A valid definition in which every optional field is present or not, at random."""
    task_keys = draw(st.lists(keys, min_size=1, max_size=6, unique=True))
    tasks = []
    for i, key in enumerate(task_keys):
        task: dict[str, Any] = {"key": key, "action": draw(st.sampled_from(["mock", "shell", "x"]))}
        if draw(st.booleans()):
            task["input"] = draw(
                st.dictionaries(st.sampled_from("abcdef"), json_values, max_size=4)
            )
        if i and draw(st.booleans()):
            earlier = task_keys[:i]
            task["depends_on"] = draw(st.lists(st.sampled_from(earlier), unique=True, max_size=3))
        if draw(st.booleans()):
            task["timeout_seconds"] = draw(st.sampled_from([1, 30, 30.0, 0.5, 86400, 300]))
        if draw(st.booleans()):
            retry: dict[str, Any] = {}
            if draw(st.booleans()):
                retry["max_attempts"] = draw(st.integers(1, 100))
            if draw(st.booleans()):
                retry["backoff_multiplier"] = draw(st.sampled_from([1, 1.5, 2, 2.0, 10]))
            if draw(st.booleans()):
                retry["initial_backoff_seconds"] = draw(st.sampled_from([0, 0.5, 1, 1.0]))
                retry["max_backoff_seconds"] = draw(st.sampled_from([1, 60, 60.0, 3600]))
            task["retry"] = retry
        tasks.append(task)
    raw: dict[str, Any] = {"id": draw(st.from_regex(r"[a-z0-9][a-z0-9._-]{0,8}", fullmatch=True))}
    if draw(st.booleans()):
        raw["description"] = draw(st.text(max_size=10).filter(lambda s: "\x00" not in s))
    raw["tasks"] = tasks
    return raw


def shuffled_keys(value: Any, rnd: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: shuffled_keys(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [shuffled_keys(v, rnd) for v in value]
    return value


def with_explicit_defaults(raw: dict[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(raw)
    result.setdefault("description", "")
    for task in result["tasks"]:
        task.setdefault("input", {})
        task.setdefault("depends_on", [])
        task.setdefault("timeout_seconds", 300)
        task["retry"] = {**DEFAULT_RETRY, **task.get("retry", {})}
    return result


@settings(max_examples=50, deadline=None, derandomize=True)
@given(raw=definitions(), rnd=st.randoms(use_true_random=False))
def test_key_order_never_changes_the_hash(raw: dict[str, Any], rnd: random.Random) -> None:
    compiled = compile_definition(raw)
    again = compile_definition(shuffled_keys(raw, rnd))
    assert again.definition_hash == compiled.definition_hash
    assert again.canonical == compiled.canonical


@settings(max_examples=50, deadline=None, derandomize=True)
@given(raw=definitions())
def test_explicit_defaults_never_change_the_hash(raw: dict[str, Any]) -> None:
    assert hash_of(with_explicit_defaults(raw)) == hash_of(raw)


@settings(max_examples=50, deadline=None, derandomize=True)
@given(raw=definitions())
def test_hash_is_sha256_of_canonical_document(raw: dict[str, Any]) -> None:
    compiled = compile_definition(raw)
    document = compiled.document()
    assert compiled.definition_hash == expected_hash(document)
    assert compile_definition(document).definition_hash == compiled.definition_hash


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        (1e20, 100000000000000000000),
        (-1e16, -10000000000000000),
        (1.2345678901234568e20, 123456789012345680000),
        (-0.0, 0.0),
        ([1e300, {"z": -0.0}], [int("1" + "0" * 300), {"z": 0.0}]),
    ],
)
def test_numbers_are_hashed_in_the_form_jsonb_stores(written: Any, stored: Any) -> None:
    """SPEC §3: the hash is of the definition every read returns, and JSONB's ``numeric`` has
    no exponent and no negative zero: ``1e20`` is stored (and read back) as an integer."""
    raw = {"id": "n", "tasks": [{"key": "a", "action": "x", "input": {"v": written}}]}
    compiled = compile_definition(raw)
    assert compiled.document()["tasks"][0]["input"]["v"] == stored
    as_stored = {"id": "n", "tasks": [{"key": "a", "action": "x", "input": {"v": stored}}]}
    assert hash_of(as_stored) == compiled.definition_hash
    assert compiled.definition_hash == expected_hash(compiled.document())
