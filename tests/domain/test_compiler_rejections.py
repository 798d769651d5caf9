"""compile_definition rejections (SPEC §3): exact error class and exact problems."""

from __future__ import annotations

import math
from typing import Any

import pytest

from workload_domain.compiler import compile_definition
from workload_domain.errors import ErrorCategory, InvalidDefinition, WorkflowIdMismatch

ID_PATTERN = "String should match pattern '^[a-z0-9][a-z0-9._-]{0,62}$'"
NOT_UNICODE = "must be valid Unicode (no lone surrogates)"
KEY_PATTERN = "String should match pattern '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'"


def task(key: str = "a", **fields: Any) -> dict[str, Any]:
    return {"key": key, "action": "mock", **fields}


def definition(*tasks: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"id": "wf", "tasks": list(tasks) or [task()], **fields}


def one_task(**fields: Any) -> dict[str, Any]:
    return definition(task(**fields))


def problems(raw: object, *, workflow_id: str | None = None) -> list[tuple[str, str]]:
    with pytest.raises(InvalidDefinition) as info:
        compile_definition(raw, workflow_id=workflow_id)
    assert type(info.value) is InvalidDefinition
    assert info.value.code == "invalid_definition"
    assert info.value.category is ErrorCategory.INVALID_INPUT
    return [(p.path, p.message) for p in info.value.problems]


# --- non-object definitions -------------------------------------------------------------------


@pytest.mark.parametrize("raw", [[], [{"id": "wf"}], "wf", "", None, 3, 1.5, True])
def test_non_object_definition_is_rejected_at_the_root(raw: object) -> None:
    assert problems(raw) == [("", "the definition must be a JSON object")]


def test_non_object_definition_is_rejected_even_with_a_workflow_id() -> None:
    assert problems([], workflow_id="wf") == [("", "the definition must be a JSON object")]


def test_empty_object_reports_every_missing_required_field() -> None:
    assert problems({}) == [("/id", "field required"), ("/tasks", "field required")]


def test_empty_task_reports_its_missing_required_fields() -> None:
    assert problems(definition({})) == [
        ("/tasks/0/action", "field required"),
        ("/tasks/0/key", "field required"),
    ]


def test_task_that_is_not_an_object() -> None:
    assert problems(definition(3)) == [  # type: ignore[arg-type]
        ("/tasks/0", "Input should be a valid dictionary or instance of TaskSpec")
    ]


# --- unknown fields ---------------------------------------------------------------------------


def test_unknown_top_level_field() -> None:
    assert problems(definition(extra=1)) == [("/extra", "unknown field")]


def test_unknown_task_field() -> None:
    assert problems(one_task(extra=1)) == [("/tasks/0/extra", "unknown field")]


def test_unknown_retry_field() -> None:
    assert problems(one_task(retry={"max_retries": 3})) == [
        ("/tasks/0/retry/max_retries", "unknown field")
    ]


def test_fields_inside_input_are_free_form() -> None:
    compiled = compile_definition(one_task(input={"anything": {"goes": [1, "x", None]}}))
    assert compiled.tasks[0].input == {"anything": {"goes": [1, "x", None]}}


