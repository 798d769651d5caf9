"""The DAG of ``drafts show`` / ``drafts approve`` as text: order, alignment, hostile names."""

from __future__ import annotations

from typing import Any

import pytest

from workload_cli._dag import dag_lines, topological_order


def task(key: str, *after: str, action: str = "mock") -> dict[str, Any]:
    return {"key": key, "action": action, "depends_on": list(after)}


def keys(tasks: list[Any]) -> list[str]:
    return [t["key"] for t in tasks]


@pytest.mark.parametrize(
    ("tasks", "expected"),
    [
        ([task("a"), task("b", "a"), task("c", "b")], ["a", "b", "c"]),
        ([task("c", "b"), task("b", "a"), task("a")], ["a", "b", "c"]),
        ([task("d", "b", "c"), task("b", "a"), task("c", "a"), task("a")], ["a", "b", "c", "d"]),
        ([task("z"), task("y"), task("x", "z")], ["z", "y", "x"]),
        ([task("late", "first"), task("solo"), task("first")], ["solo", "first", "late"]),
        ([], []),
    ],
    ids=["chain", "reversed-chain", "diamond", "ties-in-definition-order", "ready-first", "empty"],
)
def test_each_task_comes_after_what_it_depends_on(
    tasks: list[dict[str, Any]], expected: list[str]
) -> None:
    ordered, unordered = topological_order(tasks)
    assert (keys(ordered), unordered) == (expected, [])


def test_tasks_that_cannot_be_ordered_come_last_in_definition_order() -> None:
    tasks = [task("x", "y"), task("a"), task("y", "x"), task("b", "ghost"), task("c", "b")]
    ordered, unordered = topological_order(tasks)
    assert keys(ordered) == ["a"]
    assert keys(unordered) == ["x", "y", "b", "c"]


def test_lines_align_actions_and_name_dependencies() -> None:
    definition = {
        "id": "nightly",
        "tasks": [
            task("report", "summarize", "fetch", action="mail"),
            task("fetch", action="http_get"),
            task("summarize", "fetch", action="agent"),
        ],
    }
    assert dag_lines(definition) == [
        "fetch      http_get",
        "summarize  agent     depends on fetch",
        "report     mail      depends on summarize, fetch",
    ]


def test_a_cycle_is_marked() -> None:
    assert dag_lines({"tasks": [task("a", "b"), task("b", "a"), task("c")]}) == [
        "c  mock",
        "a  mock  depends on b  (on a cycle, or after an unknown task)",
        "b  mock  depends on a  (on a cycle, or after an unknown task)",
    ]


@pytest.mark.parametrize(
    ("definition", "expected"),
    [
        ({}, []),
        ({"tasks": "not a list"}, []),
        ({"tasks": [1, None, task("a")]}, ["a  mock"]),
        (
            {"tasks": [task("a", action="rm -rf /\x1b[2J")]},
            ['a  "rm -rf /\\u001b[2J"'],
        ),
        (
            {"tasks": [task("b\u202eevil", action="mock")]},
            ['"b\\u202eevil"  mock'],
        ),
    ],
    ids=["no-tasks", "tasks-not-a-list", "items-not-objects", "escape-in-action", "bidi-in-key"],
)
def test_hostile_definitions_render_safely(definition: dict[str, Any], expected: list[str]) -> None:
    assert dag_lines(definition) == expected