# --- wrong types, no coercion -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param(
            {"retry": {"max_attempts": "3"}},
            ("/tasks/0/retry/max_attempts", "Input should be a valid integer"),
            id="string-for-int",
        ),
        pytest.param(
            {"retry": {"max_attempts": True}},
            ("/tasks/0/retry/max_attempts", "Input should be a valid integer"),
            id="true-for-int",
        ),
        pytest.param(
            {"retry": {"max_attempts": 3.5}},
            ("/tasks/0/retry/max_attempts", "Input should be a valid integer"),
            id="float-for-int",
        ),
        pytest.param(
            {"timeout_seconds": "30"},
            ("/tasks/0/timeout_seconds", "Input should be a valid number"),
            id="string-for-number",
        ),
        pytest.param(
            {"timeout_seconds": True},
            ("/tasks/0/timeout_seconds", "Input should be a valid number"),
            id="true-for-number",
        ),
        pytest.param(
            {"retry": {"backoff_multiplier": "2"}},
            ("/tasks/0/retry/backoff_multiplier", "Input should be a valid number"),
            id="string-for-multiplier",
        ),
        pytest.param(
            {"action": 3},
            ("/tasks/0/action", "Input should be a valid string"),
            id="int-for-action",
        ),
        pytest.param(
            {"key": 3},
            ("/tasks/0/key", "Input should be a valid string"),
            id="int-for-key",
        ),
        pytest.param(
            {"input": []},
            ("/tasks/0/input", "Input should be a valid dictionary"),
            id="list-for-input",
        ),
        pytest.param(
            {"input": "{}"},
            ("/tasks/0/input", "Input should be a valid dictionary"),
            id="string-for-input",
        ),
        pytest.param(
            {"depends_on": "b"},
            ("/tasks/0/depends_on", "Input should be a valid list"),
            id="string-for-depends_on",
        ),
        pytest.param(
            {"depends_on": [3]},
            ("/tasks/0/depends_on/0", "Input should be a valid string"),
            id="int-in-depends_on",
        ),
        pytest.param(
            {"retry": 3},
            ("/tasks/0/retry", "Input should be a valid dictionary or instance of RetryPolicy"),
            id="int-for-retry",
        ),
    ],
)
def test_wrong_task_types_are_not_coerced(
    fields: dict[str, Any], expected: tuple[str, str]
) -> None:
    assert problems(one_task(**fields)) == [expected]


def test_int_for_workflow_id() -> None:
    assert problems({"id": 3, "tasks": [task()]}) == [("/id", "Input should be a valid string")]


def test_int_for_description() -> None:
    assert problems(definition(description=3)) == [
        ("/description", "Input should be a valid string")
    ]


def test_object_for_tasks() -> None:
    assert problems({"id": "wf", "tasks": {"a": task()}}) == [
        ("/tasks", "Input should be a valid list")
    ]


# --- graph problems ---------------------------------------------------------------------------


def test_duplicate_task_key_points_at_the_duplicate() -> None:
    raw = definition(task("a"), task("b"), task("a"))
    assert problems(raw) == [("/tasks/2/key", "duplicate task key 'a' (first at /tasks/0)")]


def test_every_duplicate_of_a_key_is_reported() -> None:
    raw = definition(task("a"), task("a"), task("a"))
    assert problems(raw) == [
        ("/tasks/1/key", "duplicate task key 'a' (first at /tasks/0)"),
        ("/tasks/2/key", "duplicate task key 'a' (first at /tasks/0)"),
    ]


def test_unknown_dependency() -> None:
    raw = definition(task("a"), task("b", depends_on=["a", "zz"]))
    assert problems(raw) == [("/tasks/1/depends_on/1", "unknown task 'zz'")]


def test_self_dependency() -> None:
    raw = definition(task("a"), task("b", depends_on=["a", "b"]))
    assert problems(raw) == [("/tasks/1/depends_on/1", "a task cannot depend on itself")]


def test_duplicate_dependency() -> None:
    raw = definition(task("a"), task("b", depends_on=["a", "a"]))
    assert problems(raw) == [("/tasks/1/depends_on/1", "duplicate dependency 'a'")]


def test_two_cycle_names_both_keys() -> None:
    raw = definition(task("a", depends_on=["b"]), task("b", depends_on=["a"]))
    assert problems(raw) == [("/tasks/0/depends_on", "dependency cycle: a -> b -> a")]


def test_three_cycle_names_every_key() -> None:
    raw = definition(
        task("x"),
        task("a", depends_on=["c", "x"]),
        task("b", depends_on=["a"]),
        task("c", depends_on=["b"]),
        task("y", depends_on=["x"]),
    )
    assert problems(raw) == [("/tasks/1/depends_on", "dependency cycle: a -> c -> b -> a")]


def test_two_independent_cycles_are_both_reported() -> None:
    raw = definition(
        task("a", depends_on=["b"]),
        task("b", depends_on=["a"]),
        task("c", depends_on=["d"]),
        task("d", depends_on=["c"]),
    )
    assert problems(raw) == [
        ("/tasks/0/depends_on", "dependency cycle: a -> b -> a"),
        ("/tasks/2/depends_on", "dependency cycle: c -> d -> c"),
    ]


def test_a_thousand_task_cycle_names_every_key_without_recursion() -> None:
    n = 1000
    raw = definition(*(task(f"t{i}", depends_on=[f"t{(i + 1) % n}"]) for i in range(n)))
    [(path, message)] = problems(raw)
    assert path == "/tasks/0/depends_on"
    keys = message.removeprefix("dependency cycle: ").split(" -> ")
    assert keys == [*(f"t{i}" for i in range(n)), "t0"]


# --- id and key patterns ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "workflow_id",
    ["Wf", "WF", "-wf", ".wf", "_wf", "w f", "wf\n", "", "w" * 64, "wé", "w/f"],
)
def test_invalid_workflow_ids(workflow_id: str) -> None:
    assert problems({"id": workflow_id, "tasks": [task()]}) == [("/id", ID_PATTERN)]


@pytest.mark.parametrize("workflow_id", ["w", "0", "w" * 63, "a.b_c-d9", "9-._"])
def test_valid_workflow_ids(workflow_id: str) -> None:
    assert compile_definition({"id": workflow_id, "tasks": [task()]}).workflow_id == workflow_id


@pytest.mark.parametrize("key", ["-a", ".a", "_a", "a b", "a\n", "", "K" * 64, "a/b", "ä"])
def test_invalid_task_keys(key: str) -> None:
    assert problems(definition(task(key))) == [("/tasks/0/key", KEY_PATTERN)]


@pytest.mark.parametrize("key", ["a", "A", "0", "K" * 63, "Fetch.Data_v2-x"])
def test_valid_task_keys(key: str) -> None:
    assert compile_definition(definition(task(key))).task_keys == (key,)


# --- bounds -----------------------------------------------------------------------------------


def test_zero_tasks() -> None:
    assert problems({"id": "wf", "tasks": []}) == [
        ("/tasks", "List should have at least 1 item after validation, not 0")
    ]


def test_1001_tasks() -> None:
    raw = {"id": "wf", "tasks": [task(f"t{i}") for i in range(1001)]}
    assert problems(raw) == [
        ("/tasks", "List should have at most 1000 items after validation, not 1001")
    ]


def test_1000_tasks_are_accepted() -> None:
    raw = {"id": "wf", "tasks": [task(f"t{i}") for i in range(1000)]}
    assert len(compile_definition(raw).tasks) == 1000


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "Input should be greater than 0"),
        (0.0, "Input should be greater than 0"),
        (-1, "Input should be greater than 0"),
        (86400.5, "Input should be less than or equal to 86400"),
        (86401, "Input should be less than or equal to 86400"),
        (math.nan, "Input should be a finite number"),
        (math.inf, "Input should be a finite number"),
        (-math.inf, "Input should be a finite number"),
    ],
)
def test_timeout_out_of_range(value: float, message: str) -> None:
    assert problems(one_task(timeout_seconds=value)) == [("/tasks/0/timeout_seconds", message)]


@pytest.mark.parametrize("value", [86400, 86400.0, 0.001, 1])
def test_timeout_in_range(value: float) -> None:
    assert compile_definition(one_task(timeout_seconds=value)).tasks[0].timeout_seconds == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "Input should be greater than or equal to 1"),
        (-1, "Input should be greater than or equal to 1"),
        (101, "Input should be less than or equal to 100"),
    ],
)
def test_max_attempts_out_of_range(value: int, message: str) -> None:
    assert problems(one_task(retry={"max_attempts": value})) == [
        ("/tasks/0/retry/max_attempts", message)
    ]


@pytest.mark.parametrize("value", [1, 100])
def test_max_attempts_in_range(value: int) -> None:
    compiled = compile_definition(one_task(retry={"max_attempts": value}))
    assert compiled.tasks[0].retry.max_attempts == value


def test_negative_initial_backoff() -> None:
    assert problems(one_task(retry={"initial_backoff_seconds": -1})) == [
        ("/tasks/0/retry/initial_backoff_seconds", "Input should be greater than or equal to 0")
    ]


def test_negative_backoffs_are_both_reported() -> None:
    retry = {"initial_backoff_seconds": -0.5, "max_backoff_seconds": -2}
    assert problems(one_task(retry=retry)) == [
        ("/tasks/0/retry/initial_backoff_seconds", "Input should be greater than or equal to 0"),
        ("/tasks/0/retry/max_backoff_seconds", "Input should be greater than or equal to 0"),
    ]


def test_multiplier_below_one() -> None:
    assert problems(one_task(retry={"backoff_multiplier": 0.5})) == [
        ("/tasks/0/retry/backoff_multiplier", "Input should be greater than or equal to 1")
    ]


def test_multiplier_one_and_zero_backoffs_are_accepted() -> None:
    retry = {"backoff_multiplier": 1, "initial_backoff_seconds": 0, "max_backoff_seconds": 0}
    policy = compile_definition(one_task(retry=retry)).tasks[0].retry
    assert (policy.backoff_multiplier, policy.initial_backoff_seconds) == (1, 0)
    assert policy.max_backoff_seconds == 0


def test_max_backoff_below_initial() -> None:
    retry = {"initial_backoff_seconds": 10, "max_backoff_seconds": 5}
    assert problems(one_task(retry=retry)) == [
        (
            "/tasks/0/retry/max_backoff_seconds",
            "must be greater than or equal to initial_backoff_seconds",
        )
    ]


def test_initial_backoff_above_default_max_backoff() -> None:
    assert problems(one_task(retry={"initial_backoff_seconds": 61})) == [
        (
            "/tasks/0/retry/max_backoff_seconds",
            "must be greater than or equal to initial_backoff_seconds",
        )
    ]


def test_max_backoff_equal_to_initial_is_accepted() -> None:
    retry = {"initial_backoff_seconds": 5, "max_backoff_seconds": 5}
    assert compile_definition(one_task(retry=retry)).tasks[0].retry.max_backoff_seconds == 5


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("initial_backoff_seconds", math.nan),
        ("backoff_multiplier", math.nan),
        ("backoff_multiplier", math.inf),
        ("max_backoff_seconds", math.nan),
        ("max_backoff_seconds", math.inf),
    ],
)
def test_non_finite_retry_numbers(field: str, value: float) -> None:
    assert problems(one_task(retry={field: value})) == [
        (f"/tasks/0/retry/{field}", "Input should be a finite number")
    ]


def test_infinite_initial_backoff() -> None:
    # An infinite initial backoff also exceeds the default maximum; the finite-number problem is
    # the one that must be there.
    found = problems(one_task(retry={"initial_backoff_seconds": math.inf}))
    assert ("/tasks/0/retry/initial_backoff_seconds", "Input should be a finite number") in found
    assert {path for path, _ in found} <= {
        "/tasks/0/retry/initial_backoff_seconds",
        "/tasks/0/retry/max_backoff_seconds",
    }


def test_empty_action() -> None:
    assert problems(one_task(action="")) == [
        ("/tasks/0/action", "String should have at least 1 character")
    ]


def test_action_of_129_characters() -> None:
    assert problems(one_task(action="x" * 129)) == [
        ("/tasks/0/action", "String should have at most 128 characters")
    ]


def test_action_of_128_characters_is_accepted() -> None:
    assert compile_definition(one_task(action="x" * 128)).tasks[0].action == "x" * 128


# --- values PostgreSQL JSONB cannot hold -------------------------------------------------------


def test_nul_in_an_input_string_value() -> None:
    assert problems(one_task(input={"a": "x\x00y"})) == [
        ("/tasks/0/input/a", "strings must not contain U+0000")
    ]


def test_nul_in_an_input_key() -> None:
    assert problems(one_task(input={"a\x00": 1})) == [
        ("/tasks/0/input/a\x00", "keys must not contain U+0000")
    ]


def test_nul_deep_inside_input_with_escaped_pointer() -> None:
    raw = one_task(input={"o": {"k/~": [1, "\x00"]}})
    assert problems(raw) == [("/tasks/0/input/o/k~1~0/1", "strings must not contain U+0000")]


def test_non_finite_numbers_inside_input() -> None:
    raw = one_task(input={"f": math.nan, "g": [math.inf], "h": {"i": -math.inf}})
    assert problems(raw) == [
        ("/tasks/0/input/f", "numbers must be finite"),
        ("/tasks/0/input/g/0", "numbers must be finite"),
        ("/tasks/0/input/h/i", "numbers must be finite"),
    ]


def test_too_deep_input() -> None:
    value: Any = {}
    for _ in range(64):
        value = {"k": value}
    [(path, message)] = problems(one_task(input=value))
    assert path == "/tasks/0/input" + "/k" * 64
    assert message == "nesting is deeper than 64 levels"


def test_extremely_deep_input_does_not_recurse() -> None:
    value: Any = 1
    for _ in range(100_000):
        value = [value]
    [(path, message)] = problems(one_task(input={"x": value}))
    assert path == "/tasks/0/input/x" + "/0" * 63
    assert message == "nesting is deeper than 64 levels"


def test_input_nested_64_levels_is_accepted() -> None:
    value: Any = {}
    for _ in range(63):
        value = {"k": value}
    assert compile_definition(one_task(input=value)).tasks[0].input == value


# Strings the definition stores outside `input` go to JSONB too: U+0000 and lone surrogates
# (json.loads('"\\ud800"') yields one) must be refused there as well, never crash.


def test_nul_in_action_is_rejected() -> None:
    assert problems(one_task(action="mo\x00ck")) == [
        ("/tasks/0/action", "strings must not contain U+0000")
    ]


def test_nul_in_description_is_rejected() -> None:
    assert problems(definition(description="a\x00b")) == [
        ("/description", "strings must not contain U+0000")
    ]


@pytest.mark.parametrize(
    ("input_value", "path", "message"),
    [
        ({"x": "\ud800"}, "/tasks/0/input/x", f"strings {NOT_UNICODE}"),
        ({"\udfff": 1}, "/tasks/0/input/\udfff", f"keys {NOT_UNICODE}"),
        ({"x": ["é\ud800"]}, "/tasks/0/input/x/0", f"strings {NOT_UNICODE}"),
    ],
)
def test_lone_surrogate_in_input_is_a_problem_not_a_crash(
    input_value: dict[str, Any], path: str, message: str
) -> None:
    assert problems(one_task(input=input_value)) == [(path, message)]


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(one_task(action="\ud800"), id="action"),
        pytest.param(definition(description="\udc00"), id="description"),
    ],
)
def test_lone_surrogate_outside_input_is_one_problem(raw: dict[str, Any]) -> None:
    found = problems(raw)
    assert len(found) == 1
    assert found[0][0] in {"/tasks/0/action", "/description"}


# --- many problems at once, sorted ------------------------------------------------------------


def test_every_problem_is_reported_at_once() -> None:
    raw = {
        "id": "Bad",
        "tasks": [
            task("a", timeout_seconds="30"),
            task("b", retry={"max_attempts": 0}),
            task("c", depends_on=["nope"]),
            task("a"),
            task("e", input={"s": "\x00"}, extra=True),
        ],
    }
    assert problems(raw) == [
        ("/id", ID_PATTERN),
        ("/tasks/0/timeout_seconds", "Input should be a valid number"),
        ("/tasks/1/retry/max_attempts", "Input should be greater than or equal to 1"),
        ("/tasks/2/depends_on/0", "unknown task 'nope'"),
        ("/tasks/3/key", "duplicate task key 'a' (first at /tasks/0)"),
        ("/tasks/4/extra", "unknown field"),
        ("/tasks/4/input/s", "strings must not contain U+0000"),
    ]


def test_five_problems_in_five_tasks_are_five_problems() -> None:
    raw = definition(
        task("a", action=""),
        task("b", retry={"backoff_multiplier": 0.5}),
        task("c", depends_on=["c"]),
        task("d", input=[]),
        task("e", retry={"initial_backoff_seconds": 2, "max_backoff_seconds": 1}),
    )
    assert problems(raw) == [
        ("/tasks/0/action", "String should have at least 1 character"),
        ("/tasks/1/retry/backoff_multiplier", "Input should be greater than or equal to 1"),
        ("/tasks/2/depends_on/0", "a task cannot depend on itself"),
        ("/tasks/3/input", "Input should be a valid dictionary"),
        (
            "/tasks/4/retry/max_backoff_seconds",
            "must be greater than or equal to initial_backoff_seconds",
        ),
    ]


def test_graph_problems_are_reported_together_with_field_problems() -> None:
    raw = definition(
        task("a", depends_on=["b"], timeout_seconds=0),
        task("b", depends_on=["a"]),
    )
    assert problems(raw) == [
        ("/tasks/0/depends_on", "dependency cycle: a -> b -> a"),
        ("/tasks/0/timeout_seconds", "Input should be greater than 0"),
    ]


def test_problems_sort_numeric_segments_numerically() -> None:
    tasks = [task(f"t{i}") for i in range(12)]
    tasks[10]["timeout_seconds"] = 0
    tasks[2]["timeout_seconds"] = 0
    tasks[9]["action"] = ""
    tasks[11]["input"] = {"10": "\x00", "9": "\x00", "x": "\x00"}
    assert problems(definition(*tasks)) == [
        ("/tasks/2/timeout_seconds", "Input should be greater than 0"),
        ("/tasks/9/action", "String should have at least 1 character"),
        ("/tasks/10/timeout_seconds", "Input should be greater than 0"),
        ("/tasks/11/input/9", "strings must not contain U+0000"),
        ("/tasks/11/input/10", "strings must not contain U+0000"),
        ("/tasks/11/input/x", "strings must not contain U+0000"),
    ]


def test_problems_sort_depends_on_indices_numerically() -> None:
    deps = [f"missing{i}" for i in range(11)]
    raw = definition(task("a", depends_on=deps))
    assert [path for path, _ in problems(raw)] == [f"/tasks/0/depends_on/{i}" for i in range(11)]


# str.isdigit() is true for "²" but int("²") fails: sorting must not crash on such segments.


def test_problem_path_with_a_non_decimal_digit_segment_is_reported() -> None:
    assert problems(definition(**{"²": 1})) == [("/²", "unknown field")]


def test_input_key_with_a_non_decimal_digit_is_reported() -> None:
    assert problems(one_task(input={"²": "\x00"})) == [
        ("/tasks/0/input/²", "strings must not contain U+0000")
    ]


# --- workflow_id argument ---------------------------------------------------------------------


def test_different_body_id_is_a_mismatch() -> None:
    with pytest.raises(WorkflowIdMismatch) as info:
        compile_definition({"id": "other", "tasks": [task()]}, workflow_id="wf")
    assert type(info.value) is WorkflowIdMismatch
    assert info.value.code == "workflow_id_mismatch"
    assert info.value.category is ErrorCategory.INVALID_INPUT
    assert not isinstance(info.value, InvalidDefinition)


@pytest.mark.parametrize("body_id", [5, None, ["wf"], {"x": 1}, True])
def test_a_body_id_that_is_not_a_string_is_an_invalid_definition(body_id: object) -> None:
    # SPEC §6: wrong types are 400 invalid_definition — not a mismatch with a Python repr.
    assert problems({"id": body_id, "tasks": [task()]}, workflow_id="wf") == [
        ("/id", "Input should be a valid string")
    ]


def test_mismatch_is_case_sensitive() -> None:
    with pytest.raises(WorkflowIdMismatch):
        compile_definition({"id": "wf", "tasks": [task()]}, workflow_id="WF")


def test_mismatch_wins_over_other_problems() -> None:
    with pytest.raises(WorkflowIdMismatch):
        compile_definition({"id": "other", "tasks": []}, workflow_id="wf")


def test_matching_body_id_with_other_problems_is_invalid_definition() -> None:
    assert problems({"id": "wf", "tasks": []}, workflow_id="wf") == [
        ("/tasks", "List should have at least 1 item after validation, not 0")
    ]


def test_invalid_workflow_id_argument_is_reported_at_id() -> None:
    assert problems({"tasks": [task()]}, workflow_id="WF") == [("/id", ID_PATTERN)]
